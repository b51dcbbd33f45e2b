// KLineage CUDA emulator runtime: block scheduler (fibers or plain loop), barriers, warp
// rendezvous, shared-memory poisoning, launch checks, run-time error reports and the host API.
//
// One OS thread runs everything. Blocks run one after another; within a block every CUDA thread
// is a fiber with its own stack, switched by klemu_switch (switch.S). A pass of the scheduler
// resumes every ready fiber once, in forward (schedule 0) or reverse (schedule 1) order; a fiber
// runs until it waits at a barrier or warp collective, or returns. Blocks always run in index
// order: kernels that spin on an earlier block (decoupled look-back) are right on real GPUs.
#include "klemu.h"

#include <csignal>
#include <dlfcn.h>
#include <ucontext.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define KLEMU_ASAN 1
#include <sanitizer/common_interface_defs.h>
#endif

extern "C" void klemu_switch(void** save_sp, void* next_sp);
extern "C" void klemu_fiber_start();

namespace klemu {

Fiber* g_cur;
uint3 g_block_idx;
dim3 g_block_dim, g_grid_dim;
unsigned long g_block_epoch = 1;

namespace {

constexpr int kMaxThreads = 1024;
constexpr size_t kDefaultSmem = 48 * 1024, kOptinSmem = 227 * 1024;

struct Warp {
  unsigned waiting;  // lanes waiting at a collective
  unsigned exited;   // lanes that returned (or do not exist in a partial last warp)
};

int g_schedule = 0;
const KInfo* g_kernel = nullptr;
bool g_fiber_mode = false;
Fiber g_fibers[kMaxThreads];
Warp g_warps[kMaxThreads / 32];
int g_nthreads = 0, g_live = 0, g_bar_count = 0, g_bar_pred = 0;
void* g_sched_sp = nullptr;
void (*g_body)(void*) = nullptr;
void* g_ctx = nullptr;
char* g_stacks = nullptr;
size_t g_stack_size = 0;
unsigned char* g_dyn = nullptr;
size_t g_dyn_size = 0;
std::vector<SharedReg*>* g_globals = nullptr;
cudaError_t g_last_error = cudaSuccess;
struct FnAttr { const void* fn; int max_dyn; };
std::vector<FnAttr> g_attrs;
int g_any_dyn_attr = 0;
#if KLEMU_ASAN
const void* g_main_bottom = nullptr;
size_t g_main_size = 0;
#endif

unsigned char poison_byte() { return g_schedule ? 0x7E : 0xCB; }

void json_escape(char* out, size_t cap, const char* in) {
  size_t o = 0;
  for (; *in && o + 7 < cap; ++in) {
    unsigned char c = (unsigned char)*in;
    if (c == '"' || c == '\\') { out[o++] = '\\'; out[o++] = (char)c; }
    else if (c < 0x20) o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
    else out[o++] = (char)c;
  }
  out[o] = 0;
}

const char* kname() { return g_kernel ? g_kernel->name : "?"; }

// "kernel K (file:line launch), block (x,y,z), thread (x,y,z)"
void where(char* buf, size_t cap) {
  if (!g_kernel) { snprintf(buf, cap, "host code"); return; }
  int n = snprintf(buf, cap, "kernel '%s' (launched at %s:%d), block (%u,%u,%u)", kname(), g_kernel->file,
                   g_kernel->line, g_block_idx.x, g_block_idx.y, g_block_idx.z);
  if (g_cur && n > 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, ", thread (%u,%u,%u)", g_cur->tid.x, g_cur->tid.y, g_cur->tid.z);
}

void report(const char* category, const char* msg) {
  char esc[4096], line[4300];
  json_escape(esc, sizeof esc, msg);
  int n = snprintf(line, sizeof line, "KLEMU-ERROR {\"category\": \"%s\", \"message\": \"%s\"}\n", category, esc);
  if (n > 0) { ssize_t r = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1); (void)r; }
}

// ---- fibers -----------------------------------------------------------------------------------------
void ensure_stacks() {
  if (g_stacks) return;
  size_t kb = 256;
#if KLEMU_ASAN
  kb = 1024;
#endif
  if (const char* e = getenv("KLEMU_STACK_KB")) kb = (size_t)atol(e);
  g_stack_size = (kb * 1024 + 4095) & ~(size_t)4095;
  size_t total = g_stack_size * kMaxThreads;
  void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fail("crash", "cannot reserve %zu bytes for fiber stacks", total);
  g_stacks = (char*)p;
#if KLEMU_ASAN
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* lo = nullptr;
    size_t sz = 0;
    pthread_attr_getstack(&attr, &lo, &sz);
    g_main_bottom = lo;
    g_main_size = sz;
    pthread_attr_destroy(&attr);
  }
#endif
  for (int i = 0; i < kMaxThreads; ++i) mprotect(g_stacks + (size_t)i * g_stack_size, 4096, PROT_NONE);  // guard
}

int g_pos = -1;  // index in the current pass's order of the fiber running now

// Next ready fiber after the running one in this pass's order, or nullptr (pass over).
inline Fiber* next_ready() {
  if (g_schedule == 0) {
    for (int i = g_pos + 1; i < g_nthreads; ++i)
      if (g_fibers[i].state == kReady) { g_pos = i; return &g_fibers[i]; }
  } else {
    for (int i = g_pos - 1; i >= 0; --i)
      if (g_fibers[i].state == kReady) { g_pos = i; return &g_fibers[i]; }
  }
  return nullptr;
}

// Scheduler side: run one pass; fibers hand over to each other directly and the last one of
// the pass switches back here. Returns whether any fiber ran.
inline bool run_pass() {
  g_pos = g_schedule == 0 ? -1 : g_nthreads;
  Fiber* f = next_ready();
  if (!f) return false;
  g_cur = f;
#if KLEMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f->stack_lo, f->stack_size);
  klemu_switch(&g_sched_sp, f->sp);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  klemu_switch(&g_sched_sp, f->sp);
#endif
  return true;
}

// Fiber side: the running fiber blocks (or exits); continue with the next ready fiber of the
// pass, or return to the scheduler.
inline void yield_from(Fiber* f, bool exiting = false) {
  Fiber* n = next_ready();
  void* target = n ? n->sp : g_sched_sp;
  if (n) g_cur = n;
#if KLEMU_ASAN
  if (n) __sanitizer_start_switch_fiber(exiting ? nullptr : &f->asan_fake, n->stack_lo, n->stack_size);
  else __sanitizer_start_switch_fiber(exiting ? nullptr : &f->asan_fake, g_main_bottom, g_main_size);
  klemu_switch(&f->sp, target);
  __sanitizer_finish_switch_fiber(f->asan_fake, nullptr, nullptr);
#else
  (void)exiting;
  klemu_switch(&f->sp, target);
#endif
}

void release_barrier() {
  int count = g_bar_pred, n = g_bar_count;
  for (int i = 0; i < g_nthreads; ++i) {
    Fiber& t = g_fibers[i];
    if (t.state != kAtBarrier) continue;
    t.result = t.op == 0 ? (uint64_t)count : t.op == 1 ? (uint64_t)(count == n) : (uint64_t)(count > 0);
    t.state = kReady;
  }
  g_bar_count = g_bar_pred = 0;
}

void thread_exit(Fiber* f) {
  f->state = kExited;
  --g_live;
  Warp& w = g_warps[f->warp];
  w.exited |= 1u << f->lane;
  if (w.waiting) {
    for (unsigned l = 0; l < 32; ++l) {
      Fiber& t = g_fibers[f->warp * 32 + l];
      if ((w.waiting >> l & 1u) && (t.mask >> f->lane & 1u)) {
        g_cur = &t;
        fail("crash", "%s at line %d: its mask 0x%08x names lane %u, which exited without joining", t.what,
             t.line, t.mask, f->lane);
      }
    }
  }
  if (g_bar_count > 0 && g_bar_count == g_live) release_barrier();
}

void fiber_main(Fiber* f) {
#if KLEMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
  g_body(g_ctx);
  thread_exit(f);
  yield_from(f, true);
  __builtin_trap();
}

void init_fiber(Fiber* f, int i) {
  f->stack_lo = g_stacks + (size_t)i * g_stack_size + 4096;
  f->stack_size = g_stack_size - 4096;
  uint64_t* sp = (uint64_t*)(f->stack_lo + f->stack_size) - 8;   // 16-byte aligned initial frame
  uint32_t csr[2];
  __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(csr[0]), "=m"(csr[1]));
  csr[1] &= 0xffffu;
  sp[0] = (uint64_t)csr[0] | ((uint64_t)csr[1] << 32);
  sp[1] = 0;                                     // r15
  sp[2] = 0;                                     // r14
  sp[3] = (uint64_t)(void*)&fiber_main;          // r13: entry
  sp[4] = (uint64_t)f;                           // r12: argument
  sp[5] = 0;                                     // rbx
  sp[6] = 0;                                     // rbp
  sp[7] = (uint64_t)(void*)&klemu_fiber_start;   // return address
  f->sp = sp;
  f->asan_fake = nullptr;
}

const char* state_words(const Fiber& t) {
  return t.state == kAtBarrier ? "barrier" : t.state == kAtWait ? t.what : "warp collective";
}

[[noreturn]] void deadlock() {
  const Fiber* bar = nullptr;
  const Fiber* warp = nullptr;
  for (int i = 0; i < g_nthreads; ++i) {
    const Fiber& t = g_fibers[i];
    if (t.state == kAtBarrier && !bar) bar = &t;
    if (t.state == kAtWarp && !warp) warp = &t;
  }
  const Fiber* async = nullptr;
  for (int i = 0; i < g_nthreads && !async; ++i)
    if (g_fibers[i].state == kAtWait) async = &g_fibers[i];
  if (async && !warp && !bar) {
    g_cur = const_cast<Fiber*>(async);
    fail("crash", "deadlock: %d live threads all blocked; this thread waits at %s (line %d), which nothing "
         "left running can complete", g_live, async->what, async->line);
  }
  char extra[512] = "";
  const Fiber* first = warp ? warp : bar;
  if (warp && bar)
    snprintf(extra, sizeof extra, "; thread (%u,%u,%u) waits at %s (line %d)", bar->tid.x, bar->tid.y, bar->tid.z,
             bar->what, bar->line);
  else if (async)
    snprintf(extra, sizeof extra, "; thread (%u,%u,%u) waits at %s (line %d)", async->tid.x, async->tid.y,
             async->tid.z, async->what, async->line);
  g_cur = const_cast<Fiber*>(first);
  if (warp)
    fail("crash", "deadlock: %d live threads all blocked; this thread waits at %s (line %d) with mask 0x%08x, "
         "but not every lane of the mask arrives at a matching call%s", g_live, warp->what, warp->line, warp->mask, extra);
  fail("crash", "deadlock: %d live threads all blocked at %s (line %d)%s", g_live, first ? first->what : "?",
       first ? first->line : 0, extra);
}

void run_block_fibers() {
  g_live = g_nthreads;
  g_bar_count = g_bar_pred = 0;
  for (int i = 0; i < g_nthreads; ++i) init_fiber(&g_fibers[i], i);
  const int n = g_nthreads;
  (void)n;
  while (g_live > 0)
    if (!run_pass()) deadlock();
  g_cur = nullptr;
}

void run_block_loop() {
  const int n = g_nthreads;
  for (int k = 0; k < n; ++k) {
    int i = g_schedule == 0 ? k : n - 1 - k;
    g_cur = &g_fibers[i];
    g_body(g_ctx);
  }
  g_cur = nullptr;
}

// The interrupted instruction as " [pc library+offset]": the gate resolves it to file:line.
void pc_words(void* uc, char* pc, size_t cap) {
  pc[0] = 0;
  uintptr_t rip = (uintptr_t)((ucontext_t*)uc)->uc_mcontext.gregs[REG_RIP];
  Dl_info info;
  if (dladdr((void*)rip, &info) && info.dli_fname)
    snprintf(pc, cap, " [pc %s+0x%lx]", info.dli_fname, (unsigned long)(rip - (uintptr_t)info.dli_fbase));
}

void segv_handler(int sig, siginfo_t* si, void* uc) {
  char w[512], msg[1400], pc[600];
  where(w, sizeof w);
  pc_words(uc, pc, sizeof pc);
  uintptr_t a = (uintptr_t)si->si_addr, s = (uintptr_t)g_stacks;
  bool guard = g_stacks && a >= s && a < s + g_stack_size * kMaxThreads && (a - s) % g_stack_size < 4096;
  if (guard)
    snprintf(msg, sizeof msg, "stack overflow of a CUDA thread (more than %zu KB of locals) in %s", g_stack_size / 1024, w);
  else
    snprintf(msg, sizeof msg, "invalid memory access (%s at address %p) in %s%s", sig == SIGBUS ? "SIGBUS" : "SIGSEGV",
             si->si_addr, w, pc);
  report("crash", msg);
  _exit(86);
}

// Watchdog: a launch that uses more than KLEMU_LAUNCH_CPU_S seconds of CPU time (a spin on a flag
// nothing sets, an endless loop) is reported as a timeout naming where it spins.
double launch_cpu_limit() {
  static double v = -1.0;
  if (v < 0.0) {
    const char* e = getenv("KLEMU_LAUNCH_CPU_S");
    v = e ? atof(e) : 0.0;
  }
  return v;
}

void watchdog_handler(int, siginfo_t*, void* uc) {
  char w[512], msg[1400], pc[600];
  where(w, sizeof w);
  pc_words(uc, pc, sizeof pc);
  snprintf(msg, sizeof msg, "%s: still running after %.3g CPU-seconds in one launch (spin-wait on a flag nothing "
           "sets, or an endless loop?)%s", w, launch_cpu_limit(), pc);
  report("timeout", msg);
  _exit(86);
}

struct Watchdog {
  bool on = false;
  struct sigaction old{};
  Watchdog() {
    double lim = launch_cpu_limit();
    if (lim <= 0.0) return;
    struct sigaction sa{};
    sa.sa_sigaction = watchdog_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGVTALRM, &sa, &old);
    struct itimerval t{};
    t.it_value.tv_sec = (time_t)lim;
    t.it_value.tv_usec = (suseconds_t)((lim - (double)(time_t)lim) * 1e6);
    setitimer(ITIMER_VIRTUAL, &t, nullptr);
    on = true;
  }
  ~Watchdog() {
    if (!on) return;
    struct itimerval t{};
    setitimer(ITIMER_VIRTUAL, &t, nullptr);
    sigaction(SIGVTALRM, &old, nullptr);
  }
};

struct SignalGuard {
#if !KLEMU_ASAN
  struct sigaction old_segv, old_bus;
  stack_t old_alt;
  SignalGuard() {
    static char* alt = nullptr;
    if (!alt) alt = (char*)malloc(1 << 16);
    stack_t ss{};
    ss.ss_sp = alt;
    ss.ss_size = 1 << 16;
    sigaltstack(&ss, &old_alt);
    struct sigaction sa{};
    sa.sa_sigaction = segv_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
  }
  ~SignalGuard() {
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    sigaltstack(&old_alt, nullptr);
  }
#endif
};

#if KLEMU_ASAN
constexpr size_t kSmemSlack = 0;
#else
constexpr size_t kSmemSlack = 4096;
#endif

void check_smem_slack() {
  const unsigned char p = poison_byte();
  uint64_t word;
  std::memset(&word, p, 8);
  const unsigned char* s = g_dyn + g_dyn_size;
  size_t i = 0;
  for (; i + 8 <= kSmemSlack; i += 8) {
    uint64_t v;
    std::memcpy(&v, s + i, 8);
    if (v != word) break;
  }
  for (; i < kSmemSlack; ++i) {
    if (s[i] != p) {
      g_cur = nullptr;
      fail("out_of_bounds", "wrote past the end of dynamic shared memory (%zu bytes requested at launch; "
           "byte %zu after the end changed)", g_dyn_size, i);
    }
  }
}

int max_dyn_for(const void* fn) {
  for (const FnAttr& a : g_attrs)
    if (a.fn == fn && fn) return a.max_dyn;
  if (!fn && g_any_dyn_attr) return g_any_dyn_attr;   // kernel address unknown (deduced template)
  return (int)kDefaultSmem;
}

}  // namespace

// ---- errors -----------------------------------------------------------------------------------------------
void fail(const char* category, const char* fmt, ...) {
  char msg[2048], w[512], full[3000];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  where(w, sizeof w);
  snprintf(full, sizeof full, "%s: %s", w, msg);
  report(category, full);
  _exit(86);
}

// ---- global-only loads and stores (__ldg, __ldcs, __stcs, ...) -------------------------------------------
uint64_t shared_window(const volatile void* p);  // klemu_tc.cpp

namespace {
// The calling OS thread's stack: where a plain-loop kernel's locals live.
bool on_os_stack(uintptr_t a) {
  thread_local uintptr_t lo = 0, hi = 0;
  if (!hi) {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return false;
    void* base = nullptr;
    size_t sz = 0;
    pthread_attr_getstack(&attr, &base, &sz);
    pthread_attr_destroy(&attr);
    lo = (uintptr_t)base;
    hi = lo + sz;
  }
  return a >= lo && a < hi;
}
}  // namespace

// A CUDA thread's locals are on its fiber stack (fiber mode) or on the OS thread's stack (plain loop):
// on a GPU they are registers or local memory, and a global-only access to them faults.
void check_global(const volatile void* p, const char* what, int line) {
  const uintptr_t a = (uintptr_t)p, s = (uintptr_t)g_stacks;
  const char* space = nullptr;
  if ((g_stacks && a >= s && a < s + g_stack_size * kMaxThreads) || on_os_stack(a))
    space = "local memory (a thread's register or stack copy)";
  else if (shared_window(p))
    space = "shared memory";
  if (space)
    fail("crash", "%s at line %d reads or writes %p, which is %s, not global memory (a GPU faults: "
         "operation not supported on global/shared address space)", what, line, const_cast<const void*>(p), space);
}

// ---- shared memory -------------------------------------------------------------------------------------------
void poison_shared(const volatile void* p, size_t n) { std::memset(const_cast<void*>(p), poison_byte(), n); }
SharedRegGlobal::SharedRegGlobal(SharedReg* r) {
  if (!g_globals) g_globals = new std::vector<SharedReg*>();
  g_globals->push_back(r);
}
void* dyn_smem() { return g_dyn; }
size_t dyn_smem_size() { return g_dyn_size; }
unsigned char smem_poison() { return poison_byte(); }

// ---- barriers and collectives -----------------------------------------------------------------------------
int barrier(int pred, int mode, int line, const char* what) {
  Fiber* f = g_cur;
  if (!g_fiber_mode)
    fail("crash", "internal: %s at line %d reached in a kernel compiled for plain-loop execution", what, line);
  f->state = kAtBarrier;
  f->op = mode;
  f->line = line;
  f->what = what;
  ++g_bar_count;
  g_bar_pred += pred;
  if (g_bar_count == g_live) release_barrier();
  yield_from(f);
  return (int)f->result;
}

unsigned active_mask() {
  Fiber* f = g_cur;
  unsigned ex = g_warps[f->warp].exited;
  return ~ex;
}

namespace {
inline int src_lane(int op, unsigned lane, int arg, unsigned w) {
  unsigned base = lane & ~(w - 1u), rel = lane - base;
  switch (op) {
    case kShflIdx: return (int)(base + ((unsigned)arg & (w - 1u)));
    case kShflUp: return (int)rel - arg < 0 ? (int)lane : (int)lane - arg;
    case kShflDown: return rel + (unsigned)arg >= w ? (int)lane : (int)(lane + (unsigned)arg);
    default: {  // xor: later groups are out of reach
      unsigned s = lane ^ (unsigned)arg;
      return s >= base + w ? (int)lane : (int)s;
    }
  }
}

void complete(Fiber* base, unsigned mask, int op) {
  uint64_t acc = 0;
  int64_t acci = 0;
  bool first = true;
  if (op >= kBallot && op <= kRedXor) {
    for (unsigned l = 0; l < 32; ++l) {
      if (!(mask >> l & 1u)) continue;
      uint64_t v = base[l].val;
      int64_t vi = (int64_t)(int32_t)(uint32_t)v;
      uint32_t vu = (uint32_t)v;
      switch (op) {
        case kBallot: acc |= (uint64_t)(v != 0) << l; break;
        case kAny: acc |= v != 0; break;
        case kAll: acc = first ? (v != 0) : (acc && v != 0); break;
        case kRedAddI: acci += vi; break;
        case kRedAddU: acc = (uint32_t)(acc + vu); break;
        case kRedMinI: acci = first || vi < acci ? vi : acci; break;
        case kRedMaxI: acci = first || vi > acci ? vi : acci; break;
        case kRedMinU: acc = first || vu < acc ? vu : acc; break;
        case kRedMaxU: acc = first || vu > acc ? vu : acc; break;
        case kRedAnd: acc = first ? vu : (acc & vu); break;
        case kRedOr: acc |= vu; break;
        case kRedXor: acc ^= vu; break;
      }
      first = false;
    }
    if (op == kRedAddI || op == kRedMinI || op == kRedMaxI) acc = (uint64_t)(uint32_t)(int32_t)acci;
  }
  for (unsigned l = 0; l < 32; ++l) {
    if (!(mask >> l & 1u)) continue;
    Fiber& t = base[l];
    switch (op) {
      case kSyncWarp: t.result = 0; break;
      case kShflIdx: case kShflUp: case kShflDown: case kShflXor: {
        int s = src_lane(op, l, t.arg, (unsigned)t.width);
        t.result = (mask >> s & 1u) ? base[s].val : t.val;   // a source outside the mask is undefined
        break;
      }
      case kMatchAny: {
        unsigned m = 0;
        for (unsigned k = 0; k < 32; ++k)
          if ((mask >> k & 1u) && base[k].val == t.val) m |= 1u << k;
        t.result = m;
        break;
      }
      case kMatchAll: {
        bool same = true;
        for (unsigned k = 0; k < 32; ++k)
          if ((mask >> k & 1u) && base[k].val != t.val) same = false;
        t.result = same ? mask : 0u;
        break;
      }
      default: t.result = acc;
    }
    t.state = kReady;
  }
}
}  // namespace

uint64_t warp_collective(int op, unsigned mask, uint64_t val, int arg, int width, int line, const char* what) {
  Fiber* f = g_cur;
  if (!g_fiber_mode)
    fail("crash", "internal: %s at line %d reached in a kernel compiled for plain-loop execution", what, line);
  if (!(mask >> f->lane & 1u))
    fail("crash", "%s at line %d: mask 0x%08x does not include the calling lane %u", what, line, mask, f->lane);
  if (width < 1 || width > 32 || (width & (width - 1)))
    fail("crash", "%s at line %d: width %d is not a power of two in 1..32", what, line, width);
  Warp& w = g_warps[f->warp];
  if (mask & w.exited)
    fail("crash", "%s at line %d: mask 0x%08x names lanes that have exited (0x%08x)", what, line, mask, mask & w.exited);
  f->state = kAtWarp;
  f->op = op;
  f->mask = mask;
  f->val = val;
  f->arg = arg;
  f->width = width;
  f->line = line;
  f->what = what;
  w.waiting |= 1u << f->lane;
  if ((w.waiting & mask) == mask) {
    Fiber* base = &g_fibers[f->warp * 32];
    bool match = true;
    for (unsigned l = 0; l < 32 && match; ++l)
      if ((mask >> l & 1u) && (base[l].mask != mask || base[l].op != op)) match = false;
    if (match) {
      complete(base, mask, op);
      w.waiting &= ~mask;
    }
  }
  yield_from(f);
  return f->result;
}

// ---- asynchronous waits ----------------------------------------------------------------------------------------
void wait_on(uint64_t key, int line, const char* what) {
  Fiber* f = g_cur;
  if (!g_fiber_mode)
    fail("crash", "internal: %s at line %d reached in a kernel compiled for plain-loop execution", what, line);
  f->state = kAtWait;
  f->val = key;
  f->line = line;
  f->what = what;
  yield_from(f);
}

void wake_all(uint64_t key) {
  for (int i = 0; i < g_nthreads; ++i)
    if (g_fibers[i].state == kAtWait && g_fibers[i].val == key) g_fibers[i].state = kReady;
}

void yield_now() {
  if (g_fiber_mode) yield_from(g_cur);
}

// ---- launch ---------------------------------------------------------------------------------------------------
void run_grid(const KInfo& k, dim3 grid, dim3 block, size_t smem, void (*body)(void*), void* ctx) {
  g_kernel = &k;
  g_cur = nullptr;
  unsigned long long nthreads = (unsigned long long)block.x * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    fail("crash", "invalid launch configuration: empty grid (%u,%u,%u)", grid.x, grid.y, grid.z);
  if (nthreads == 0 || nthreads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64)
    fail("crash", "invalid launch configuration: block (%u,%u,%u) = %llu threads (limit 1024; z <= 64)",
         block.x, block.y, block.z, nthreads);
  if (grid.y > 65535 || grid.z > 65535)
    fail("crash", "invalid launch configuration: grid (%u,%u,%u) exceeds 65535 in y or z", grid.x, grid.y, grid.z);
  int limit = max_dyn_for(k.fn);
  if (smem > kOptinSmem)
    fail("crash", "dynamic shared memory of %zu bytes exceeds the device maximum of %zu bytes per block", smem, kOptinSmem);
  if (smem > (size_t)limit)
    fail("crash", "dynamic shared memory of %zu bytes exceeds %d bytes; raise the limit with "
         "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)", smem, limit);
  SignalGuard guard;
  Watchdog watchdog;
  (void)guard;
  (void)watchdog;
  g_block_dim = block;
  g_grid_dim = grid;
  g_nthreads = (int)nthreads;
  g_body = body;
  g_ctx = ctx;
  g_fiber_mode = k.fibers != 0;
  // Dynamic shared memory: exact size under ASan (it reports overruns); otherwise a poisoned
  // slack after the buffer that is checked after every block, so overruns are caught anyway.
  size_t alloc = kSmemSlack ? smem + kSmemSlack : (smem ? smem : 1);
  if (posix_memalign((void**)&g_dyn, 1024, alloc)) fail("crash", "out of host memory");
  g_dyn_size = smem;
  if (g_fiber_mode) ensure_stacks();
  for (int i = 0; i < g_nthreads; ++i) {
    Fiber& f = g_fibers[i];
    f.tid = uint3{(unsigned)i % block.x, (unsigned)i / block.x % block.y, (unsigned)i / (block.x * block.y)};
    f.linear = (unsigned)i;
    f.lane = (unsigned)i % 32;
    f.warp = (unsigned)i / 32;
    f.state = kReady;
    f.mask = 0;
    f.op = -1;
  }
  const unsigned long long nblocks = (unsigned long long)grid.x * grid.y * grid.z;
  const int nwarps = (g_nthreads + 31) / 32;
  for (unsigned long long b = 0; b < nblocks; ++b) {
    unsigned long long lin = b;  // blocks keep hardware dispatch order (look-back scans rely on it)
    g_block_idx = uint3{(unsigned)(lin % grid.x), (unsigned)(lin / grid.x % grid.y), (unsigned)(lin / ((unsigned long long)grid.x * grid.y))};
    ++g_block_epoch;
    std::memset(g_dyn, poison_byte(), smem + kSmemSlack);
    if (g_globals)
      for (SharedReg* r : *g_globals) r->touch();
    if (g_fiber_mode) {
      for (int w = 0; w < nwarps; ++w) {
        g_warps[w].waiting = 0;
        int have = g_nthreads - w * 32;
        g_warps[w].exited = have >= 32 ? 0u : ~((1u << have) - 1u);
      }
      for (int i = 0; i < g_nthreads; ++i) { g_fibers[i].state = kReady; g_fibers[i].mask = 0; g_fibers[i].op = -1; }
      run_block_fibers();
    } else {
      run_block_loop();
    }
    check_smem_slack();
  }
  free(g_dyn);
  g_dyn = nullptr;
  g_kernel = nullptr;
}

cudaError_t func_set_attribute(const void* fn, int attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  if (value < 0 || (size_t)value > kOptinSmem) return g_last_error = cudaErrorInvalidValue;
  for (FnAttr& a : g_attrs)
    if (a.fn == fn) { a.max_dyn = value; g_any_dyn_attr = value > g_any_dyn_attr ? value : g_any_dyn_attr; return cudaSuccess; }
  g_attrs.push_back(FnAttr{fn, value});
  if (value > g_any_dyn_attr) g_any_dyn_attr = value;
  return cudaSuccess;
}
cudaError_t func_get_attributes(cudaFuncAttributes* a, const void* fn) {
  std::memset(a, 0, sizeof *a);
  a->maxThreadsPerBlock = 1024;
  a->numRegs = 32;
  a->ptxVersion = a->binaryVersion = 90;
  a->maxDynamicSharedSizeBytes = max_dyn_for(fn);
  return cudaSuccess;
}
cudaError_t occupancy(int* n, const void*, int block, size_t smem) {
  if (block <= 0 || block > 1024) { *n = 0; return cudaSuccess; }
  int by_threads = 2048 / block, by_smem = (int)((228 * 1024) / (smem + 1024));
  int r = by_threads < by_smem ? by_threads : by_smem;
  *n = r < 32 ? r : 32;
  return cudaSuccess;
}

// ---- streams: every launch and async copy names one; the gate gives the launcher its stream ---------------------
static bool g_watch_streams = false;
static const void* g_given_stream = nullptr;
static int g_foreign = 0;
static char g_foreign_first[512];
static void note_foreign(const char* what, const void* s) {
  if (!g_watch_streams || s == g_given_stream) return;
  if (g_foreign++ != 0) return;
  if (s == nullptr || s == (const void*)0x1)
    std::snprintf(g_foreign_first, sizeof g_foreign_first, "%s on the default stream", what);
  else if (s == (const void*)0x2)
    std::snprintf(g_foreign_first, sizeof g_foreign_first, "%s on cudaStreamPerThread", what);
  else
    std::snprintf(g_foreign_first, sizeof g_foreign_first, "%s on stream %p", what, s);
}
static const char* g_launched[64];  // distinct instantiations launched since klemu_watch_stream
static int g_n_launched = 0;
void note_stream(const KInfo& k, const void* s) {
  const char* inst = k.instance ? k.instance : k.name;
  bool seen = false;
  for (int i = 0; i < g_n_launched && !seen; ++i) seen = g_launched[i] == inst || std::strcmp(g_launched[i], inst) == 0;
  if (!seen && g_n_launched < 64) g_launched[g_n_launched++] = inst;
  if (!g_watch_streams || s == g_given_stream) return;
  char what[400];
  std::snprintf(what, sizeof what, "kernel '%s' (%s:%d)", k.name, k.file ? k.file : "?", k.line);
  note_foreign(what, s);
}

}  // namespace klemu

extern "C" void klemu_set_schedule(int s) { klemu::g_schedule = s; }
extern "C" int klemu_get_schedule() { return klemu::g_schedule; }
// The gate passes `s` as the launcher's stream, then reads how many launches used another one.
extern "C" void klemu_watch_stream(const void* s) {
  klemu::g_watch_streams = true;
  klemu::g_given_stream = s;
  klemu::g_foreign = 0;
  klemu::g_foreign_first[0] = 0;
  klemu::g_n_launched = 0;
}
extern "C" int klemu_foreign_launches() { return klemu::g_foreign; }
extern "C" const char* klemu_foreign_first() { return klemu::g_foreign_first; }
extern "C" int klemu_launched_count() { return klemu::g_n_launched; }
extern "C" const char* klemu_launched_name(int i) { return i >= 0 && i < klemu::g_n_launched ? klemu::g_launched[i] : ""; }

// ---- host runtime API -------------------------------------------------------------------------------------------
using klemu::g_last_error;
static cudaError_t ok() { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    default: return "emulated CUDA error";
  }
}
const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorUnknown"; }
cudaError_t cudaGetLastError() { cudaError_t e = g_last_error; g_last_error = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError() { return g_last_error; }
cudaError_t cudaMalloc(void** p, size_t n) {
  if (posix_memalign(p, 256, n ? n : 1)) { *p = nullptr; return g_last_error = cudaErrorMemoryAllocation; }
  return ok();
}
cudaError_t cudaMallocHost(void** p, size_t n) { return cudaMalloc(p, n); }
cudaError_t cudaMallocManaged(void** p, size_t n, unsigned) { return cudaMalloc(p, n); }
cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) { return cudaMalloc(p, n); }
cudaError_t cudaFree(void* p) { free(p); return ok(); }
cudaError_t cudaFreeHost(void* p) { free(p); return ok(); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { free(p); return ok(); }
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { if (n) std::memmove(d, s, n); return ok(); }
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t st) {
  klemu::note_foreign("cudaMemcpyAsync", st);
  return cudaMemcpy(d, s, n, k);
}
cudaError_t cudaMemcpy2D(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind) {
  for (size_t r = 0; r < h; ++r) std::memmove((char*)d + r * dp, (const char*)s + r * sp, w);
  return ok();
}
cudaError_t cudaMemcpy2DAsync(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind k, cudaStream_t st) {
  klemu::note_foreign("cudaMemcpy2DAsync", st);
  return cudaMemcpy2D(d, dp, s, sp, w, h, k);
}
cudaError_t cudaMemset(void* d, int v, size_t n) { if (n) std::memset(d, v, n); return ok(); }
cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t st) {
  klemu::note_foreign("cudaMemsetAsync", st);
  return cudaMemset(d, v, n);
}
cudaError_t cudaDeviceSynchronize() { return ok(); }
cudaError_t cudaDeviceReset() { return ok(); }
cudaError_t cudaSetDevice(int d) { return d == 0 ? ok() : (g_last_error = cudaErrorInvalidDevice); }
cudaError_t cudaGetDevice(int* d) { *d = 0; return ok(); }
cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return ok(); }
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int dev) {
  if (dev != 0) return g_last_error = cudaErrorInvalidDevice;
  switch (a) {
    case cudaDevAttrMaxThreadsPerBlock: *v = 1024; break;
    case cudaDevAttrMaxBlockDimX: case cudaDevAttrMaxBlockDimY: *v = 1024; break;
    case cudaDevAttrMaxBlockDimZ: *v = 64; break;
    case cudaDevAttrMaxGridDimX: *v = 2147483647; break;
    case cudaDevAttrMaxGridDimY: case cudaDevAttrMaxGridDimZ: *v = 65535; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = 48 * 1024; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = 227 * 1024; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *v = 228 * 1024; break;
    case cudaDevAttrTotalConstantMemory: *v = 65536; break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrMaxRegistersPerBlock: case cudaDevAttrMaxRegistersPerMultiprocessor: *v = 65536; break;
    case cudaDevAttrClockRate: *v = 1980000; break;
    case cudaDevAttrMultiProcessorCount: *v = 132; break;
    case cudaDevAttrMemoryClockRate: *v = 2619000; break;
    case cudaDevAttrGlobalMemoryBusWidth: *v = 6144; break;
    case cudaDevAttrL2CacheSize: *v = 60 * 1024 * 1024; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *v = 2048; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *v = 32; break;
    case cudaDevAttrCooperativeLaunch: *v = 0; break;
    default: *v = 0; break;
  }
  return ok();
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int dev) {
  if (dev != 0) return g_last_error = cudaErrorInvalidDevice;
  std::memset(p, 0, sizeof *p);
  std::snprintf(p->name, sizeof p->name, "NVIDIA H200 (KLineage CPU emulation)");
  p->totalGlobalMem = 141ull << 30;
  p->sharedMemPerBlock = 48 * 1024;
  p->regsPerBlock = 65536;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
  p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647;
  p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  p->clockRate = 1980000;
  p->totalConstMem = 65536;
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 132;
  p->concurrentKernels = 1;
  p->unifiedAddressing = 1;
  p->memoryClockRate = 2619000;
  p->memoryBusWidth = 6144;
  p->l2CacheSize = 60 * 1024 * 1024;
  p->maxThreadsPerMultiProcessor = 2048;
  p->sharedMemPerMultiprocessor = 228 * 1024;
  p->regsPerMultiprocessor = 65536;
  p->sharedMemPerBlockOptin = 227 * 1024;
  p->maxBlocksPerMultiProcessor = 32;
  p->reservedSharedMemPerBlock = 1024;
  return ok();
}
struct CUstream_st { int id; };
struct CUevent_st { int id; };
cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = new CUstream_st{1}; return ok(); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { return cudaStreamCreate(s); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned, int) { return cudaStreamCreate(s); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  if (s != cudaStreamPerThread && s != cudaStreamLegacy) delete s;
  return ok();
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return ok(); }
cudaError_t cudaStreamQuery(cudaStream_t) { return ok(); }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return ok(); }
cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = new CUevent_st{1}; return ok(); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { return cudaEventCreate(e); }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return ok(); }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return ok(); }
cudaError_t cudaEventQuery(cudaEvent_t) { return ok(); }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 0.0f; return ok(); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return ok(); }
cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache) { return ok(); }
cudaError_t cudaDeviceSetSharedMemConfig(cudaSharedMemConfig) { return ok(); }

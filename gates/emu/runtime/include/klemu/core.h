// KLineage CUDA emulator: keywords, built-in variables, vector types, thread state, collectives.
// Included (through klemu.h) by every translated kernel file; keep it light: it is parsed per build
// unless the precompiled header is used.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <type_traits>
#include <utility>

// ---- CUDA keywords -----------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __grid_constant__
#define __CUDACC__ 1
#define __CUDA_ARCH__ 900
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 4
#define CUDART_VERSION 12040
#define __CUDA_RUNTIME_H__ 1
#define KLEMU 1

// ---- dim3 and built-in vector types -------------------------------------------------------------
#define KLEMU_VEC1(T, N, A) struct __attribute__((aligned(A))) N##1 { T x; };
#define KLEMU_VEC2(T, N, A) struct __attribute__((aligned(A))) N##2 { T x, y; };
#define KLEMU_VEC3(T, N) struct N##3 { T x, y, z; };
#define KLEMU_VEC4(T, N, A) struct __attribute__((aligned(A))) N##4 { T x, y, z, w; };
#define KLEMU_MAKE(T, N)                                                                              \
  static inline N##1 make_##N##1(T x) { return N##1{x}; }                                              \
  static inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }                                      \
  static inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }                              \
  static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
#define KLEMU_VECS(T, N, A1, A2, A4) KLEMU_VEC1(T, N, A1) KLEMU_VEC2(T, N, A2) KLEMU_VEC3(T, N) KLEMU_VEC4(T, N, A4) KLEMU_MAKE(T, N)
KLEMU_VECS(signed char, char, 1, 2, 4)
KLEMU_VECS(unsigned char, uchar, 1, 2, 4)
KLEMU_VECS(short, short, 2, 4, 8)
KLEMU_VECS(unsigned short, ushort, 2, 4, 8)
KLEMU_VECS(int, int, 4, 8, 16)
KLEMU_VECS(unsigned int, uint, 4, 8, 16)
KLEMU_VECS(long, long, 8, 16, 16)
KLEMU_VECS(unsigned long, ulong, 8, 16, 16)
KLEMU_VECS(long long, longlong, 8, 16, 16)
KLEMU_VECS(unsigned long long, ulonglong, 8, 16, 16)
KLEMU_VECS(float, float, 4, 8, 16)
KLEMU_VECS(double, double, 8, 16, 16)

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

static constexpr int warpSize = 32;
#define CUDART_INF_F __builtin_huge_valf()
#define CUDART_NAN_F __builtin_nanf("")
#define CUDART_INF __builtin_huge_val()
#define CUDART_NAN __builtin_nan("")
#define CUDART_PI_F 3.141592654f
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_MAX_NORMAL_F 3.40282347e+38f
#define CUDART_MIN_DENORM_F 1.40129846e-45f

// ---- thread state (defined in klemu_rt.cpp) ------------------------------------------------------
namespace klemu {

enum FiberState : int { kReady = 0, kAtBarrier = 1, kAtWarp = 2, kExited = 3, kAtWait = 4 };

enum CollOp : int {
  kSyncWarp, kShflIdx, kShflUp, kShflDown, kShflXor, kBallot, kAny, kAll,
  kRedAddI, kRedAddU, kRedMinI, kRedMinU, kRedMaxI, kRedMaxU, kRedAnd, kRedOr, kRedXor,
  kMatchAny, kMatchAll,
};

struct Fiber {
  void* sp;                 // saved stack pointer while switched out
  uint3 tid;                // threadIdx
  unsigned lane, warp, linear;
  int state;
  int op;                   // collective being waited on
  unsigned mask;
  int arg, width;
  int line;                 // source line of the wait
  const char* what;         // name of the primitive being waited on
  uint64_t val;             // posted value
  uint64_t result;          // value handed back by the collective
  int pred;                 // posted predicate (barrier variants)
  char* stack_lo;
  size_t stack_size;
  void* asan_fake;
};

extern Fiber* g_cur;
extern uint3 g_block_idx;
extern dim3 g_block_dim, g_grid_dim;

// Block barrier; returns the count of arrivals whose predicate was nonzero.
// mode 0: count of nonzero predicates, 1: all nonzero, 2: any nonzero.
int barrier(int pred, int mode, int line, const char* what);
// Warp rendezvous among the lanes of `mask`; returns this lane's result.
uint64_t warp_collective(int op, unsigned mask, uint64_t val, int arg, int width, int line, const char* what);
unsigned active_mask();
// Hopper's waits (klemu_hopper.cpp): the running thread blocks until wake_all(key) (an mbarrier
// phase, a named barrier); yield_now lets the others run while it stays ready (a polling loop).
void wait_on(uint64_t key, int line, const char* what);
void wake_all(uint64_t key);
void yield_now();
[[noreturn]] void fail(const char* category, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// `__launch_bounds__(N, ...)` of the running kernel, checked first in its body (the rewrite puts the
// call there, where N's names and template parameters are in scope): a GPU refuses to launch a
// block of more than N threads (cudaErrorInvalidValue), so the emulator refuses it too.
inline void launch_bound(long long max_threads, const char* kernel) {
  const long long n = (long long)g_block_dim.x * g_block_dim.y * g_block_dim.z;
  if (max_threads > 0 && n > max_threads)
    fail("crash", "invalid launch configuration: a block of %lld threads exceeds __launch_bounds__(%lld) of %s "
         "(a GPU refuses the launch: cudaErrorInvalidValue)", n, max_threads, kernel);
}

template <class T>
inline uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
inline T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

// Static __shared__ storage: the translated declaration is a function-static array plus one of
// these (constant-initialised, so no guard); touch() poisons it on first use in every block.
extern unsigned long g_block_epoch;
void poison_shared(const volatile void* p, size_t n);
struct SharedReg;
void register_shared(SharedReg* r);  // gives it a window in the 32-bit shared address space
struct SharedReg {
  const volatile void* p;
  size_t n;
  unsigned long epoch;
  int id = 0;
  inline void touch() {
    if (__builtin_expect(epoch != g_block_epoch, 0)) {
      epoch = g_block_epoch;
      poison_shared(p, n);
      if (!id) register_shared(this);
    }
  }
};
// Namespace-scope __shared__ variables are poisoned by the runtime at every block start.
struct SharedRegGlobal {
  explicit SharedRegGlobal(SharedReg* r);
};
void* dyn_smem();

}  // namespace klemu

#define threadIdx (::klemu::g_cur->tid)
#define blockIdx (::klemu::g_block_idx)
// References, not macros: host code names members gridDim / blockDim (cudaLaunchConfig_t).
inline dim3& blockDim = ::klemu::g_block_dim;
inline dim3& gridDim = ::klemu::g_grid_dim;

// ---- barriers and warp collectives ----------------------------------------------------------------
static inline void __syncthreads(int line = __builtin_LINE()) { ::klemu::barrier(0, 0, line, "__syncthreads"); }
static inline int __syncthreads_count(int p, int line = __builtin_LINE()) {
  return ::klemu::barrier(p != 0, 0, line, "__syncthreads_count");
}
static inline int __syncthreads_and(int p, int line = __builtin_LINE()) {
  return ::klemu::barrier(p != 0, 1, line, "__syncthreads_and");
}
static inline int __syncthreads_or(int p, int line = __builtin_LINE()) {
  return ::klemu::barrier(p != 0, 2, line, "__syncthreads_or");
}
static inline void __syncwarp(unsigned mask = 0xffffffffu, int line = __builtin_LINE()) {
  ::klemu::warp_collective(::klemu::kSyncWarp, mask, 0, 0, 32, line, "__syncwarp");
}
static inline unsigned __activemask() { return ::klemu::active_mask(); }

template <class T>
static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32, int line = __builtin_LINE()) {
  return ::klemu::from_bits<T>(::klemu::warp_collective(::klemu::kShflIdx, mask, ::klemu::to_bits(v), src, width, line, "__shfl_sync"));
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32, int line = __builtin_LINE()) {
  return ::klemu::from_bits<T>(::klemu::warp_collective(::klemu::kShflUp, mask, ::klemu::to_bits(v), (int)d, width, line, "__shfl_up_sync"));
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32, int line = __builtin_LINE()) {
  return ::klemu::from_bits<T>(::klemu::warp_collective(::klemu::kShflDown, mask, ::klemu::to_bits(v), (int)d, width, line, "__shfl_down_sync"));
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lm, int width = 32, int line = __builtin_LINE()) {
  return ::klemu::from_bits<T>(::klemu::warp_collective(::klemu::kShflXor, mask, ::klemu::to_bits(v), lm, width, line, "__shfl_xor_sync"));
}
static inline unsigned __ballot_sync(unsigned mask, int p, int line = __builtin_LINE()) {
  return (unsigned)::klemu::warp_collective(::klemu::kBallot, mask, p != 0, 0, 32, line, "__ballot_sync");
}
static inline int __any_sync(unsigned mask, int p, int line = __builtin_LINE()) {
  return (int)::klemu::warp_collective(::klemu::kAny, mask, p != 0, 0, 32, line, "__any_sync");
}
static inline int __all_sync(unsigned mask, int p, int line = __builtin_LINE()) {
  return (int)::klemu::warp_collective(::klemu::kAll, mask, p != 0, 0, 32, line, "__all_sync");
}
#define KLEMU_RED(NAME, OPI, OPU)                                                                    \
  static inline int NAME(unsigned mask, int v, int line = __builtin_LINE()) {                          \
    return (int)::klemu::warp_collective(OPI, mask, (uint64_t)(int64_t)v, 0, 32, line, #NAME);          \
  }                                                                                                   \
  static inline unsigned NAME(unsigned mask, unsigned v, int line = __builtin_LINE()) {                \
    return (unsigned)::klemu::warp_collective(OPU, mask, v, 0, 32, line, #NAME);                        \
  }
KLEMU_RED(__reduce_add_sync, ::klemu::kRedAddI, ::klemu::kRedAddU)
KLEMU_RED(__reduce_min_sync, ::klemu::kRedMinI, ::klemu::kRedMinU)
KLEMU_RED(__reduce_max_sync, ::klemu::kRedMaxI, ::klemu::kRedMaxU)
static inline unsigned __reduce_and_sync(unsigned mask, unsigned v, int line = __builtin_LINE()) {
  return (unsigned)::klemu::warp_collective(::klemu::kRedAnd, mask, v, 0, 32, line, "__reduce_and_sync");
}
static inline unsigned __reduce_or_sync(unsigned mask, unsigned v, int line = __builtin_LINE()) {
  return (unsigned)::klemu::warp_collective(::klemu::kRedOr, mask, v, 0, 32, line, "__reduce_or_sync");
}
static inline unsigned __reduce_xor_sync(unsigned mask, unsigned v, int line = __builtin_LINE()) {
  return (unsigned)::klemu::warp_collective(::klemu::kRedXor, mask, v, 0, 32, line, "__reduce_xor_sync");
}
template <class T>
static inline unsigned __match_any_sync(unsigned mask, T v, int line = __builtin_LINE()) {
  return (unsigned)::klemu::warp_collective(::klemu::kMatchAny, mask, ::klemu::to_bits(v), 0, 32, line, "__match_any_sync");
}
template <class T>
static inline unsigned __match_all_sync(unsigned mask, T v, int* pred, int line = __builtin_LINE()) {
  unsigned r = (unsigned)::klemu::warp_collective(::klemu::kMatchAll, mask, ::klemu::to_bits(v), 0, 32, line, "__match_all_sync");
  *pred = r != 0;
  return r;
}

// Fences and clocks: fibers are cooperative, so memory is always coherent.
static inline void __threadfence() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
static inline long long clock64() { return (long long)__builtin_ia32_rdtsc(); }
// clock() is the C library one (<ctime>); only clock64() is emulated.
[[noreturn]] static inline void __trap() { ::klemu::fail("crash", "__trap() called"); }
[[noreturn]] static inline void __brkpt() { ::klemu::fail("crash", "__brkpt() called"); }
static inline unsigned __lanemask_lt() { return (1u << ::klemu::g_cur->lane) - 1u; }
static inline unsigned __lanemask_le() { return (unsigned)((2ull << ::klemu::g_cur->lane) - 1u); }
static inline unsigned __lanemask_eq() { return 1u << ::klemu::g_cur->lane; }
static inline unsigned __lanemask_gt() { return ~__lanemask_le(); }
static inline unsigned __lanemask_ge() { return ~__lanemask_lt(); }

// Kernel printf goes to stderr: the gate's child process may use stdout for its own protocol.
#include <cstdarg>
static inline int klemu_printf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  return n;
}
namespace std { using ::klemu_printf; }
#define printf klemu_printf

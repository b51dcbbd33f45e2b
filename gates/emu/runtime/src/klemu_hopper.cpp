// KLineage CUDA emulator: Hopper's asynchronous machinery (see include/klemu/hopper.h).
//
// Barriers block the waiting thread (wait_on) until the event that can release it, so a phase that
// never completes is a deadlock naming the wait, not a spin. Bulk copies read their source at issue,
// poison their destination and land when the phase of their mbarrier completes, so a kernel that
// reads a stage before waiting on its barrier reads poison. wgmma runs at issue: all 128 threads of
// the warpgroup post their registers, the last to arrive computes the 64 x N x 16 product through
// the matrix descriptors (as the PTX ISA lays them out) and releases the others.
#include "klemu.h"
#include <unordered_map>
#include <vector>

namespace klemu {

size_t dyn_smem_size();
unsigned char smem_poison();

namespace {

constexpr uint64_t kKeyMbar = 1ull << 40, kKeyNamed = 2ull << 40;

// ---- mbarriers ------------------------------------------------------------------------------------
struct Landing {  // bytes of a bulk copy that land when the phase completes
  unsigned char* dst;
  std::vector<unsigned char> bytes;
  std::vector<unsigned char> mask;  // 1: this byte is written (a swizzled box need not be contiguous)
};
struct Mbar {
  int count = 0, pending = 0;
  long long tx = 0;
  uint64_t phase = 0;  // completed phases
  std::vector<Landing> landings;
};
std::unordered_map<uint64_t, Mbar> g_mbars;
unsigned long g_mbar_epoch = 0;

std::unordered_map<uint64_t, Mbar>& mbars() {
  if (g_mbar_epoch != g_block_epoch) {
    g_mbar_epoch = g_block_epoch;
    g_mbars.clear();
  }
  return g_mbars;
}

void check_aligned(uint64_t bar, int line, const char* what) {
  if (bar & 7) fail("crash", "line %d: %s on shared address 0x%08llx, which is not 8-byte aligned", line, what,
                    (unsigned long long)bar);
}

Mbar& mbar(uint64_t bar, int line, const char* what) {
  check_aligned(bar, line, what);
  auto& m = mbars();
  auto it = m.find(bar);
  if (it == m.end())
    fail("crash", "line %d: %s on shared address 0x%08llx before mbarrier.init in this block", line, what,
         (unsigned long long)bar);
  return it->second;
}

void land(Landing& l) {
  for (size_t i = 0; i < l.bytes.size(); ++i)
    if (l.mask[i]) l.dst[i] = l.bytes[i];
}

// Completes the current phase when nothing is pending: the copies counted on it land, waiters wake.
void settle(uint64_t bar, Mbar& b) {
  if (b.pending != 0 || b.tx != 0) return;
  for (Landing& l : b.landings) land(l);
  b.landings.clear();
  b.phase += 1;
  b.pending = b.count;
  wake_all(kKeyMbar | bar);
}

// ---- named barriers (16 per block), the cluster barrier and warpgroup rendezvous ---------------------
struct Named {
  int arrived = 0, expected = 0;
  uint64_t gen = 0;
};
constexpr int kNamed = 16, kCluster = 16, kGroups = kNamed + 1;  // + 8 warpgroups
Named g_named[kGroups + 8];
unsigned long g_named_epoch = 0;
uint64_t g_cluster_token[1024];

Named& named(int slot) {
  if (g_named_epoch != g_block_epoch) {
    g_named_epoch = g_block_epoch;
    for (Named& n : g_named) n = Named{};
    for (uint64_t& t : g_cluster_token) t = ~0ull;
  }
  return g_named[slot];
}

unsigned block_threads() { return g_block_dim.x * g_block_dim.y * g_block_dim.z; }

// One arrival at barrier `slot` among `count` threads; returns the generation arrived in.
uint64_t arrive_at(int slot, int count, int line, const char* what) {
  Named& n = named(slot);
  if (n.arrived == 0) n.expected = count;
  else if (n.expected != count)
    fail("crash", "line %d: %s with %d threads while the barrier's current phase expects %d", line, what, count,
         n.expected);
  const uint64_t gen = n.gen;
  if (++n.arrived == n.expected) {
    n.arrived = 0;
    n.gen += 1;
    wake_all(kKeyNamed | (uint64_t)slot);
  }
  return gen;
}

void wait_for(int slot, uint64_t gen, int line, const char* what) {
  while (named(slot).gen == gen) wait_on(kKeyNamed | (uint64_t)slot, line, what);
}

// ---- warpgroup MMA ----------------------------------------------------------------------------------
struct WgArgs {
  int kind, n, d0, a0, scale_d, neg_a, neg_b, trans_a, trans_b;
  uint64_t desc_a, desc_b;
  uint64_t* r;
};
WgArgs g_wg[1024];

inline float e2f(uint16_t v, bool bf) { return bf ? bf2f(v) : h2f(v); }

// Element (mn, k) of an operand read through its matrix descriptor: mn along M (A) or N (B), k along
// K; `mn_major` when the operand is transposed (imm-trans = 1). K-major operands: 8 x 16-byte core
// matrices (no swizzle; the stride byte offset steps along M/N, the leading one along K) or swizzle
// atoms of 8 rows of 32/64/128 bytes; MN-major operands in swizzle atoms (rows along K).
const unsigned char* desc_elem(uint64_t desc, int mn, int k, int mn_major, int line) {
  const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4;
  const uint32_t lead = (uint32_t)((desc >> 16) & 0x3FFF) << 4;
  const uint32_t stride = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
  const int mode = (int)(desc >> 62);  // 0: none, 1: 128-byte, 2: 64-byte, 3: 32-byte swizzle
  if ((desc >> 49) & 7)
    fail("unsupported", "line %d: wgmma matrix descriptor with a base offset (bits 49-51) cannot be emulated", line);
  uint32_t a;
  if (mode == 0) {
    if (mn_major)
      fail("unsupported", "line %d: wgmma operand MN-major without a swizzle (interleaved layout) cannot be emulated",
           line);
    a = start + (uint32_t)(mn / 8) * stride + (uint32_t)(k / 8) * lead + (uint32_t)(mn % 8) * 16 + (uint32_t)(k % 8) * 2;
  } else {
    const uint32_t row = 256u >> mode;
    const int outer = mn_major ? k : mn, inner = mn_major ? mn : k;
    a = start + (uint32_t)(outer / 8) * stride + (uint32_t)(outer % 8) * row + (uint32_t)(inner * 2) % row +
        (uint32_t)(inner * 2) / row * lead;
    a ^= ((a >> 7) & (row / 16 - 1)) << 4;
  }
  // A descriptor keeps 18 bits of the shared address: the emulator resolves it in dynamic shared
  // memory, where a Hopper kernel's operand ring lies.
  if (a + 2 > dyn_smem_size())
    fail("crash", "line %d: wgmma operand at shared offset 0x%05x is outside the %zu bytes of dynamic shared memory "
         "(the emulator reads matrix descriptors in dynamic shared memory)", line, a, dyn_smem_size());
  return (const unsigned char*)dyn_smem() + a;
}

inline uint16_t bits16(const unsigned char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The shared-memory operands each warpgroup's wgmmas read, kept until `wgmma.wait_group` retires their
// group: an operand changed before then is one the hardware may have read changed.
struct WgReads {
  uint64_t group;  // the issuing thread's commit count: the group this wgmma joins at its next commit
  int line;
  std::vector<std::pair<const unsigned char*, uint16_t>> bytes;
};
std::vector<WgReads> g_wg_reads[8];
uint64_t g_wg_commits[1024];
unsigned long g_wg_epoch = 0;

void wg_reset() {
  if (g_wg_epoch == g_block_epoch) return;
  g_wg_epoch = g_block_epoch;
  for (auto& v : g_wg_reads) v.clear();
  for (uint64_t& c : g_wg_commits) c = 0;
}

void wgmma_whole(const WgArgs* T, unsigned group, uint64_t leader_commits, int line) {
  const WgArgs& h = T[0];
  const bool bf = h.kind & 1, f32 = h.kind & 2, regs_a = h.kind & 4;
  const int N = h.n;
  std::vector<float> A(64 * 16), B(16 * N), D(64 * N, 0.f);
  for (int t = 0; t < 128; ++t) {  // accumulators and (register form) A, by the fragment layout
    const int w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    const uint64_t* r = T[t].r;
    for (int j = 0; j < N / 8; ++j)
      for (int e = 0; e < 4; ++e) {
        const int m = 16 * w + g + (e / 2) * 8, n = 8 * j + 2 * q + (e % 2);
        float v;
        if (f32) v = f_reg(r[h.d0 + 4 * j + e]);
        else v = h2f((uint16_t)(r[h.d0 + 2 * j + e / 2] >> (16 * (e % 2))));
        D[m * N + n] = h.scale_d ? v : 0.f;
      }
    if (regs_a)
      for (int i = 0; i < 8; ++i) {
        const int m = 16 * w + g + ((i / 2) % 2) * 8, k = 2 * q + (i % 2) + (i / 4) * 8;
        A[m * 16 + k] = e2f((uint16_t)(r[h.a0 + i / 2] >> (16 * (i % 2))), bf) * (h.neg_a ? -1.f : 1.f);
      }
  }
  WgReads reads{leader_commits, line, {}};
  auto read = [&](uint64_t desc, int mn, int k, int mn_major) {
    const unsigned char* p = desc_elem(desc, mn, k, mn_major, line);
    reads.bytes.emplace_back(p, bits16(p));
    return bits16(p);
  };
  if (!regs_a)
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < 16; ++k) A[m * 16 + k] = e2f(read(h.desc_a, m, k, h.trans_a), bf) * (h.neg_a ? -1.f : 1.f);
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < N; ++n) B[k * N + n] = e2f(read(h.desc_b, n, k, h.trans_b), bf) * (h.neg_b ? -1.f : 1.f);
  g_wg_reads[group].push_back(std::move(reads));
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < N; ++n) {
      float s = 0.f;
      for (int k = 0; k < 16; ++k) s = std::fma(A[m * 16 + k], B[k * N + n], s);
      D[m * N + n] += s;
    }
  for (int t = 0; t < 128; ++t) {
    const int w = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    uint64_t* r = T[t].r;
    for (int j = 0; j < N / 8; ++j) {
      if (!f32) {
        for (int half = 0; half < 2; ++half) {
          const int m = 16 * w + g + half * 8, n = 8 * j + 2 * q;
          const uint32_t lo = to_bits(__float2half_rn(D[m * N + n])), hi = to_bits(__float2half_rn(D[m * N + n + 1]));
          r[h.d0 + 2 * j + half] = (uint64_t)((hi << 16) | (lo & 0xFFFFu));
        }
        continue;
      }
      for (int e = 0; e < 4; ++e) {
        const int m = 16 * w + g + (e / 2) * 8, n = 8 * j + 2 * q + (e % 2);
        r[h.d0 + 4 * j + e] = reg_f(D[m * N + n]);
      }
    }
  }
}

// ---- tensor maps ------------------------------------------------------------------------------------
constexpr uint64_t kMapMagic = 0x4b4c454d55544d41ull;  // "KLEMUTMA"
struct MapDesc {  // what cuTensorMapEncodeTiled writes into the 128 opaque bytes
  uint64_t magic;
  const unsigned char* base;
  uint8_t rank, esz, swizzle, oob_nan;
  uint64_t dims[5], outer[4];  // outer[d - 1]: the byte stride of dimension d (dimension 0: esz)
  uint16_t box[5];
  uint8_t estrides[5];
  uint64_t stride(uint32_t d) const { return d ? outer[d - 1] : esz; }
};
static_assert(sizeof(MapDesc) <= sizeof(CUtensorMap), "a tensor map holds the description");

const MapDesc& map_of(const void* p, int line) {
  const MapDesc* m = (const MapDesc*)p;
  if (!p || m->magic != kMapMagic)
    fail("crash", "line %d: the tensor map at %p was not written by cuTensorMapEncodeTiled", line, p);
  return *m;
}

uint32_t swizzled(uint32_t a, uint32_t swizzle) {  // 1/2/3: 32/64/128-byte swizzle on address bits
  if (swizzle == 0) return a;
  const uint32_t mask = (1u << swizzle) - 1u;
  return a ^ (((a >> 7) & mask) << 4);
}

// Calls f(shared offset of the element, global address or nullptr when outside the tensor) for every
// element of the box at c, in box order.
template <class F>
void for_box(const MapDesc& m, const int32_t* c, uint32_t dst_off, int line, F&& f) {
  for (uint32_t d = 0; d < m.rank; ++d)
    if (m.estrides[d] != 1)
      fail("unsupported", "line %d: a tensor map with element strides other than 1 cannot be emulated", line);
  uint32_t idx[5] = {0, 0, 0, 0, 0};
  uint64_t total = 1;
  for (uint32_t d = 0; d < m.rank; ++d) total *= m.box[d];
  for (uint64_t e = 0; e < total; ++e) {
    uint64_t rem = e;
    bool inside = true;
    const unsigned char* g = m.base;
    for (uint32_t d = 0; d < m.rank; ++d) {
      idx[d] = (uint32_t)(rem % m.box[d]);
      rem /= m.box[d];
      const long long x = (long long)c[d] + idx[d];
      if (x < 0 || x >= (long long)m.dims[d]) inside = false;
      else g += (uint64_t)x * m.stride(d);
    }
    f(swizzled(dst_off + (uint32_t)(e * m.esz), m.swizzle), inside ? g : nullptr);
  }
}

uint64_t box_bytes(const MapDesc& m) {
  uint64_t n = m.esz;
  for (uint32_t d = 0; d < m.rank; ++d) n *= m.box[d];
  return n;
}

// The shared bytes [a, a + bytes): shared_ptr checks both ends against their region.
unsigned char* smem_at(uint64_t a, uint64_t bytes, int line) {
  shared_ptr(a + bytes, line);
  return (unsigned char*)shared_ptr(a, line);
}

// A bulk tensor copy's map, checked against the copy's rank, and its 128-byte aligned shared end.
const MapDesc& tensor_copy(const void* map, int rank, uint64_t smem, const char* what, int line) {
  const MapDesc& m = map_of(map, line);
  if ((uint32_t)rank != m.rank)
    fail("crash", "line %d: a %d-D bulk tensor copy with a %u-D tensor map", line, rank, m.rank);
  if (smem & 127) fail("crash", "line %d: %s shared address 0x%08llx, which is not 128-byte aligned", line, what,
                       (unsigned long long)smem);
  return m;
}

// A bulk load's bytes wait on its barrier's phase; its whole size counts there now.
void land_on(uint64_t bar, Landing&& l, uint32_t bytes, const char* what, int line) {
  mbar(bar, line, what).landings.push_back(std::move(l));
  mbar_complete_tx(bar, bytes, line);
}

// cp.async.bulk's sizes and addresses are multiples of 16; `what` says which way it copies.
void check_bulk(uint32_t bytes, uint64_t smem, const void* global, const char* what, int line) {
  if (bytes % 16 || (smem & 15) || ((uintptr_t)global & 15))
    fail("crash", "line %d: cp.async.bulk %s of %u bytes, shared address 0x%08llx, global %p (sizes and addresses "
         "are multiples of 16)", line, what, bytes, (unsigned long long)smem, global);
}

CUresult encode_tiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* global,
                      const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                      const cuuint32_t* estrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                      CUtensorMapL2promotion, CUtensorMapFloatOOBfill oob) {
  static const uint32_t sizes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  if (!map || (unsigned)type > 12 || rank < 1 || rank > 5 || ((uintptr_t)global & 15)) return CUDA_ERROR_INVALID_VALUE;
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
    fail("unsupported", "cuTensorMapEncodeTiled: interleaved tensor maps cannot be emulated");
  if ((unsigned)swizzle > 3) fail("unsupported", "cuTensorMapEncodeTiled: swizzle mode %d cannot be emulated", (int)swizzle);
  MapDesc m{};
  m.magic = kMapMagic;
  m.base = (const unsigned char*)global;
  m.rank = (uint8_t)rank;
  m.esz = (uint8_t)sizes[type];
  m.swizzle = (uint8_t)swizzle;
  m.oob_nan = oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
  for (uint32_t d = 0; d < rank; ++d) {
    if (dims[d] == 0 || dims[d] > (1ull << 32) || box[d] == 0 || box[d] > 256 || estrides[d] == 0 || estrides[d] > 8)
      return CUDA_ERROR_INVALID_VALUE;
    m.dims[d] = dims[d];
    m.box[d] = (uint16_t)box[d];
    m.estrides[d] = (uint8_t)estrides[d];
    if (d > 0) {
      if (strides[d - 1] % 16 || strides[d - 1] >= (1ull << 40)) return CUDA_ERROR_INVALID_VALUE;
      m.outer[d - 1] = strides[d - 1];
    }
  }
  const uint64_t inner = (uint64_t)box[0] * m.esz;
  if (inner % 16 || (swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && inner > (16u << swizzle)))
    return CUDA_ERROR_INVALID_VALUE;
  std::memset(map, 0, sizeof *map);
  std::memcpy(map, &m, sizeof m);
  return CUDA_SUCCESS;
}

void* entry_point(const char* symbol) {
  if (symbol && std::strcmp(symbol, "cuTensorMapEncodeTiled") == 0) return (void*)&encode_tiled;
  if (symbol && std::strcmp(symbol, "cuGetProcAddress") == 0) return (void*)&cuGetProcAddress;
  return nullptr;
}

}  // namespace

// ---- mbarrier entry points ----------------------------------------------------------------------------
void mbar_init(uint64_t bar, uint32_t count, int line) {
  check_aligned(bar, line, "mbarrier.init");
  if (count == 0 || count >= (1u << 20))
    fail("crash", "line %d: mbarrier.init with an arrival count of %u (1 .. 2^20 - 1)", line, count);
  smem_at(bar, 8, line);
  Mbar& b = mbars()[bar];
  b = Mbar{};
  b.count = b.pending = (int)count;
}

uint64_t mbar_arrive(uint64_t bar, uint32_t count, int line) {
  Mbar& b = mbar(bar, line, "mbarrier.arrive");
  if ((int)count > b.pending)
    fail("crash", "line %d: mbarrier.arrive of %u on a phase with %d arrivals pending (more arrivals than the "
         "barrier's count)", line, count, b.pending);
  const uint64_t token = b.phase;
  b.pending -= (int)count;
  settle(bar, b);
  return token;
}

void mbar_expect_tx(uint64_t bar, uint32_t bytes, int line) {
  Mbar& b = mbar(bar, line, "mbarrier.expect_tx");
  b.tx += bytes;
}

void mbar_complete_tx(uint64_t bar, uint32_t bytes, int line) {
  Mbar& b = mbar(bar, line, "mbarrier.complete_tx");
  b.tx -= bytes;
  settle(bar, b);
}

void mbar_inval(uint64_t bar, int line) {
  mbar(bar, line, "mbarrier.inval");
  mbars().erase(bar);
}

namespace {
// try_wait (block: sleep until the barrier's phase changes, then test again) or test_wait (let the
// others run, answer now) on the test `done`.
template <class F>
int mbar_wait(uint64_t bar, int block, int line, F&& done) {
  if (done()) return 1;
  if (block) {
    wait_on(kKeyMbar | bar, line, "mbarrier.try_wait");
    return done();
  }
  yield_now();
  return 0;
}
}  // namespace

int mbar_wait_parity(uint64_t bar, uint32_t parity, int block, int line) {
  // The phase with this parity has completed when the current (incomplete) phase's parity differs.
  return mbar_wait(bar, block, line,
                   [&] { return (int)((mbar(bar, line, "mbarrier wait").phase & 1) != (parity & 1)); });
}

int mbar_wait_token(uint64_t bar, uint64_t token, int block, int line) {
  return mbar_wait(bar, block, line, [&] { return (int)(mbar(bar, line, "mbarrier wait").phase > token); });
}

// ---- barriers -------------------------------------------------------------------------------------------
void bar_named(uint32_t id, uint32_t count, int wait, int line) {
  if (id >= (uint32_t)kNamed) fail("crash", "line %d: named barrier %u (0 .. 15)", line, id);
  if (count == 0) count = block_threads();
  if (count % 32 || count > block_threads())
    fail("crash", "line %d: named barrier %u among %u threads (a multiple of 32, at most the block's %u)", line, id,
         count, block_threads());
  const char* what = wait ? "bar.sync" : "bar.arrive";
  const uint64_t gen = arrive_at((int)id, (int)count, line, what);
  if (wait) wait_for((int)id, gen, line, what);
}

void cluster_arrive(int line) {
  uint64_t& tok = (named(kCluster), g_cluster_token[g_cur->linear]);
  if (tok != ~0ull) fail("crash", "line %d: barrier.cluster.arrive twice without barrier.cluster.wait", line);
  tok = arrive_at(kCluster, (int)block_threads(), line, "barrier.cluster.arrive");
}

void cluster_wait(int line) {
  uint64_t& tok = (named(kCluster), g_cluster_token[g_cur->linear]);
  if (tok == ~0ull) fail("crash", "line %d: barrier.cluster.wait without barrier.cluster.arrive", line);
  wait_for(kCluster, tok, line, "barrier.cluster.wait");
  tok = ~0ull;
}

uint64_t mapa(uint64_t addr, uint32_t rank, int line) {
  if (rank != 0)
    fail("crash", "line %d: mapa to block %u of the cluster; the launch's clusters are of one block", line, rank);
  return addr;
}

[[noreturn]] void cluster_launch(unsigned x, unsigned y, unsigned z) {
  fail("unsupported", "thread-block clusters of %u x %u x %u blocks (cudaLaunchKernelEx) cannot be emulated: blocks "
       "run one after another", x, y, z);
}

int elect(uint32_t mask, uint32_t* leader, int line) {
  warp_collective(kSyncWarp, mask, 0, 0, 32, line, "elect.sync");
  const uint32_t first = mask ? (uint32_t)__builtin_ctz(mask) : 0;
  *leader = first;
  return g_cur->lane == first;
}

// ---- wgmma -----------------------------------------------------------------------------------------------
void wgmma(int kind, int n, uint64_t* r, int d0, int a0, uint64_t desc_a, uint64_t desc_b, int scale_d, int neg_a,
           int neg_b, int trans_a, int trans_b, int line) {
  const unsigned t = g_cur->linear, group = t / 128;
  if ((group + 1) * 128 > block_threads())
    fail("crash", "line %d: wgmma.mma_async by thread %u, whose warpgroup (threads %u .. %u) the block of %u threads "
         "does not fill", line, t, group * 128, group * 128 + 127, block_threads());
  if (n % 8 || n < 8 || n > 256) fail("crash", "line %d: wgmma with N = %d", line, n);
  g_wg[t] = WgArgs{kind, n, d0, a0, scale_d, neg_a, neg_b, trans_a, trans_b, desc_a, desc_b, r};
  const int slot = kGroups + (int)group;
  const Named& grp = named(slot);
  const uint64_t gen = grp.gen;
  if (grp.arrived == 127) {  // the last of the warpgroup: every other thread's registers are posted
    const WgArgs* T = &g_wg[group * 128];
    for (int i = 0; i < 128; ++i)
      if (T[i].kind != kind || T[i].n != n || T[i].desc_a != desc_a || T[i].desc_b != desc_b ||
          T[i].scale_d != scale_d)
        fail("crash", "line %d: the threads of warpgroup %u are at different wgmma instructions (thread %u differs)",
             line, group, group * 128 + i);
    wg_reset();
    wgmma_whole(T, group, g_wg_commits[t], line);
  }
  arrive_at(slot, 128, line, "wgmma.mma_async");
  wait_for(slot, gen, line, "wgmma.mma_async");
}

void wgmma_commit() {
  wg_reset();
  ++g_wg_commits[g_cur->linear];
}

void wgmma_wait(int pending, int line) {
  wg_reset();
  const unsigned t = g_cur->linear;
  const uint64_t c = g_wg_commits[t];
  std::vector<WgReads>& reads = g_wg_reads[t / 128];
  for (size_t i = 0; i < reads.size();) {
    if (reads[i].group + (uint64_t)pending >= c) {  // its group may still be in flight
      ++i;
      continue;
    }
    for (const auto& [p, v] : reads[i].bytes)
      if (bits16(p) != v)
        fail("crash", "line %d: a wgmma (line %d) operand at shared offset 0x%05zx changed before wgmma.wait_group "
             "retired its group (the hardware may read it any time before)", line, reads[i].line,
             (size_t)(p - (const unsigned char*)dyn_smem()));
    reads.erase(reads.begin() + (long)i);
  }
}

// ---- bulk copies -----------------------------------------------------------------------------------------
void tma_load(uint64_t dst, const void* map, const int32_t* c, int rank, uint64_t bar, uint32_t multicast, int line) {
  if (multicast != ~0u && multicast != 1u)
    fail("crash", "line %d: multicast mask 0x%x names blocks outside the cluster of one block", line, multicast);
  const MapDesc& m = tensor_copy(map, rank, dst, "bulk tensor copy to", line);
  const uint64_t bytes = box_bytes(m);
  const uint32_t off = (uint32_t)(dst & 0xFFFFFFu), lo = off & ~127u;
  const uint32_t span = (uint32_t)((off + bytes + 127) / 128 * 128 - lo);
  unsigned char* base = smem_at(dst - (off - lo), span, line);
  Landing l{base, std::vector<unsigned char>(span), std::vector<unsigned char>(span)};
  const unsigned char poison = smem_poison();
  for_box(m, c, off, line, [&](uint32_t s, const unsigned char* g) {
    const uint32_t i = s - lo;
    if (g) std::memcpy(&l.bytes[i], g, m.esz);
    else if (m.oob_nan && (m.esz == 4 || m.esz == 2)) {
      const uint32_t nan = m.esz == 4 ? 0x7FFFFFFFu : 0x7FFFu;
      std::memcpy(&l.bytes[i], &nan, m.esz);
    }
    std::memset(&l.mask[i], 1, m.esz);
    std::memset(base + i, poison, m.esz);  // not there until the phase completes
  });
  land_on(bar, std::move(l), (uint32_t)bytes, "cp.async.bulk.tensor", line);
}

void tma_store(const void* map, const int32_t* c, int rank, uint64_t src, int line) {
  const MapDesc& m = tensor_copy(map, rank, src, "bulk tensor store from", line);
  const uint32_t off = (uint32_t)(src & 0xFFFFFFu);
  const uint64_t region = src - off;
  smem_at(src, box_bytes(m), line);
  for_box(m, c, off, line, [&](uint32_t s, const unsigned char* g) {
    if (g) std::memcpy(const_cast<unsigned char*>(g), shared_ptr(region + s, line), m.esz);
  });
}

void bulk_load(uint64_t dst, const void* src, uint32_t bytes, uint64_t bar, int line) {
  check_bulk(bytes, dst, src, "load", line);
  check_global(src, "cp.async.bulk source", line);
  unsigned char* d = smem_at(dst, bytes, line);
  Landing l{d, std::vector<unsigned char>((const unsigned char*)src, (const unsigned char*)src + bytes),
            std::vector<unsigned char>(bytes, 1)};
  std::memset(d, smem_poison(), bytes);
  land_on(bar, std::move(l), bytes, "cp.async.bulk", line);
}

void bulk_store(void* dst, uint64_t src, uint32_t bytes, int line) {
  check_bulk(bytes, src, dst, "store", line);
  check_global(dst, "cp.async.bulk destination", line);
  std::memcpy(dst, smem_at(src, bytes, line), bytes);
}

}  // namespace klemu

// ---- host API ---------------------------------------------------------------------------------------------
CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* global,
                                const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  return klemu::encode_tiled(map, type, rank, global, dims, strides, box, element_strides, interleave, swizzle, l2,
                             oob);
}

CUresult cuGetProcAddress(const char* symbol, void** fn, int, cuuint64_t, CUdriverProcAddressQueryResult* status) {
  void* p = klemu::entry_point(symbol);
  if (fn) *fn = p;
  if (status) *status = p ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return p ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long,
                                    cudaDriverEntryPointQueryResult* status) {
  void* p = klemu::entry_point(symbol);
  if (fn) *fn = p;
  if (status) *status = p ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int, unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status) {
  return cudaGetDriverEntryPoint(symbol, fn, flags, status);
}

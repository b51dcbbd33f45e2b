// KLineage CUDA emulator: tensor-core and asynchronous-copy instructions (issue 11).
//
// Warp-wide instructions (mma.sync, ldmatrix, WMMA) are rendezvous of all 32 lanes: each lane posts
// pointers to its operand registers (locals on its fiber stack), and the last lane to arrive does
// the whole warp's work while the other 31 are suspended in the rendezvous (so their registers are
// stable), writing every lane's results; then the rendezvous releases them. Products are exact in
// fp32 (16-bit inputs), sums are fp32 in k order, C is added last, as the accumulator precision of
// the hardware (fp32 accumulate). Asynchronous copies capture the source at issue, poison the
// destination, and land at the issuing thread's wait (cp.async.wait_group / wait_all /
// __pipeline_wait_prior), never earlier, so a missing wait reads poison.
#include "klemu.h"
#include <vector>

namespace klemu {

size_t dyn_smem_size();
unsigned char smem_poison();

namespace {

// ---- shared-memory windows: 32-bit "shared addresses" (region id << 24 | offset) ------------
constexpr unsigned kDynRegion = 1;
SharedReg* g_regions[254];
int g_nregions = 0;

struct LaneArgs {
  const void* a;
  const void* b;
  const void* c;
  void* d;
  uint64_t addr;
  unsigned ldm;
  int op;
};
LaneArgs g_args[32][32];
int g_count[32];
unsigned long g_epoch[32];

// The last of the 32 lanes runs `whole` (with every lane's posted args); all then rendezvous.
template <class F>
void warp_op(int op, const char* what, int line, const LaneArgs& mine, F&& whole) {
  Fiber* f = g_cur;
  unsigned am = active_mask();
  if (am != 0xffffffffu)
    fail("crash", "%s at line %d: executed by a warp that does not have all 32 lanes (active 0x%08x); "
         ".sync.aligned warp instructions need the full warp", what, line, am);
  unsigned w = f->warp;
  if (g_epoch[w] != g_block_epoch) { g_epoch[w] = g_block_epoch; g_count[w] = 0; }
  g_args[w][f->lane] = mine;
  g_args[w][f->lane].op = op;
  if (++g_count[w] == 32) {
    g_count[w] = 0;
    for (int l = 0; l < 32; ++l)
      if (g_args[w][l].op != op)
        fail("crash", "%s at line %d: lane %d of the warp is at a different warp instruction", what, line, l);
    whole(g_args[w]);
  }
  warp_collective(kSyncWarp + 64 + op, 0xffffffffu, 0, 0, 32, line, what);
}

inline uint16_t f2hb(float f) { return (uint16_t)to_bits(__float2half_rn(f)); }
inline float e2f(uint16_t v, bool bf) { return bf ? bf2f(v) : h2f(v); }
inline float bits2f(uint32_t b) { return from_bits<float>(b); }
inline uint32_t f2bits(float f) { return (uint32_t)to_bits(f); }

// fp32 dot product of a row of A (stride 1) and a column of B, k in order, then + c.
inline float dot(const float* a, const float* b, int K, int bstride, float c) {
  float s = 0.f;
  for (int k = 0; k < K; ++k) s = std::fma(a[k], b[k * bstride], s);
  return s + c;
}

}  // namespace

// ---- shared addresses ---------------------------------------------------------------------------
void register_shared(SharedReg* r) {
  if (r->id) return;
  if (g_nregions >= 254) fail("crash", "too many __shared__ variables for the emulated shared window");
  g_regions[g_nregions++] = r;
  r->id = g_nregions + 1;
}

// The 32-bit shared address of a generic pointer into shared memory (one past the end included), or 0.
uint64_t shared_window(const volatile void* pv) {
  const unsigned char* p = (const unsigned char*)const_cast<const void*>(pv);
  const unsigned char* d = (const unsigned char*)dyn_smem();
  if (d && p >= d && p <= d + dyn_smem_size()) return ((uint64_t)kDynRegion << 24) | (uint64_t)(p - d);
  for (int i = 0; i < g_nregions; ++i) {
    const unsigned char* b = (const unsigned char*)const_cast<const void*>(g_regions[i]->p);
    if (p >= b && p <= b + g_regions[i]->n) return ((uint64_t)g_regions[i]->id << 24) | (uint64_t)(p - b);
  }
  return 0;
}

uint64_t cvta_shared(const volatile void* pv, int line) {
  if (uint64_t a = shared_window(pv)) return a;
  fail("crash", "line %d: __cvta_generic_to_shared / cvta.to.shared of %p, which is not shared memory", line, pv);
}

void* shared_ptr(uint64_t a, int line) {
  if (a >> 32) return (void*)a;  // a generic pointer
  unsigned id = (unsigned)(a >> 24), off = (unsigned)(a & 0xffffffu);
  if (id == kDynRegion) {
    if (off > dyn_smem_size())
      fail("out_of_bounds", "line %d: shared address 0x%08x is past the %zu bytes of dynamic shared memory", line,
           (unsigned)a, dyn_smem_size());
    return (unsigned char*)dyn_smem() + off;
  }
  if (id >= 2 && (int)id - 2 < g_nregions) {
    SharedReg* r = g_regions[id - 2];
    if (off > r->n) fail("out_of_bounds", "line %d: shared address 0x%08x is past its __shared__ variable", line, (unsigned)a);
    return (unsigned char*)const_cast<void*>((const void*)r->p) + off;
  }
  fail("crash", "line %d: 0x%08x is not a shared-memory address (from __cvta_generic_to_shared)", line, (unsigned)a);
}

// ---- mma.sync ---------------------------------------------------------------------------------------
// kind bits: 1 = k16 (else k8), 2 = bf16 inputs (else f16), 4 = f32 C/D (else f16 C/D).
void mma_sync(int kind, uint32_t* d, const uint32_t* a, const uint32_t* b, const uint32_t* c, int line) {
  LaneArgs me{a, b, c, d, 0, 0, 0};
  warp_op(kind, "mma.sync", line, me, [kind](LaneArgs* L) {
    const bool k16 = kind & 1, bf = kind & 2, f32 = kind & 4;
    const int K = k16 ? 16 : 8;
    float A[16][16], B[16][8], C[16][8];
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, t = l & 3;
      const uint32_t* ra = (const uint32_t*)L[l].a;
      const uint32_t* rb = (const uint32_t*)L[l].b;
      const uint32_t* rc = (const uint32_t*)L[l].c;
      for (int i = 0; i < (k16 ? 8 : 4); ++i) {
        uint16_t v = (uint16_t)(ra[i / 2] >> (16 * (i & 1)));
        int row = g + ((i / 2) & 1) * 8, col = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
        A[row][col] = e2f(v, bf);
      }
      for (int i = 0; i < (k16 ? 4 : 2); ++i) {
        uint16_t v = (uint16_t)(rb[i / 2] >> (16 * (i & 1)));
        B[t * 2 + (i & 1) + (i >= 2 ? 8 : 0)][g] = e2f(v, bf);
      }
      for (int i = 0; i < 4; ++i) {
        float v = f32 ? bits2f(rc[i]) : h2f((uint16_t)(rc[i / 2] >> (16 * (i & 1))));
        C[g + (i / 2) * 8][t * 2 + (i & 1)] = v;
      }
    }
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, t = l & 3;
      uint32_t* rd = (uint32_t*)L[l].d;
      float r[4];
      for (int i = 0; i < 4; ++i) {
        int row = g + (i / 2) * 8, col = t * 2 + (i & 1);
        r[i] = dot(A[row], &B[0][col], K, 8, C[row][col]);
      }
      if (f32) {
        for (int i = 0; i < 4; ++i) rd[i] = f2bits(r[i]);
      } else {
        rd[0] = (uint32_t)f2hb(r[0]) | (uint32_t)f2hb(r[1]) << 16;
        rd[1] = (uint32_t)f2hb(r[2]) | (uint32_t)f2hb(r[3]) << 16;
      }
    }
  });
}

// ---- ldmatrix -----------------------------------------------------------------------------------------
namespace {
// Row r of 8 x 8 matrix j of an ldmatrix / stmatrix: the 16-byte aligned address lane 8 j + r gives.
void* matrix_row(const LaneArgs* L, int j, int r, const char* what, int line) {
  const uint64_t a = L[j * 8 + r].addr;
  if (a & 15)
    fail("crash", "%s at line %d: row address 0x%llx of lane %d is not 16-byte aligned", what, line,
         (unsigned long long)a, j * 8 + r);
  return shared_ptr(a, line);
}
}  // namespace

void ldmatrix(int num, int trans, uint32_t* d, uint64_t addr, int line) {
  LaneArgs me{nullptr, nullptr, nullptr, d, addr, 0, 0};
  warp_op(16 + num * 2 + trans, "ldmatrix", line, me, [num, trans, line](LaneArgs* L) {
    uint16_t M[4][8][8];
    for (int j = 0; j < num; ++j)
      for (int r = 0; r < 8; ++r) std::memcpy(M[j][r], matrix_row(L, j, r, "ldmatrix", line), 16);
    for (int l = 0; l < 32; ++l) {
      uint32_t* rd = (uint32_t*)L[l].d;
      const int g = l >> 2, t = l & 3;
      for (int j = 0; j < num; ++j) {
        uint16_t lo = trans ? M[j][2 * t][g] : M[j][g][2 * t];
        uint16_t hi = trans ? M[j][2 * t + 1][g] : M[j][g][2 * t + 1];
        rd[j] = (uint32_t)lo | (uint32_t)hi << 16;
      }
    }
  });
}

// stmatrix: ldmatrix's inverse; lane l's register j holds its two elements of matrix j, written to the
// row addresses lanes 8j .. 8j + 7 give (transposed with .trans).
void stmatrix(int num, int trans, const uint32_t* v, uint64_t addr, int line) {
  LaneArgs me{v, nullptr, nullptr, nullptr, addr, 0, 0};
  warp_op(32 + num * 2 + trans, "stmatrix", line, me, [num, trans, line](LaneArgs* L) {
    uint16_t M[4][8][8];
    for (int l = 0; l < 32; ++l) {
      const uint32_t* rv = (const uint32_t*)L[l].a;
      const int g = l >> 2, t = l & 3;
      for (int j = 0; j < num; ++j) {
        const uint16_t lo = (uint16_t)rv[j], hi = (uint16_t)(rv[j] >> 16);
        (trans ? M[j][2 * t][g] : M[j][g][2 * t]) = lo;
        (trans ? M[j][2 * t + 1][g] : M[j][g][2 * t + 1]) = hi;
      }
    }
    for (int j = 0; j < num; ++j)
      for (int r = 0; r < 8; ++r) std::memcpy(matrix_row(L, j, r, "stmatrix", line), M[j][r], 16);
  });
}

// ---- WMMA -----------------------------------------------------------------------------------------------
// Fragment of a rows x cols tile: lane l holds elements l*ne .. l*ne+ne-1 of the tile in row-major
// order (ne = rows*cols/32). ek: element kind 0 = half, 1 = bf16, 2 = float.
namespace {
inline size_t esize(int ek) { return ek == 2 ? 4 : 2; }
inline float eget(const void* x, int i, int ek) {
  if (ek == 2) return ((const float*)x)[i];
  uint16_t v = ((const uint16_t*)x)[i];
  return ek == 1 ? bf2f(v) : h2f(v);
}
}  // namespace

void wmma_load(void* x, int ek, const void* p, unsigned ldm, int rows, int cols, int col_major, int line) {
  LaneArgs me{p, nullptr, nullptr, x, 0, ldm, 0};
  warp_op(40 + col_major, "wmma::load_matrix_sync", line, me, [=](LaneArgs* L) {
    for (int l = 0; l < 32; ++l)
      if (L[l].a != L[0].a || L[l].ldm != L[0].ldm)
        fail("crash", "wmma::load_matrix_sync at line %d: lanes disagree on the pointer or ldm", line);
    const size_t es = esize(ek);
    const int ne = rows * cols / 32;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        size_t off = col_major ? (size_t)c * ldm + r : (size_t)r * ldm + c;
        int lin = r * cols + c;
        std::memcpy((char*)L[lin / ne].d + (size_t)(lin % ne) * es, (const char*)p + off * es, es);
      }
  });
}

void wmma_store(void* p, const void* x, int ek, unsigned ldm, int rows, int cols, int col_major, int line) {
  LaneArgs me{x, nullptr, nullptr, p, 0, ldm, 0};
  warp_op(42 + col_major, "wmma::store_matrix_sync", line, me, [=](LaneArgs* L) {
    for (int l = 0; l < 32; ++l)
      if (L[l].d != L[0].d || L[l].ldm != L[0].ldm)
        fail("crash", "wmma::store_matrix_sync at line %d: lanes disagree on the pointer or ldm", line);
    const size_t es = esize(ek);
    const int ne = rows * cols / 32;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        size_t off = col_major ? (size_t)c * ldm + r : (size_t)r * ldm + c;
        int lin = r * cols + c;
        std::memcpy((char*)p + off * es, (const char*)L[lin / ne].a + (size_t)(lin % ne) * es, es);
      }
  });
}

void wmma_mma(void* d, int dk, const void* a, int ak, const void* b, int bk, const void* c, int ck, int M, int N,
              int K, int line) {
  LaneArgs me{a, b, c, d, 0, 0, 0};
  warp_op(44, "wmma::mma_sync", line, me, [=](LaneArgs* L) {
    std::vector<float> A((size_t)M * K), B((size_t)K * N), C((size_t)M * N);
    const int na = M * K / 32, nb = K * N / 32, nc = M * N / 32;
    for (int l = 0; l < 32; ++l) {
      for (int i = 0; i < na; ++i) A[(size_t)l * na + i] = eget(L[l].a, i, ak);
      for (int i = 0; i < nb; ++i) B[(size_t)l * nb + i] = eget(L[l].b, i, bk);
      for (int i = 0; i < nc; ++i) C[(size_t)l * nc + i] = eget(L[l].c, i, ck);
    }
    for (int r = 0; r < M; ++r)
      for (int cc = 0; cc < N; ++cc) {
        float v = dot(&A[(size_t)r * K], &B[cc], K, N, C[(size_t)r * N + cc]);
        int lin = r * N + cc;
        void* x = L[lin / nc].d;
        int i = lin % nc;
        if (dk == 2) ((float*)x)[i] = v;
        else ((uint16_t*)x)[i] = f2hb(v);
      }
  });
}

// ---- asynchronous copies ------------------------------------------------------------------------------
namespace {
struct Pending {
  unsigned char* dst;
  unsigned char data[16];
  int n;
  long group;
};
struct ThreadCopies {
  std::vector<Pending> pend;
  long open = 0;  // index of the group new copies join (= groups committed so far)
  unsigned long epoch = 0;
};
ThreadCopies g_tc[1024];
ThreadCopies& mine() {
  ThreadCopies& t = g_tc[g_cur->linear];
  if (t.epoch != g_block_epoch) { t.epoch = g_block_epoch; t.pend.clear(); t.open = 0; }
  return t;
}
}  // namespace

void cp_async(uint64_t dst, const void* src, int size, int src_size, int line) {
  if (size != 4 && size != 8 && size != 16)
    fail("crash", "cp.async at line %d: copy size %d is not 4, 8 or 16", line, size);
  if (src_size < 0 || src_size > size)
    fail("crash", "cp.async at line %d: src-size %d is outside 0..%d", line, src_size, size);
  unsigned char* d = (unsigned char*)shared_ptr(dst, line);
  if ((uintptr_t)d % (unsigned)size || (src_size && (uintptr_t)src % (unsigned)size))
    fail("crash", "cp.async at line %d: %d-byte copy with a misaligned address (shared %p, global %p)", line, size,
         (void*)d, src);
  ThreadCopies& t = mine();
  Pending p;
  p.dst = d;
  p.n = size;
  p.group = t.open;
  std::memset(p.data, 0, sizeof p.data);
  if (src_size) std::memcpy(p.data, src, (size_t)src_size);
  std::memset(d, smem_poison(), (size_t)size);  // not there until the wait
  t.pend.push_back(p);
}

void cp_async_commit() { ++mine().open; }
long cp_async_groups() { return mine().open; }

void cp_async_wait(int n) {
  ThreadCopies& t = mine();
  long limit = t.open - n;  // groups below this index must be complete
  size_t k = 0;
  for (Pending& p : t.pend) {
    if (p.group < limit) std::memcpy(p.dst, p.data, (size_t)p.n);
    else t.pend[k++] = p;
  }
  t.pend.resize(k);
}

void cp_async_wait_all() {
  cp_async_commit();
  cp_async_wait(0);
}

}  // namespace klemu

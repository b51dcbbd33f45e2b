// Tensor-core and asynchronous-copy emulation (issue 11): WMMA (nvcuda::wmma), the entry points the
// source rewrite calls for inline PTX (mma.sync, ldmatrix, cp.async, cvta.to.shared), the
// cuda_pipeline.h primitives and __cvta_generic_to_shared. Implemented in src/klemu_tc.cpp.
#pragma once

namespace klemu {
// 32-bit shared address of a shared-memory pointer (region << 24 | offset) and back; an address
// wider than 32 bits is taken as a generic pointer.
uint64_t cvta_shared(const volatile void* p, int line);
void* shared_ptr(uint64_t addr, int line);
// kind bits: 1 = m16n8k16 (else m16n8k8), 2 = bf16 inputs (else f16), 4 = f32 C/D (else f16x2).
void mma_sync(int kind, uint32_t* d, const uint32_t* a, const uint32_t* b, const uint32_t* c, int line);
void ldmatrix(int num, int trans, uint32_t* d, uint64_t addr, int line);
void stmatrix(int num, int trans, const uint32_t* v, uint64_t addr, int line);
void cp_async(uint64_t dst, const void* src, int size, int src_size, int line);
void cp_async_commit();
void cp_async_wait(int n);
void cp_async_wait_all();
void wmma_load(void* x, int ek, const void* p, unsigned ldm, int rows, int cols, int col_major, int line);
void wmma_store(void* p, const void* x, int ek, unsigned ldm, int rows, int cols, int col_major, int line);
void wmma_mma(void* d, int dk, const void* a, int ak, const void* b, int bk, const void* c, int ck, int M, int N,
              int K, int line);
inline uint64_t reg_f(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }
inline float f_reg(uint64_t v) { uint32_t b = (uint32_t)v; float f; std::memcpy(&f, &b, 4); return f; }
}  // namespace klemu

static inline size_t __cvta_generic_to_shared(const volatile void* p, int line = __builtin_LINE()) {
  return (size_t)::klemu::cvta_shared(p, line);
}
static inline void* __cvta_shared_to_generic(size_t a, int line = __builtin_LINE()) {
  return ::klemu::shared_ptr(a, line);
}
static inline bool __isShared(const volatile void* p) {
  (void)p;
  return true;
}

// cuda_pipeline.h primitives (per-thread asynchronous copies).
static inline void __pipeline_memcpy_async(void* dst, const void* src, size_t size, size_t zfill = 0,
                                           int line = __builtin_LINE()) {
  ::klemu::cp_async((uint64_t)(uintptr_t)dst, src, (int)size, (int)(size - zfill), line);
}
static inline void __pipeline_commit() { ::klemu::cp_async_commit(); }
static inline void __pipeline_wait_prior(size_t n) { ::klemu::cp_async_wait((int)n); }

// ---- WMMA: lane l holds elements l*ne .. l*ne+ne-1 of the fragment's tile in row-major order ----
namespace nvcuda {
namespace wmma {
struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
namespace precision { struct tf32 {}; }
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
template <class T> struct ek;
template <> struct ek<__half> { static constexpr int v = 0; };
template <> struct ek<__nv_bfloat16> { static constexpr int v = 1; };
template <> struct ek<float> { static constexpr int v = 2; };
template <class Use, int M, int N, int K> struct dims;
template <int M, int N, int K> struct dims<matrix_a, M, N, K> { static constexpr int r = M, c = K; };
template <int M, int N, int K> struct dims<matrix_b, M, N, K> { static constexpr int r = K, c = N; };
template <int M, int N, int K> struct dims<accumulator, M, N, K> { static constexpr int r = M, c = N; };
template <class L> struct is_col { static constexpr int v = 0; };
template <> struct is_col<col_major> { static constexpr int v = 1; };
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment {
  static_assert((M == 16 && N == 16 && K == 16) || (M == 32 && N == 8 && K == 16) || (M == 8 && N == 32 && K == 16),
                "emu WMMA: shapes m16n16k16, m32n8k16, m8n32k16");
 public:
  using element_type = T;
  using storage_element_type = T;
  static constexpr int rows = detail::dims<Use, M, N, K>::r, cols = detail::dims<Use, M, N, K>::c;
  static constexpr int num_elements = rows * cols / 32;
  T x[num_elements];
};

template <class Use, int M, int N, int K, class T, class L>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const T& v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}
template <class Use, int M, int N, int K, class T, class L, class V,
          class = typename std::enable_if<!std::is_same<T, V>::value>::type>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const V& v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = T(v);
}

template <class Use, int M, int N, int K, class T, class L, class P>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const P* p, unsigned ldm, int line = __builtin_LINE()) {
  using F = fragment<Use, M, N, K, T, L>;
  static_assert(!std::is_void<L>::value, "accumulator loads take a layout_t");
  ::klemu::wmma_load(f.x, detail::ek<T>::v, (const void*)p, ldm, F::rows, F::cols, detail::is_col<L>::v, line);
}
template <int M, int N, int K, class T, class P>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const P* p, unsigned ldm, layout_t layout,
                             int line = __builtin_LINE()) {
  using F = fragment<accumulator, M, N, K, T, void>;
  ::klemu::wmma_load(f.x, detail::ek<T>::v, (const void*)p, ldm, F::rows, F::cols, layout == mem_col_major, line);
}
template <int M, int N, int K, class T, class P>
inline void store_matrix_sync(P* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm, layout_t layout,
                              int line = __builtin_LINE()) {
  using F = fragment<accumulator, M, N, K, T, void>;
  ::klemu::wmma_store((void*)p, f.x, detail::ek<T>::v, ldm, F::rows, F::cols, layout == mem_col_major, line);
}
template <int M, int N, int K, class TD, class TA, class LA, class TB, class LB, class TC>
inline void mma_sync(fragment<accumulator, M, N, K, TD, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, TC, void>& c,
                     bool satf = false, int line = __builtin_LINE()) {
  (void)satf;
  ::klemu::wmma_mma(d.x, detail::ek<TD>::v, a.x, detail::ek<TA>::v, b.x, detail::ek<TB>::v, c.x, detail::ek<TC>::v,
                    M, N, K, line);
}
}  // namespace wmma
}  // namespace nvcuda

// ---- cuda::pipeline<thread_scope_thread> + cuda::memcpy_async (libcu++), per-thread stages ----
namespace klemu { long cp_async_groups(); }
namespace cuda {
enum thread_scope { thread_scope_system = 0, thread_scope_device = 1, thread_scope_block = 2, thread_scope_thread = 3 };
template <size_t N>
struct aligned_size_t {
  size_t value;
  explicit aligned_size_t(size_t v) : value(v) {}
  operator size_t() const { return value; }
};
template <thread_scope S>
class pipeline {
  static_assert(S == thread_scope_thread, "emu: only cuda::pipeline<cuda::thread_scope_thread> is emulated");
  long released_ = 0;

 public:
  void producer_acquire() {}
  void producer_commit() { ::klemu::cp_async_commit(); }
  void consumer_wait() {
    long n = ::klemu::cp_async_groups() - (released_ + 1);
    ::klemu::cp_async_wait(n < 0 ? 0 : (int)n);
  }
  void consumer_release() { ++released_; }
  bool quit() { return true; }
};
inline pipeline<thread_scope_thread> make_pipeline() { return pipeline<thread_scope_thread>(); }
template <size_t N>
inline void pipeline_consumer_wait_prior(pipeline<thread_scope_thread>&) { ::klemu::cp_async_wait((int)N); }
// Any 4/8/16-byte-multiple size: split into the largest aligned cp.async pieces.
inline void memcpy_async(void* dst, const void* src, size_t size, pipeline<thread_scope_thread>&,
                         int line = __builtin_LINE()) {
  char* d = (char*)dst;
  const char* s = (const char*)src;
  while (size) {
    int k = (size >= 16 && !((uintptr_t)d % 16) && !((uintptr_t)s % 16)) ? 16
            : (size >= 8 && !((uintptr_t)d % 8) && !((uintptr_t)s % 8)) ? 8 : 4;
    if (size < (size_t)k) ::klemu::fail("crash", "cuda::memcpy_async at line %d: size not a multiple of 4", line);
    ::klemu::cp_async((uint64_t)(uintptr_t)d, s, k, k, line);
    d += k;
    s += k;
    size -= (size_t)k;
  }
}
template <class T, size_t N>
inline void memcpy_async(T* dst, const T* src, aligned_size_t<N> size, pipeline<thread_scope_thread>& p,
                         int line = __builtin_LINE()) {
  memcpy_async((void*)dst, (const void*)src, (size_t)size, p, line);
}
}  // namespace cuda

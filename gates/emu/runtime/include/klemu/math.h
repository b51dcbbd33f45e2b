// Math, bit and fast-math intrinsics, min/max overloads, __ldg and atomics.
// Fast-math variants are computed with the accurate libm function: the gate's tolerances decide.
#pragma once
#include "core.h"

// ---- min / max (CUDA defines unqualified overloads for every arithmetic pair) -----------------------
template <class A, class B, class = std::enable_if_t<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value>>
static inline auto max(A a, B b) -> decltype(a + b) {
  using R = decltype(a + b);
  if constexpr (std::is_floating_point<R>::value) return std::fmax((R)a, (R)b);
  else return (R)a > (R)b ? (R)a : (R)b;
}
template <class A, class B, class = std::enable_if_t<std::is_arithmetic<A>::value && std::is_arithmetic<B>::value>>
static inline auto min(A a, B b) -> decltype(a + b) {
  using R = decltype(a + b);
  if constexpr (std::is_floating_point<R>::value) return std::fmin((R)a, (R)b);
  else return (R)a < (R)b ? (R)a : (R)b;
}
static inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned umax(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

// ---- float intrinsics -----------------------------------------------------------------------------
// glibc declares some of these names itself; ours are reached through macros.
#define __expf klemu_expf
#define __exp10f klemu_exp10f
#define exp10f klemu_exp10f
#define exp10 klemu_exp10
#define __logf klemu_logf
#define __log2f klemu_log2f
#define __log10f klemu_log10f
#define __sinf klemu_sinf
#define __cosf klemu_cosf
#define __tanf klemu_tanf
#define __tanhf klemu_tanhf
#define __powf klemu_powf
#define __sincosf klemu_sincosf
#define sincosf klemu_sincosf
#define sincos klemu_sincos
static inline float klemu_expf(float x) { return std::exp(x); }
static inline float klemu_exp10f(float x) { return std::pow(10.0f, x); }
static inline double klemu_exp10(double x) { return std::pow(10.0, x); }
static inline float klemu_logf(float x) { return std::log(x); }
static inline float klemu_log2f(float x) { return std::log2(x); }
static inline float klemu_log10f(float x) { return std::log10(x); }
static inline float klemu_sinf(float x) { return std::sin(x); }
static inline float klemu_cosf(float x) { return std::cos(x); }
static inline float klemu_tanf(float x) { return std::tan(x); }
static inline float klemu_tanhf(float x) { return std::tanh(x); }
static inline float klemu_powf(float x, float y) { return std::pow(x, y); }
static inline void klemu_sincosf(float x, float* s, float* c) { *s = std::sin(x); *c = std::cos(x); }
static inline void klemu_sincos(double x, double* s, double* c) { *s = std::sin(x); *c = std::cos(x); }
static inline void sincospif(float x, float* s, float* c) { *s = std::sin((float)M_PI * x); *c = std::cos((float)M_PI * x); }
static inline float sinpif(float x) { return std::sin((float)M_PI * x); }
static inline float cospif(float x) { return std::cos((float)M_PI * x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
static inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / std::cbrt(x); }
static inline double rcbrt(double x) { return 1.0 / std::cbrt(x); }
static inline float __saturatef(float x) { return std::isnan(x) ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
static inline float saturate(float x) { return __saturatef(x); }
static inline float normcdff(float x) { return 0.5f * std::erfc(-x * (float)M_SQRT1_2); }
static inline double normcdf(double x) { return 0.5 * std::erfc(-x * M_SQRT1_2); }
static inline float erfcinvf(float x);
static inline float erfinvf(float y) {
  // Newton iterations on erf from a rational first guess; accurate to a few ulp in float.
  if (y <= -1.0f) return y == -1.0f ? -INFINITY : NAN;
  if (y >= 1.0f) return y == 1.0f ? INFINITY : NAN;
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) { w -= 2.5; x = 2.81022636e-08; x = 3.43273939e-07 + x * w; x = -3.5233877e-06 + x * w; x = -4.39150654e-06 + x * w; x = 0.00021858087 + x * w; x = -0.00125372503 + x * w; x = -0.00417768164 + x * w; x = 0.246640727 + x * w; x = 1.50140941 + x * w; }
  else { w = std::sqrt(w) - 3.0; x = -0.000200214257; x = 0.000100950558 + x * w; x = 0.00134934322 + x * w; x = -0.00367342844 + x * w; x = 0.00573950773 + x * w; x = -0.0076224613 + x * w; x = 0.00943887047 + x * w; x = 1.00167406 + x * w; x = 2.83297682 + x * w; }
  x *= y;
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (2.0 / std::sqrt(M_PI) * std::exp(-x * x));
  return (float)x;
}
static inline float erfcinvf(float x) { return erfinvf(1.0f - x); }
#define KLEMU_RN(NAME, EXPR) static inline float NAME(float a, float b) { return EXPR; }
KLEMU_RN(__fadd_rn, a + b) KLEMU_RN(__fsub_rn, a - b) KLEMU_RN(__fmul_rn, a * b) KLEMU_RN(__fdiv_rn, a / b)
KLEMU_RN(__fadd_rz, a + b) KLEMU_RN(__fmul_rz, a * b)
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline float __fmaf_rz(float a, float b, float c) { return std::fma(a, b, c); }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return std::sqrt(a); }
static inline float __frsqrt_rn(float a) { return 1.0f / std::sqrt(a); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
static inline double __drcp_rn(double a) { return 1.0 / a; }
static inline double __dsqrt_rn(double a) { return std::sqrt(a); }
static inline int __float2int_rn(float x) { return (int)std::nearbyint(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)std::floor(x); }
static inline int __float2int_ru(float x) { return (int)std::ceil(x); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)std::nearbyint(x); }
static inline unsigned __float2uint_rz(float x) { return (unsigned)x; }
static inline long long __float2ll_rn(float x) { return (long long)std::nearbyint(x); }
static inline long long __double2ll_rn(double x) { return (long long)std::nearbyint(x); }
static inline int __double2int_rn(double x) { return (int)std::nearbyint(x); }
static inline int __double2int_rz(double x) { return (int)x; }
static inline float __double2float_rn(double x) { return (float)x; }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline float __ll2float_rn(long long x) { return (float)x; }
static inline double __int2double_rn(int x) { return (double)x; }
static inline double __ll2double_rn(long long x) { return (double)x; }

// ---- bit casts and bit tricks ----------------------------------------------------------------------
static inline float __int_as_float(int x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float f) { int x; std::memcpy(&x, &f, 4); return x; }
static inline float __uint_as_float(unsigned x) { float f; std::memcpy(&f, &x, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned x; std::memcpy(&x, &f, 4); return x; }
static inline double __longlong_as_double(long long x) { double f; std::memcpy(&f, &x, 8); return f; }
static inline long long __double_as_longlong(double f) { long long x; std::memcpy(&x, &f, 8); return x; }
static inline int __double2hiint(double d) { return (int)(__double_as_longlong(d) >> 32); }
static inline int __double2loint(double d) { return (int)__double_as_longlong(d); }
static inline double __hiloint2double(int hi, int lo) { return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo)); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
  return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
static inline int __mul24(int a, int b) { return ((a << 8) >> 8) * ((b << 8) >> 8); }
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xffffff) * (b & 0xffffff); }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) { return (unsigned long long)(((unsigned __int128)a * b) >> 64); }
static inline unsigned __sad(int a, int b, unsigned c) { return c + (unsigned)(a > b ? a - b : b - a); }
static inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return c + (a > b ? a - b : b - a); }
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) { unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)((v << (s & 31)) >> 32); }
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) { unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)(v >> (s & 31)); }
static inline unsigned __funnelshift_lc(unsigned lo, unsigned hi, unsigned s) { return __funnelshift_l(lo, hi, s > 31 ? 32 : s) ; }
static inline unsigned __funnelshift_rc(unsigned lo, unsigned hi, unsigned s) { unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)(v >> (s > 32 ? 32 : s)); }

// ---- global-only loads and stores ------------------------------------------------------------------
// They compile to ld.global.* / st.global.*: on a GPU, an address that is not global memory (a local
// copy in registers or on the stack, shared memory) faults, so the emulator refuses it too.
namespace klemu {
void check_global(const volatile void* p, const char* what, int line);
}
#define KLEMU_GLOBAL_LOAD(NAME)                                                                        \
  template <class T> static inline T NAME(const T* p, int line = __builtin_LINE()) {                    \
    ::klemu::check_global(p, #NAME, line);                                                             \
    return *p;                                                                                         \
  }
#define KLEMU_GLOBAL_STORE(NAME)                                                                       \
  template <class T> static inline void NAME(T* p, T v, int line = __builtin_LINE()) {                  \
    ::klemu::check_global(p, #NAME, line);                                                             \
    *p = v;                                                                                            \
  }
KLEMU_GLOBAL_LOAD(__ldg)
KLEMU_GLOBAL_LOAD(__ldcg)
KLEMU_GLOBAL_LOAD(__ldca)
KLEMU_GLOBAL_LOAD(__ldcs)
KLEMU_GLOBAL_LOAD(__ldlu)
KLEMU_GLOBAL_LOAD(__ldcv)
KLEMU_GLOBAL_STORE(__stcg)
KLEMU_GLOBAL_STORE(__stcs)
KLEMU_GLOBAL_STORE(__stwb)
KLEMU_GLOBAL_STORE(__stwt)
#undef KLEMU_GLOBAL_LOAD
#undef KLEMU_GLOBAL_STORE

// ---- atomics: fibers never preempt each other, so a plain read-modify-write is atomic --------------
#define KLEMU_ATOMIC(NAME, T, EXPR)                                                                    \
  static inline T NAME(T* p, T v) { T old = *p; *p = (EXPR); return old; }                             \
  static inline T NAME##_block(T* p, T v) { return NAME(p, v); }                                        \
  static inline T NAME##_system(T* p, T v) { return NAME(p, v); }
#define KLEMU_ATOMIC_INTS(NAME, EXPR)                                                                  \
  KLEMU_ATOMIC(NAME, int, EXPR) KLEMU_ATOMIC(NAME, unsigned, EXPR)                                      \
  KLEMU_ATOMIC(NAME, unsigned long long, EXPR) KLEMU_ATOMIC(NAME, long long, EXPR)
KLEMU_ATOMIC_INTS(atomicAdd, old + v)
KLEMU_ATOMIC(atomicAdd, float, old + v)
KLEMU_ATOMIC(atomicAdd, double, old + v)
KLEMU_ATOMIC(atomicSub, int, old - v)
KLEMU_ATOMIC(atomicSub, unsigned, old - v)
KLEMU_ATOMIC_INTS(atomicMax, old > v ? old : v)
KLEMU_ATOMIC_INTS(atomicMin, old < v ? old : v)
KLEMU_ATOMIC_INTS(atomicAnd, old & v)
KLEMU_ATOMIC_INTS(atomicOr, old | v)
KLEMU_ATOMIC_INTS(atomicXor, old ^ v)
KLEMU_ATOMIC_INTS(atomicExch, v)
KLEMU_ATOMIC(atomicExch, float, v)
KLEMU_ATOMIC(atomicInc, unsigned, old >= v ? 0u : old + 1u)
KLEMU_ATOMIC(atomicDec, unsigned, (old == 0u || old > v) ? v : old - 1u)
#define KLEMU_CAS(T)                                                                                   \
  static inline T atomicCAS(T* p, T cmp, T v) { T old = *p; if (old == cmp) *p = v; return old; }      \
  static inline T atomicCAS_block(T* p, T cmp, T v) { return atomicCAS(p, cmp, v); }                    \
  static inline T atomicCAS_system(T* p, T cmp, T v) { return atomicCAS(p, cmp, v); }
KLEMU_CAS(int)
KLEMU_CAS(unsigned)
KLEMU_CAS(unsigned long long)
KLEMU_CAS(unsigned short)

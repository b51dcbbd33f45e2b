// __half, __half2, __nv_bfloat16, __nv_bfloat162: storage types with round-to-nearest-even
// conversions; arithmetic is done in float and rounded once, which is exact for + - * / because
// float carries more than twice the significand bits of either format.
#pragma once
#include "core.h"

namespace klemu {
static inline uint32_t fbits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float bitsf(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

static inline unsigned short f2h_rn(float f) {
  uint32_t x = fbits(f);
  unsigned short sign = (unsigned short)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return 0x7fff;                       // NaN -> canonical NaN
  if (x >= 0x477ff000u) return sign | 0x7c00u;              // >= 65520 rounds to infinity
  if (x >= 0x38800000u) {                                   // normal half
    x += 0xc8000fffu + ((x >> 13) & 1u);                    // rebias exponent, round half to even
    return (unsigned short)(sign | (x >> 13));
  }
  if (x < 0x33000001u) return sign;                         // <= 2^-25 rounds to zero
  uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u, s = 126u - e;
  uint32_t r = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return (unsigned short)(sign | r);
}
static inline float h2f(unsigned short h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bitsf(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-08f;          // m * 2^-24
    return sign ? -v : v;
  }
  return bitsf(sign | ((e + 112u) << 23) | (m << 13));
}
static inline unsigned short f2bf_rn(float f) {
  uint32_t u = fbits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
static inline unsigned short f2bf_rz(float f) {
  uint32_t u = fbits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return (unsigned short)(u >> 16);
}
static inline float bf2f(unsigned short b) { return bitsf((uint32_t)b << 16); }
static inline unsigned short h_rn(double d) {
  // Round a double straight to half: go through float only when that cannot double-round.
  float f = (float)d;
  if ((double)f == d) return f2h_rn(f);
  // nudge the float towards d by one ulp in the sticky direction so the tie-break is right
  uint32_t u = fbits(f);
  if (std::fabs((double)f) < std::fabs(d)) u |= 1u; else u = (u & 1u) ? u : u - 1u;
  return f2h_rn(bitsf(u));
}
}  // namespace klemu

struct __half_raw { unsigned short x; };
struct __nv_bfloat16_raw { unsigned short x; };

#define KLEMU_HALF_CLASS(H, RAW, TOF, FROMF)                                                          \
  struct __attribute__((aligned(2))) H {                                                               \
    unsigned short __x;                                                                                \
    H() = default;                                                                                     \
    H(float f) : __x(FROMF(f)) {}                                                                      \
    H(double d) : __x(FROMF((float)d)) {}                                                              \
    H(int v) : __x(FROMF((float)v)) {}                                                                 \
    H(unsigned v) : __x(FROMF((float)v)) {}                                                            \
    H(long long v) : __x(FROMF((float)v)) {}                                                           \
    H(unsigned long long v) : __x(FROMF((float)v)) {}                                                  \
    H(short v) : __x(FROMF((float)v)) {}                                                               \
    H(unsigned short v) : __x(FROMF((float)v)) {}                                                      \
    H(const RAW& r) : __x(r.x) {}                                                                      \
    operator float() const { return TOF(__x); }                                                        \
    operator RAW() const { return RAW{__x}; }                                                          \
    H& operator=(const RAW& r) { __x = r.x; return *this; }                                            \
    H& operator+=(const H& o) { __x = FROMF(TOF(__x) + TOF(o.__x)); return *this; }                    \
    H& operator-=(const H& o) { __x = FROMF(TOF(__x) - TOF(o.__x)); return *this; }                    \
    H& operator*=(const H& o) { __x = FROMF(TOF(__x) * TOF(o.__x)); return *this; }                    \
    H& operator/=(const H& o) { __x = FROMF(TOF(__x) / TOF(o.__x)); return *this; }                    \
  };                                                                                                   \
  static inline H operator+(const H& a, const H& b) { return H(TOF(a.__x) + TOF(b.__x)); }             \
  static inline H operator-(const H& a, const H& b) { return H(TOF(a.__x) - TOF(b.__x)); }             \
  static inline H operator*(const H& a, const H& b) { return H(TOF(a.__x) * TOF(b.__x)); }             \
  static inline H operator/(const H& a, const H& b) { return H(TOF(a.__x) / TOF(b.__x)); }             \
  static inline H operator-(const H& a) { H r; r.__x = a.__x ^ 0x8000u; return r; }                     \
  static inline H operator+(const H& a) { return a; }                                                   \
  static inline bool operator==(const H& a, const H& b) { return TOF(a.__x) == TOF(b.__x); }           \
  static inline bool operator!=(const H& a, const H& b) { return TOF(a.__x) != TOF(b.__x); }           \
  static inline bool operator<(const H& a, const H& b) { return TOF(a.__x) < TOF(b.__x); }             \
  static inline bool operator>(const H& a, const H& b) { return TOF(a.__x) > TOF(b.__x); }             \
  static inline bool operator<=(const H& a, const H& b) { return TOF(a.__x) <= TOF(b.__x); }           \
  static inline bool operator>=(const H& a, const H& b) { return TOF(a.__x) >= TOF(b.__x); }

KLEMU_HALF_CLASS(__half, __half_raw, ::klemu::h2f, ::klemu::f2h_rn)
KLEMU_HALF_CLASS(__nv_bfloat16, __nv_bfloat16_raw, ::klemu::bf2f, ::klemu::f2bf_rn)

#define KLEMU_PAIR_CLASS(H2, H)                                                                       \
  struct __attribute__((aligned(4))) H2 {                                                              \
    H x, y;                                                                                            \
    H2() = default;                                                                                    \
    H2(H a, H b) : x(a), y(b) {}                                                                       \
    H2& operator+=(const H2& o) { x += o.x; y += o.y; return *this; }                                  \
    H2& operator-=(const H2& o) { x -= o.x; y -= o.y; return *this; }                                  \
    H2& operator*=(const H2& o) { x *= o.x; y *= o.y; return *this; }                                  \
  };                                                                                                   \
  static inline H2 operator+(const H2& a, const H2& b) { return H2(a.x + b.x, a.y + b.y); }            \
  static inline H2 operator-(const H2& a, const H2& b) { return H2(a.x - b.x, a.y - b.y); }            \
  static inline H2 operator*(const H2& a, const H2& b) { return H2(a.x * b.x, a.y * b.y); }            \
  static inline H2 operator/(const H2& a, const H2& b) { return H2(a.x / b.x, a.y / b.y); }            \
  static inline H2 operator-(const H2& a) { return H2(-a.x, -a.y); }                                   \
  static inline bool operator==(const H2& a, const H2& b) { return a.x == b.x && a.y == b.y; }         \
  static inline bool operator!=(const H2& a, const H2& b) { return !(a == b); }

KLEMU_PAIR_CLASS(__half2, __half)
KLEMU_PAIR_CLASS(__nv_bfloat162, __nv_bfloat16)

typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

// ---- conversions ------------------------------------------------------------------------------------
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __double2half(double d) { __half h; h.__x = ::klemu::h_rn(d); return h; }
static inline float __half2float(__half h) { return ::klemu::h2f(h.__x); }
static inline __half2 __float2half2_rn(float f) { return __half2(__half(f), __half(f)); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
static inline __half2 __float22half2_rn(float2 v) { return __half2(__half(v.x), __half(v.y)); }
static inline float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
static inline __half2 __half2half2(__half h) { return __half2(h, h); }
static inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
static inline __half2 make_half2(__half a, __half b) { return __half2(a, b); }
static inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
static inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
static inline __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
static inline __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }
static inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }
static inline __half __ushort_as_half(unsigned short u) { __half h; h.__x = u; return h; }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __short_as_half(short u) { __half h; h.__x = (unsigned short)u; return h; }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline int __half2int_rn(__half h) { return (int)std::nearbyint((float)h); }
static inline int __half2int_rz(__half h) { return (int)(float)h; }
static inline __half __int2half_rn(int v) { return __half((float)v); }
static inline __half __uint2half_rn(unsigned v) { return __half((float)v); }

static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rz(float f) { __nv_bfloat16 b; b.__x = ::klemu::f2bf_rz(f); return b; }
static inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16((float)d); }
static inline float __bfloat162float(__nv_bfloat16 b) { return ::klemu::bf2f(b.__x); }
static inline __nv_bfloat162 __float2bfloat162_rn(float f) { return __nv_bfloat162(__nv_bfloat16(f), __nv_bfloat16(f)); }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b)); }
static inline __nv_bfloat162 __float22bfloat162_rn(float2 v) { return __nv_bfloat162(__nv_bfloat16(v.x), __nv_bfloat16(v.y)); }
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return make_float2((float)h.x, (float)h.y); }
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 h) { return __nv_bfloat162(h, h); }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
static inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { __nv_bfloat16 h; h.__x = u; return h; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline __nv_bfloat16 __short_as_bfloat16(short u) { __nv_bfloat16 h; h.__x = (unsigned short)u; return h; }
static inline short __bfloat16_as_short(__nv_bfloat16 h) { return (short)h.__x; }
static inline int __bfloat162int_rn(__nv_bfloat16 h) { return (int)std::nearbyint((float)h); }
static inline __nv_bfloat16 __int2bfloat16_rn(int v) { return __nv_bfloat16((float)v); }
static inline __half __float2half_rz(float f) {
  __half h = __half(f);
  if (std::isfinite(f) && std::fabs((float)h) > std::fabs(f)) h.__x -= 1;
  return h;
}

// ---- arithmetic and comparison intrinsics, for both formats and their pairs ----------------------------
#define KLEMU_HOPS(H, H2)                                                                             \
  static inline float __low2float(H2 a) { return (float)a.x; }                                         \
  static inline float __high2float(H2 a) { return (float)a.y; }                                        \
  static inline H __low2half(H2 a) { return a.x; }                                                     \
  static inline H __high2half(H2 a) { return a.y; }                                                    \
  static inline H __hadd(H a, H b) { return a + b; }                                                   \
  static inline H __hsub(H a, H b) { return a - b; }                                                   \
  static inline H __hmul(H a, H b) { return a * b; }                                                   \
  static inline H __hdiv(H a, H b) { return a / b; }                                                   \
  static inline H __hadd_rn(H a, H b) { return a + b; }                                                \
  static inline H __hmul_rn(H a, H b) { return a * b; }                                                \
  static inline H __hsub_rn(H a, H b) { return a - b; }                                                \
  static inline H __hadd_sat(H a, H b) { return H(__saturatef((float)(a + b))); }                     \
  static inline H __hmul_sat(H a, H b) { return H(__saturatef((float)(a * b))); }                     \
  static inline H __hfma(H a, H b, H c) { return H((float)std::fma((double)(float)a, (double)(float)b, (double)(float)c)); } \
  static inline H __hfma_sat(H a, H b, H c) { return H(__saturatef((float)__hfma(a, b, c))); }       \
  static inline H __hfma_relu(H a, H b, H c) { H r = __hfma(a, b, c); return (float)r < 0.0f ? H(0.0f) : r; } \
  static inline H __hneg(H a) { return -a; }                                                           \
  static inline H __habs(H a) { H r = a; r.__x &= 0x7fffu; return r; }                                  \
  static inline H __hmax(H a, H b) { return H(std::fmax((float)a, (float)b)); }                        \
  static inline H __hmin(H a, H b) { return H(std::fmin((float)a, (float)b)); }                        \
  static inline H __hmax_nan(H a, H b) { return (__hisnan(a) || __hisnan(b)) ? H(NAN) : __hmax(a, b); } \
  static inline H __hmin_nan(H a, H b) { return (__hisnan(a) || __hisnan(b)) ? H(NAN) : __hmin(a, b); } \
  static inline bool __heq(H a, H b) { return a == b; }                                                \
  static inline bool __hne(H a, H b) { return (float)a != (float)b && !__hisnan(a) && !__hisnan(b); }  \
  static inline bool __hlt(H a, H b) { return a < b; }                                                 \
  static inline bool __hle(H a, H b) { return a <= b; }                                                \
  static inline bool __hgt(H a, H b) { return a > b; }                                                 \
  static inline bool __hge(H a, H b) { return a >= b; }                                                \
  static inline bool __hisinf(H a) { return std::isinf((float)a); }                                    \
  static inline H hexp(H a) { return H(std::exp((float)a)); }                                          \
  static inline H hexp2(H a) { return H(std::exp2((float)a)); }                                        \
  static inline H hlog(H a) { return H(std::log((float)a)); }                                          \
  static inline H hlog2(H a) { return H(std::log2((float)a)); }                                        \
  static inline H hsqrt(H a) { return H(std::sqrt((float)a)); }                                        \
  static inline H hrsqrt(H a) { return H(1.0f / std::sqrt((float)a)); }                                \
  static inline H hrcp(H a) { return H(1.0f / (float)a); }                                             \
  static inline H hsin(H a) { return H(std::sin((float)a)); }                                          \
  static inline H hcos(H a) { return H(std::cos((float)a)); }                                          \
  static inline H htanh(H a) { return H(std::tanh((float)a)); }                                        \
  static inline H hfloor(H a) { return H(std::floor((float)a)); }                                      \
  static inline H hceil(H a) { return H(std::ceil((float)a)); }                                        \
  static inline H htrunc(H a) { return H(std::trunc((float)a)); }                                      \
  static inline H hrint(H a) { return H(std::nearbyint((float)a)); }                                   \
  static inline H2 __hadd2(H2 a, H2 b) { return a + b; }                                               \
  static inline H2 __hsub2(H2 a, H2 b) { return a - b; }                                               \
  static inline H2 __hmul2(H2 a, H2 b) { return a * b; }                                               \
  static inline H2 __h2div(H2 a, H2 b) { return a / b; }                                               \
  static inline H2 __hfma2(H2 a, H2 b, H2 c) { return H2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); } \
  static inline H2 __hneg2(H2 a) { return -a; }                                                        \
  static inline H2 __habs2(H2 a) { return H2(__habs(a.x), __habs(a.y)); }                              \
  static inline H2 __hmax2(H2 a, H2 b) { return H2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }              \
  static inline H2 __hmin2(H2 a, H2 b) { return H2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }              \
  static inline H2 h2exp(H2 a) { return H2(hexp(a.x), hexp(a.y)); }                                     \
  static inline H2 h2sqrt(H2 a) { return H2(hsqrt(a.x), hsqrt(a.y)); }                                  \
  static inline H2 h2rsqrt(H2 a) { return H2(hrsqrt(a.x), hrsqrt(a.y)); }                               \
  static inline bool __hbeq2(H2 a, H2 b) { return a.x == b.x && a.y == b.y; }                          \
  static inline H atomicAdd(H* p, H v) { H old = *p; *p = old + v; return old; }                       \
  static inline H2 atomicAdd(H2* p, H2 v) { H2 old = *p; *p = old + v; return old; }

static inline bool __hisnan(__half a) { return std::isnan((float)a); }
static inline bool __hisnan(__nv_bfloat16 a) { return std::isnan((float)a); }
KLEMU_HOPS(__half, __half2)
KLEMU_HOPS(__nv_bfloat16, __nv_bfloat162)

// Warp shuffles of the 16/32-bit storage types go through their bits (core.h moves up to 8 bytes).

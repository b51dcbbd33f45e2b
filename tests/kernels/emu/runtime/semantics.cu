// Runtime semantics probes for tests/test_emu_runtime.py: each extern "C" entry launches a small
// kernel and writes what it observed into `out`.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

// ---- shuffles: out[kind * 64 + lane] for a 64-thread block (2 warps) -------------------------------
__global__ void shfl_kernel(int* out, int width) {
  int lane = threadIdx.x % 32;
  int v = 100 * (int)threadIdx.x;
  out[0 * 64 + threadIdx.x] = __shfl_sync(0xffffffff, v, 3, width);
  out[1 * 64 + threadIdx.x] = __shfl_up_sync(0xffffffff, v, 2, width);
  out[2 * 64 + threadIdx.x] = __shfl_down_sync(0xffffffff, v, 2, width);
  out[3 * 64 + threadIdx.x] = __shfl_xor_sync(0xffffffff, v, 5, width);
  double d = __shfl_down_sync(0xffffffff, 0.5 * threadIdx.x, 1, width);
  out[4 * 64 + threadIdx.x] = (int)(d * 2);
  // partial mask: only even lanes take part
  int r = -1;
  if (lane % 2 == 0) r = __shfl_sync(0x55555555, v, lane + 2 < 32 ? lane + 2 : 0);
  out[5 * 64 + threadIdx.x] = r;
}
extern "C" void t_shfl(int* out, int width) { shfl_kernel<<<1, 64>>>(out, width); }

// ---- votes and reductions: out[k * 32 + lane] ------------------------------------------------------------
__global__ void vote_kernel(unsigned* out) {
  unsigned lane = threadIdx.x;
  out[0 * 32 + lane] = __ballot_sync(0xffffffff, lane % 3 == 0);
  out[1 * 32 + lane] = __any_sync(0xffffffff, lane == 17);
  out[2 * 32 + lane] = __all_sync(0xffffffff, lane < 31);
  out[3 * 32 + lane] = (unsigned)__reduce_add_sync(0xffffffff, (int)lane - 10);
  out[4 * 32 + lane] = (unsigned)__reduce_min_sync(0xffffffff, (int)lane - 10);
  out[5 * 32 + lane] = __reduce_max_sync(0xffffffff, lane * 7u % 32u);
  out[6 * 32 + lane] = __reduce_and_sync(0xffffffff, 0xff00u | lane);
  out[7 * 32 + lane] = __reduce_or_sync(0xffffffff, 1u << lane);
  out[8 * 32 + lane] = __reduce_xor_sync(0xffffffff, lane);
  out[9 * 32 + lane] = __activemask();
  out[10 * 32 + lane] = __match_any_sync(0xffffffff, lane / 4);
  unsigned r = 0;
  if (lane < 16) r = __ballot_sync(0x0000ffffu, lane & 1);
  __syncwarp();
  out[11 * 32 + lane] = r;
}
extern "C" void t_vote(unsigned* out) { vote_kernel<<<1, 32>>>(out); }

// ---- barriers: syncthreads_count/and/or, exited threads count as arrived ------------------------------------
__global__ void barrier_kernel(int* out) {
  __shared__ int s[128];
  int t = threadIdx.x;
  int c = __syncthreads_count(t % 4 == 0);
  int a = __syncthreads_and(t < 200);
  int o = __syncthreads_or(t == 77);
  int z = __syncthreads_and(t < 100);
  if (t >= 96) return;  // three warps exit; barriers below still complete
  s[t] = t * 2;
  __syncthreads();
  out[t] = s[(t + 1) % 96] + 1000 * (c == 32) + 10000 * a + 100000 * o + 1000000 * z;
}
extern "C" void t_barrier(int* out) { barrier_kernel<<<1, 128>>>(out); }

// ---- atomics --------------------------------------------------------------------------------------------------
__global__ void atomic_kernel(int* i, unsigned* u, float* f, double* d, unsigned long long* ull) {
  int t = threadIdx.x;
  atomicAdd(&i[0], 1);
  atomicSub(&i[1], 2);
  atomicMax(&i[2], t);
  atomicMin(&i[3], -t);
  atomicAnd(&u[0], ~(1u << (t % 32)));
  atomicOr(&u[1], 1u << (t % 32));
  atomicXor(&u[2], (unsigned)t);
  atomicInc(&u[3], 9u);
  atomicDec(&u[4], 5u);
  atomicExch(&u[5], 42u);
  atomicCAS(&u[6], 0u, (unsigned)t + 1);
  atomicAdd(&f[0], 0.5f);
  atomicAdd(&d[0], 0.25);
  atomicAdd(&ull[0], 3ull);
}
extern "C" void t_atomic(int* i, unsigned* u, float* f, double* d, unsigned long long* ull) {
  atomic_kernel<<<2, 64>>>(i, u, f, d, ull);
}

// ---- half / bfloat16 conversions ----------------------------------------------------------------------------------
extern "C" void t_f2h(const float* in, unsigned short* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __half_as_ushort(__float2half(in[i]));
}
extern "C" void t_h2f(const unsigned short* in, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __half2float(__ushort_as_half(in[i]));
}
extern "C" void t_f2bf(const float* in, unsigned short* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __bfloat16_as_ushort(__float2bfloat16(in[i]));
}
extern "C" void t_bf2f(const unsigned short* in, float* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = __bfloat162float(__ushort_as_bfloat16(in[i]));
}
// half arithmetic: out = [hadd, hmul, hfma(a,b,a), hadd2.x, hmul2.y, bf16 add, bf16 fma]
extern "C" void t_harith(const unsigned short* a, const unsigned short* b, unsigned short* out, int n) {
  for (int i = 0; i < n; ++i) {
    __half x = __ushort_as_half(a[i]), y = __ushort_as_half(b[i]);
    out[7 * i + 0] = __half_as_ushort(__hadd(x, y));
    out[7 * i + 1] = __half_as_ushort(__hmul(x, y));
    out[7 * i + 2] = __half_as_ushort(__hfma(x, y, x));
    __half2 p = __halves2half2(x, y), q = __halves2half2(y, x);
    out[7 * i + 3] = __half_as_ushort(__low2half(__hadd2(p, q)));
    out[7 * i + 4] = __half_as_ushort(__high2half(__hmul2(p, q)));
    __nv_bfloat16 bx = __ushort_as_bfloat16(a[i]), by = __ushort_as_bfloat16(b[i]);
    out[7 * i + 5] = __bfloat16_as_ushort(__hadd(bx, by));
    out[7 * i + 6] = __bfloat16_as_ushort(__hfma(bx, by, bx));
  }
}

// ---- math and bit intrinsics ---------------------------------------------------------------------------------------
extern "C" void t_bits(unsigned x, int* out) {
  out[0] = __popc(x);
  out[1] = __clz((int)x);
  out[2] = __ffs((int)x);
  out[3] = (int)__brev(x);
  out[4] = __float_as_int(__int_as_float((int)x)) == (int)x;
  out[5] = (int)__byte_perm(x, 0x11223344u, 0x5410u);
  out[6] = max(3, -7) + min(2u, 9u) * 10;
  out[7] = (int)(max(1.5f, 2) * 100);
  out[8] = (int)(__saturatef(1.7f) * 10 + __saturatef(-2.f));
  out[9] = (int)(rsqrtf(16.f) * 1000 + __fdividef(1.f, 4.f) * 100 + __frcp_rn(8.f) * 10000);
  out[10] = (int)(__expf(0.f) + __logf(1.f) * 10 + __fmaf_rn(2.f, 3.f, 1.f) * 100);
}

// ---- dynamic shared memory, templates and the launch configuration ----------------------------------------------------
template <typename T, int SCALE>
__global__ void dyn_kernel(T* out, int n) {
  extern __shared__ unsigned char raw[];
  T* buf = reinterpret_cast<T*>(raw);
  int t = threadIdx.x + blockDim.x * threadIdx.y;
  int nt = blockDim.x * blockDim.y;
  buf[t] = (T)(t * SCALE);
  __syncthreads();
  int g = blockIdx.x * nt + t;
  if (g < n) out[g] = buf[nt - 1 - t] + (T)(gridDim.x * 1000);
}
extern "C" void t_dyn(float* out, int n) {
  dim3 block(8, 4);
  dyn_kernel<float, 3><<<(n + 31) / 32, block, 32 * sizeof(float)>>>(out, n);
}

// ---- cooperative groups ---------------------------------------------------------------------------------------------
__global__ void cg_kernel(int* out) {
  cg::thread_block b = cg::this_thread_block();
  auto t16 = cg::tiled_partition<16>(b);
  int v = (int)b.thread_rank();
  int s = cg::reduce(t16, v, cg::plus<int>());
  int mx = cg::reduce(t16, v, cg::greater<int>());
  int mn = cg::reduce(t16, v, cg::less<int>());
  int down = t16.shfl_down(v, 1);
  int x = t16.shfl_xor(v, 3);
  int src = t16.shfl(v, 0);
  t16.sync();
  int base = 8 * b.thread_rank();
  out[base + 0] = s;
  out[base + 1] = mx;
  out[base + 2] = mn;
  out[base + 3] = down;
  out[base + 4] = x;
  out[base + 5] = src;
  out[base + 6] = (int)t16.meta_group_rank() * 100 + (int)t16.thread_rank();
  out[base + 7] = cg::inclusive_scan(t16, 1);
  b.sync();
}
extern "C" void t_cg(int* out) { cg_kernel<<<1, 64>>>(out); }

// ---- host API -----------------------------------------------------------------------------------------------------------
extern "C" int t_host(int* out) {
  int dev = -1;
  cudaGetDevice(&dev);
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  int v[8];
  cudaDeviceGetAttribute(&v[0], cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&v[1], cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  cudaDeviceGetAttribute(&v[2], cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0);
  cudaDeviceGetAttribute(&v[3], cudaDevAttrL2CacheSize, 0);
  int occ = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, dyn_kernel<float, 3>, 256, 0);
  float* d = nullptr;
  cudaMalloc(&d, 16 * sizeof(float));
  cudaMemset(d, 0, 16 * sizeof(float));
  float h[16];
  for (int i = 0; i < 16; ++i) h[i] = (float)i;
  cudaStream_t s;
  cudaStreamCreate(&s);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, s);
  cudaMemcpyAsync(d, h, 16 * sizeof(float), cudaMemcpyHostToDevice, s);
  dyn_kernel<float, 1><<<1, dim3(4, 4), 16 * sizeof(float), s>>>(d, 16);
  cudaEventRecord(e1, s);
  cudaEventSynchronize(e1);
  float ms = -1.f;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaMemcpy(h, d, 16 * sizeof(float), cudaMemcpyDeviceToHost);
  cudaStreamSynchronize(s);
  cudaFree(d);
  cudaStreamDestroy(s);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  out[0] = dev; out[1] = p.multiProcessorCount; out[2] = (int)p.sharedMemPerMultiprocessor;
  out[3] = p.major * 10 + p.minor; out[4] = v[0]; out[5] = v[1]; out[6] = v[2]; out[7] = v[3];
  out[8] = occ; out[9] = (int)h[0]; out[10] = (int)h[15]; out[11] = p.warpSize; out[12] = p.maxThreadsPerBlock;
  out[13] = (int)(p.l2CacheSize / (1024 * 1024)); out[14] = p.maxThreadsPerMultiProcessor; out[15] = p.regsPerBlock;
  return (int)cudaGetLastError() + (int)cudaPeekAtLastError();
}

// ---- schedules and shared-memory poison ------------------------------------------------------------------------------------
__global__ void order_kernel(int* out) {
  __shared__ int counter;
  __shared__ unsigned poison_probe;
  if (threadIdx.x == 0 && blockIdx.x == 0) out[40] = (int)poison_probe;
  __syncthreads();
  if (threadIdx.x == 0) counter = 0;
  __syncthreads();
  int pos = atomicAdd(&counter, 1);
  if (blockIdx.x == 0) out[threadIdx.x] = pos;
}
extern "C" void t_order(int* out) { order_kernel<<<2, 32>>>(out); }

// ---- launch limits (each ends the process with KLEMU-ERROR) -------------------------------------------------------------------
__global__ void empty_kernel(float* p) { if (p) p[0] = 0.f; }
extern "C" void t_too_many_threads() { empty_kernel<<<1, 2048>>>(nullptr); }
extern "C" void t_empty_grid() { empty_kernel<<<0, 32>>>(nullptr); }
extern "C" void t_smem_over_default() { empty_kernel<<<1, 32, 64 * 1024>>>(nullptr); }
extern "C" void t_smem_with_attribute() {
  cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024);
  empty_kernel<<<1, 32, 64 * 1024>>>(nullptr);
}
extern "C" void t_smem_over_max() {
  cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
  empty_kernel<<<1, 32, 228 * 1024>>>(nullptr);
}

// ---- misuse of collectives ---------------------------------------------------------------------------------------------------------
__global__ void exited_lane_kernel(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffff, (int)threadIdx.x, 1);
}
extern "C" void t_exited_lane(int* out) { exited_lane_kernel<<<1, 32>>>(out); }
__global__ void deadlock_kernel(int* out) {
  if (threadIdx.x % 32 < 16) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_xor_sync(0xffffffff, 1, 1);
    __syncthreads();
  }
}
extern "C" void t_deadlock(int* out) { deadlock_kernel<<<1, 64>>>(out); }
__global__ void split_barrier_kernel(int* out) {
  // divergent barriers are fine once the other half exits
  if (threadIdx.x % 2) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
extern "C" void t_split_barrier(int* out) { split_barrier_kernel<<<1, 64>>>(out); }

// ---- a spin that never ends: the runtime's CPU-time watchdog reports it ---------------------------------------
__device__ volatile int never_set = 0;
__global__ void spin_kernel(int* out) {
  while (never_set == 0) {
  }
  out[0] = 1;
}
extern "C" void t_spin(int* out) { spin_kernel<<<2, 64>>>(out); }

// ---- writes one element past the dynamic shared memory it asked for ------------------------------------------
__global__ void smem_overrun_kernel(int* out) {
  extern __shared__ int dyn[];
  dyn[threadIdx.x + 1] = (int)threadIdx.x;  // thread 31 writes dyn[32]
  __syncthreads();
  out[threadIdx.x] = dyn[threadIdx.x];
}
extern "C" void t_smem_overrun(int* out) { smem_overrun_kernel<<<1, 32, 32 * sizeof(int)>>>(out); }

// ---- single-pass chained scan (decoupled look-back style): block b waits for block b - 1 -------------------------
__global__ void lookback_kernel(volatile int* flags, int* out) {
  if (threadIdx.x == 0) {
    int prev = 0;
    if (blockIdx.x > 0) {
      while (flags[blockIdx.x - 1] == 0) {
      }
      prev = out[blockIdx.x - 1];
    }
    out[blockIdx.x] = prev + (int)blockIdx.x;
    __threadfence();
    flags[blockIdx.x] = 1;
  }
}
extern "C" void t_lookback(int* flags, int* out) { lookback_kernel<<<8, 64>>>(flags, out); }

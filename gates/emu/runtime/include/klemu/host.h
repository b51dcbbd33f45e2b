// Host runtime API used by launchers, answering as an H200 (sm_90), and the emulated launch.
#pragma once
#include "core.h"

enum cudaError_t {
  cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3, cudaErrorInvalidConfiguration = 9, cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21, cudaErrorInvalidDevice = 101, cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600, cudaErrorLaunchFailure = 719, cudaErrorNotSupported = 801,
};
typedef cudaError_t cudaError;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8, cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};
enum cudaFuncCache { cudaFuncCachePreferNone = 0, cudaFuncCachePreferShared = 1, cudaFuncCachePreferL1 = 2, cudaFuncCachePreferEqual = 3 };
enum cudaSharedMemConfig { cudaSharedMemBankSizeDefault = 0, cudaSharedMemBankSizeFourByte = 1, cudaSharedMemBankSizeEightByte = 2 };
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1, cudaDevAttrMaxBlockDimX = 2, cudaDevAttrMaxBlockDimY = 3,
  cudaDevAttrMaxBlockDimZ = 4, cudaDevAttrMaxGridDimX = 5, cudaDevAttrMaxGridDimY = 6, cudaDevAttrMaxGridDimZ = 7,
  cudaDevAttrMaxSharedMemoryPerBlock = 8, cudaDevAttrTotalConstantMemory = 9, cudaDevAttrWarpSize = 10,
  cudaDevAttrMaxRegistersPerBlock = 12, cudaDevAttrClockRate = 13, cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMemoryClockRate = 36, cudaDevAttrGlobalMemoryBusWidth = 37, cudaDevAttrL2CacheSize = 38,
  cudaDevAttrMaxThreadsPerMultiProcessor = 39, cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76, cudaDevAttrMaxSharedMemoryPerMultiprocessor = 81,
  cudaDevAttrMaxRegistersPerMultiprocessor = 82, cudaDevAttrMaxBlocksPerMultiprocessor = 106,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97, cudaDevAttrCooperativeLaunch = 95,
};
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem, sharedMemPerBlock;
  int regsPerBlock, warpSize;
  size_t memPitch;
  int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], clockRate;
  size_t totalConstMem;
  int major, minor;
  size_t textureAlignment;
  int deviceOverlap, multiProcessorCount, kernelExecTimeoutEnabled, integrated, canMapHostMemory, computeMode;
  int concurrentKernels, ECCEnabled, pciBusID, pciDeviceID, tccDriver, asyncEngineCount, unifiedAddressing;
  int memoryClockRate, memoryBusWidth, l2CacheSize, persistingL2CacheMaxSize, maxThreadsPerMultiProcessor;
  int streamPrioritiesSupported, globalL1CacheSupported, localL1CacheSupported;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor, managedMemory, isMultiGpuBoard, multiGpuBoardGroupID;
  int cooperativeLaunch, cooperativeMultiDeviceLaunch;
  size_t sharedMemPerBlockOptin;
  int maxBlocksPerMultiProcessor, accessPolicyMaxWindowSize;
  size_t reservedSharedMemPerBlock;
};
struct cudaFuncAttributes {
  size_t sharedSizeBytes, constSizeBytes, localSizeBytes;
  int maxThreadsPerBlock, numRegs, ptxVersion, binaryVersion, cacheModeCA, maxDynamicSharedSizeBytes;
  int preferredShmemCarveout;
};
struct CUstream_st;
struct CUevent_st;
typedef CUstream_st* cudaStream_t;
typedef CUevent_st* cudaEvent_t;
typedef cudaStream_t CUstream;
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamDefault 0x0
#define cudaStreamNonBlocking 0x1
#define cudaEventDefault 0x0
#define cudaEventDisableTiming 0x2
#define cudaEventBlockingSync 0x1
#define cudaHostAllocDefault 0x0

const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaMalloc(void** p, size_t n);
cudaError_t cudaMallocHost(void** p, size_t n);
cudaError_t cudaMallocManaged(void** p, size_t n, unsigned flags = 1);
cudaError_t cudaMallocAsync(void** p, size_t n, cudaStream_t s);
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned flags);
cudaError_t cudaFree(void* p);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaFreeAsync(void* p, cudaStream_t s);
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t st = 0);
cudaError_t cudaMemcpy2D(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind k);
cudaError_t cudaMemcpy2DAsync(void* d, size_t dp, const void* s, size_t sp, size_t w, size_t h, cudaMemcpyKind k, cudaStream_t st = 0);
cudaError_t cudaMemset(void* d, int v, size_t n);
cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t st = 0);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDeviceReset();
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int* d);
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int dev);
cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamCreateWithPriority(cudaStream_t* s, unsigned flags, int prio);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaDeviceSetCacheConfig(cudaFuncCache c);
cudaError_t cudaDeviceSetSharedMemConfig(cudaSharedMemConfig c);

namespace klemu {
cudaError_t func_set_attribute(const void* fn, int attr, int value);
cudaError_t func_get_attributes(cudaFuncAttributes* a, const void* fn);
cudaError_t occupancy(int* n, const void* fn, int block, size_t smem);

struct KInfo {
  const char* name;   // kernel name as written at the launch
  int fibers;         // 0: the kernel (statically) uses no barrier or warp collective
  const char* file;
  int line;           // line of the launch
  const void* fn;     // kernel address when known (for cudaFuncSetAttribute), else nullptr
  const char* instance = nullptr;  // `instance_name<&kernel<...>>()` when known: which instantiation
};
// The instantiation a function pointer names, as g++ spells it: "... [with auto F = k<32, false>]".
template <auto F>
const char* instance_name() { return __PRETTY_FUNCTION__; }
void run_grid(const KInfo& k, dim3 grid, dim3 block, size_t smem, void (*body)(void*), void* ctx);
// Every launch's stream is seen: one on another stream than the launcher was given is counted
// (klemu_foreign_launches), and the gate rejects it as `side_stream`, as the GPU gate does. The
// kernel instantiation of every launch is recorded too (klemu_launched_name): the effects of a
// skill count the instantiations the launches used, not every one the file compiles.
void note_stream(const KInfo& k, const void* stream);
template <class S>
static inline const void* stream_of(S s) {
  if constexpr (std::is_pointer_v<S>) return (const void*)s;
  else if constexpr (std::is_null_pointer_v<S>) return nullptr;
  else return (const void*)(uintptr_t)s;  // a literal 0: the legacy default stream
}

template <class F>
struct Launch {
  const KInfo& info;
  dim3 grid, block;
  size_t smem;
  const void* stream;  // nullptr: the default stream (no stream in the launch)
  F fn;
  template <class... A>
  void operator()(A... args) {
    note_stream(info, stream);
    auto body = [&]() { fn(args...); };
    run_grid(info, grid, block, smem, [](void* c) { (*static_cast<decltype(body)*>(c))(); }, &body);
  }
};
template <class F, class S = int>
static inline Launch<F> launch(const KInfo& k, dim3 grid, dim3 block, size_t smem, S stream, F fn) {
  return Launch<F>{k, grid, block, smem, stream_of(stream), fn};
}
template <class F>
static inline Launch<F> launch(const KInfo& k, dim3 grid, dim3 block, F fn) {
  return Launch<F>{k, grid, block, 0, nullptr, fn};
}
template <class F>
static inline Launch<F> launch(const KInfo& k, dim3 grid, dim3 block, size_t smem, F fn) {
  return Launch<F>{k, grid, block, smem, nullptr, fn};
}
}  // namespace klemu

template <class T> static inline cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc((void**)p, n); }
template <class T> static inline cudaError_t cudaMallocHost(T** p, size_t n) { return cudaMallocHost((void**)p, n); }
template <class T> static inline cudaError_t cudaMallocAsync(T** p, size_t n, cudaStream_t s) { return cudaMallocAsync((void**)p, n, s); }
template <class T> static inline cudaError_t cudaFuncSetAttribute(T* fn, cudaFuncAttribute a, int v) {
  return ::klemu::func_set_attribute((const void*)fn, (int)a, v);
}
template <class T> static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, T* fn) {
  return ::klemu::func_get_attributes(a, (const void*)fn);
}
template <class T> static inline cudaError_t cudaFuncSetCacheConfig(T*, cudaFuncCache) { return cudaSuccess; }
template <class T>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, T* fn, int block, size_t smem) {
  return ::klemu::occupancy(n, (const void*)fn, block, smem);
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbol(T& sym, const void* src, size_t n, size_t off = 0, cudaMemcpyKind = cudaMemcpyHostToDevice) {
  std::memcpy((char*)&sym + off, src, n);
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMemcpyToSymbolAsync(T& sym, const void* src, size_t n, size_t off = 0, cudaMemcpyKind = cudaMemcpyHostToDevice, cudaStream_t = 0) {
  std::memcpy((char*)&sym + off, src, n);
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaMemcpyFromSymbol(void* dst, const T& sym, size_t n, size_t off = 0, cudaMemcpyKind = cudaMemcpyDeviceToHost) {
  std::memcpy(dst, (const char*)&sym + off, n);
  return cudaSuccess;
}
template <class T>
static inline cudaError_t cudaGetSymbolAddress(void** p, T& sym) { *p = (void*)&sym; return cudaSuccess; }

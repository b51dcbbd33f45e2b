// Hopper (sm_90a) emulation: mbarrier phases, named and cluster barriers, warpgroup MMAs (wgmma),
// the Tensor Memory Accelerator (tensor maps and bulk copies), and the host API that reaches them
// (cuTensorMapEncodeTiled, driver entry points, cudaLaunchKernelEx). Implemented in
// src/klemu_hopper.cpp; gates/emu/ptx_hopper.py translates the inline PTX into these calls.
//
// A launch is a cluster of one block (a cluster of more is `unsupported`), so %cluster_ctarank is 0
// and mapa / multicast name this block only.
#pragma once

namespace klemu {
size_t dyn_smem_size();
// A shared-memory operand: a 32-bit shared address, or a generic pointer (wider than 32 bits).
inline uint64_t as_shared(uint64_t a, int line) {
  return a >> 32 ? cvta_shared((const void*)(uintptr_t)a, line) : a;
}
// mbarrier (8 bytes of shared memory at `bar`, a shared address): a phase completes when its
// pending arrivals reach zero and its transaction bytes are all counted; the bulk copies counted on
// it land in shared memory then, not before (their destination reads as poison until that phase
// completes).
void mbar_init(uint64_t bar, uint32_t count, int line);
uint64_t mbar_arrive(uint64_t bar, uint32_t count, int line);  // the state token: the phase arrived on
void mbar_expect_tx(uint64_t bar, uint32_t bytes, int line);
void mbar_complete_tx(uint64_t bar, uint32_t bytes, int line);  // as a bulk copy counts its bytes
void mbar_inval(uint64_t bar, int line);
// Whether the phase of this parity (or of this state token) has completed; `block`: try_wait (the
// thread sleeps until the barrier's phase changes), else test_wait (it only lets the others run).
int mbar_wait_parity(uint64_t bar, uint32_t parity, int block, int line);
int mbar_wait_token(uint64_t bar, uint64_t token, int block, int line);
// bar.sync / bar.arrive (barrier `id` 0-15 among `count` threads; count 0: the whole block).
void bar_named(uint32_t id, uint32_t count, int wait, int line);
void cluster_arrive(int line);
void cluster_wait(int line);
uint64_t mapa(uint64_t addr, uint32_t rank, int line);
// elect.sync: whether the caller is the leader (the lowest lane of `mask`); *leader gets its lane.
int elect(uint32_t mask, uint32_t* leader, int line);
// wgmma.mma_async m64nNk16 for the caller's warpgroup, done at issue once all 128 threads arrive.
// kind bits: 1 = bf16 inputs (else f16), 2 = f32 accumulators (else f16), 4 = A from registers.
// r: the caller's operand registers; D at r[d0 ...], A (register form) at r[a0 .. a0 + 3].
void wgmma(int kind, int n, uint64_t* r, int d0, int a0, uint64_t desc_a, uint64_t desc_b, int scale_d,
           int neg_a, int neg_b, int trans_a, int trans_b, int line);
// wgmma.commit_group / wait_group: the operands of a group's wgmmas must not change before the wait
// that retires it (checked there).
void wgmma_commit();
void wgmma_wait(int pending, int line);
// cp.async.bulk.tensor (tiled): a box of the tensor map at coordinates c[0..rank) (innermost first).
void tma_load(uint64_t dst, const void* map, const int32_t* c, int rank, uint64_t bar, uint32_t multicast,
              int line);
void tma_store(const void* map, const int32_t* c, int rank, uint64_t src, int line);
void bulk_load(uint64_t dst, const void* src, uint32_t bytes, uint64_t bar, int line);
void bulk_store(void* dst, uint64_t src, uint32_t bytes, int line);
[[noreturn]] void cluster_launch(unsigned x, unsigned y, unsigned z);
}  // namespace klemu

// Programmatic dependent launch: launches run one after another here, so there is nothing to wait for.
static inline void cudaGridDependencySynchronize() {}
static inline void cudaTriggerProgrammaticLaunchCompletion() {}

// ---- driver API: tensor maps -------------------------------------------------------------------
typedef uint64_t cuuint64_t;
typedef uint32_t cuuint32_t;
enum CUresult {
  CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_OUT_OF_MEMORY = 2, CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_INVALID_HANDLE = 400, CUDA_ERROR_NOT_FOUND = 500, CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};
static inline CUresult cuGetErrorString(CUresult e, const char** s) {
  *s = e == CUDA_SUCCESS ? "no error" : e == CUDA_ERROR_INVALID_VALUE ? "invalid argument" : "error";
  return CUDA_SUCCESS;
}
static inline CUresult cuGetErrorName(CUresult e, const char** s) {
  *s = e == CUDA_SUCCESS ? "CUDA_SUCCESS" : e == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR";
  return CUDA_SUCCESS;
}
struct alignas(64) CUtensorMap_st { cuuint64_t opaque[16]; };
typedef CUtensorMap_st CUtensorMap;
enum CUtensorMapDataType {
  CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0, CU_TENSOR_MAP_DATA_TYPE_UINT16, CU_TENSOR_MAP_DATA_TYPE_UINT32,
  CU_TENSOR_MAP_DATA_TYPE_INT32, CU_TENSOR_MAP_DATA_TYPE_UINT64, CU_TENSOR_MAP_DATA_TYPE_INT64,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ, CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
  CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
};
enum CUtensorMapInterleave {
  CU_TENSOR_MAP_INTERLEAVE_NONE = 0, CU_TENSOR_MAP_INTERLEAVE_16B, CU_TENSOR_MAP_INTERLEAVE_32B,
};
enum CUtensorMapSwizzle {
  CU_TENSOR_MAP_SWIZZLE_NONE = 0, CU_TENSOR_MAP_SWIZZLE_32B, CU_TENSOR_MAP_SWIZZLE_64B,
  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B, CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B,
  CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B,
};
enum CUtensorMapL2promotion {
  CU_TENSOR_MAP_L2_PROMOTION_NONE = 0, CU_TENSOR_MAP_L2_PROMOTION_L2_64B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
};
enum CUtensorMapFloatOOBfill {
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
};
enum CUdriverProcAddressQueryResult {
  CU_GET_PROC_ADDRESS_SUCCESS = 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};
#define CU_GET_PROC_ADDRESS_DEFAULT 0
CUresult cuTensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank, void* global,
                                const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                CUtensorMapFloatOOBfill oob);
CUresult cuGetProcAddress(const char* symbol, void** fn, int version, cuuint64_t flags,
                          CUdriverProcAddressQueryResult* status = nullptr);
enum cudaDriverEntryPointQueryResult {
  cudaDriverEntryPointSuccess = 0, cudaDriverEntryPointSymbolNotFound = 1,
  cudaDriverEntryPointVersionNotSufficent = 2,
};
enum { cudaEnableDefault = 0, cudaEnableLegacyStream = 1, cudaEnablePerThreadDefaultStream = 2 };
cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags,
                                    cudaDriverEntryPointQueryResult* status = nullptr);
cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int version,
                                             unsigned long long flags,
                                             cudaDriverEntryPointQueryResult* status = nullptr);

// ---- cudaLaunchKernelEx ------------------------------------------------------------------------
enum cudaLaunchAttributeID {
  cudaLaunchAttributeIgnore = 0, cudaLaunchAttributeAccessPolicyWindow = 1, cudaLaunchAttributeCooperative = 2,
  cudaLaunchAttributeSynchronizationPolicy = 3, cudaLaunchAttributeClusterDimension = 4,
  cudaLaunchAttributeClusterSchedulingPolicyPreference = 5, cudaLaunchAttributeProgrammaticStreamSerialization = 6,
  cudaLaunchAttributeProgrammaticEvent = 7, cudaLaunchAttributePriority = 8,
};
union cudaLaunchAttributeValue {
  char pad[64];
  struct { unsigned int x, y, z; } clusterDim;
  int cooperative;
  int priority;
  int clusterSchedulingPolicyPreference;
  int programmaticStreamSerializationAllowed;
};
struct cudaLaunchAttribute {
  cudaLaunchAttributeID id;
  char pad[8 - sizeof(cudaLaunchAttributeID)];
  cudaLaunchAttributeValue val;
};
struct cudaLaunchConfig_t {
  dim3 gridDim, blockDim;
  size_t dynamicSmemBytes;
  cudaStream_t stream;
  cudaLaunchAttribute* attrs;
  unsigned int numAttrs;
};

namespace klemu {
// The cluster dimension attribute of a launch configuration, or nullptr.
inline const cudaLaunchAttribute* cluster_attr(const cudaLaunchConfig_t* cfg) {
  for (unsigned i = 0; i < cfg->numAttrs; ++i)
    if (cfg->attrs[i].id == cudaLaunchAttributeClusterDimension) return &cfg->attrs[i];
  return nullptr;
}
inline unsigned long long cluster_blocks(const cudaLaunchConfig_t* cfg) {
  const cudaLaunchAttribute* a = cluster_attr(cfg);
  return a ? (unsigned long long)a->val.clusterDim.x * a->val.clusterDim.y * a->val.clusterDim.z : 1;
}
// A cluster of more than one block, or a cooperative launch, is refused as `unsupported`.
inline void check_launch_attrs(const cudaLaunchConfig_t* cfg) {
  if (cluster_blocks(cfg) > 1) {
    const cudaLaunchAttribute* a = cluster_attr(cfg);
    cluster_launch(a->val.clusterDim.x, a->val.clusterDim.y, a->val.clusterDim.z);
  }
  for (unsigned i = 0; i < cfg->numAttrs; ++i)
    if (cfg->attrs[i].id == cudaLaunchAttributeCooperative && cfg->attrs[i].val.cooperative)
      fail("unsupported", "a cooperative launch (cudaLaunchAttributeCooperative) cannot be emulated");
}
}  // namespace klemu

namespace klemu {
// cudaLaunchKernelEx as the source rewrite leaves it: the kernel's name and line in front.
template <class... P, class... A>
inline cudaError_t launch_ex(KInfo info, const cudaLaunchConfig_t* cfg, void (*kernel)(P...), A&&... args) {
  check_launch_attrs(cfg);
  info.fn = (const void*)kernel;
  launch(info, cfg->gridDim, cfg->blockDim, cfg->dynamicSmemBytes, cfg->stream,
         [kernel](P... a) { kernel(a...); })(static_cast<P>(args)...);
  return cudaSuccess;
}
}  // namespace klemu
// Reached only where the rewrite did not see the call (through a macro): the kernel has no name then.
template <class... P, class... A>
static inline cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t* cfg, void (*kernel)(P...), A&&... args) {
  return ::klemu::launch_ex(::klemu::KInfo{"cudaLaunchKernelEx", 1, "?", 0, nullptr}, cfg, kernel,
                            static_cast<A&&>(args)...);
}
template <class T>
static inline cudaError_t cudaOccupancyMaxActiveClusters(int* n, T*, const cudaLaunchConfig_t* cfg) {
  const unsigned long long size = ::klemu::cluster_blocks(cfg);
  *n = (int)(132 / (size ? size : 1));
  return cudaSuccess;
}

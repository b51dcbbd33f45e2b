// gemm_bf16, Hopper expert: C = A @ B, bf16 inputs, fp32 accumulation, bf16 output, row-major.
//
// STATUS: compiled for sm_90a here (nvcc 13.0, ptxas: see benchmarks/RESULTS.md, s15-hopper);
// NOT YET RUN ON A GPU when written: its correctness and speed are what
// .devwork/s15-hopper/run_gpu.sh measures (since: H100, 0.89x cuBLAS, RESULTS). The CPU emulator
// runs it as written (gates/emu/ptx_hopper.py) except its cluster build (KL_CLUSTER = 2: unsupported).
// Precondition (workload): M, N, K multiples of 64.
//
// The Hopper design, against expert.cu's Ampere one (mma.sync fed by ldmatrix from a cp.async
// ring, every warp both loading and multiplying):
// - Warp specialization: the block is KL_CONSUMERS + 1 warpgroups (128 threads each). The last
//   one is the producer: one thread issues every copy. The others are consumers: each owns 64
//   rows of the BM x BN block tile of C and only multiplies. `setmaxnreg` moves registers from
//   the producer (40 per thread) to the consumers (232) for their 128 accumulators (ptxas then
//   compiles the kernel at 168 registers; without it, KL_SETMAXNREG=0, at 154, also spill-free).
// - TMA (cp.async.bulk.tensor) copies global -> shared through tensor maps the launcher encodes
//   on the host (cuTensorMapEncodeTiled, reached through the runtime's driver entry point, so the
//   library needs no -lcuda). A tile: BM rows x 64 K (128-byte rows). B tile: 64 K rows x BN,
//   copied as BN / 64 boxes of 64 columns (128 bytes, the widest row the 128-byte swizzle takes).
//   Rows and columns past M or N are zero-filled by the copy engine; boxes wholly past N are
//   not issued (their columns are never stored).
// - A KL_STAGES-deep ring of (A, B) slices guarded by mbarriers: `full[s]` completes when the
//   slice's bytes have landed (the producer's arrive.expect_tx + the copies' complete_tx),
//   `empty[s]` when every consumer warp has finished the wgmmas that read it.
// - wgmma.mma_async m64nNk16 (bf16 x bf16 -> fp32) reads both operands from shared memory
//   through 64-bit matrix descriptors, 128-byte swizzle. A is K-major: 8-row groups 1024 bytes
//   apart (stride offset), a k16 step is +32 bytes inside the swizzle atom. B is K x N row-major,
//   i.e. MN-major for the MMA (imm-trans-b = 1): within a 64-column box the 8-row K groups are
//   1024 bytes apart, boxes (the next 64 columns) 8 KB apart, a k16 step is +2048 bytes.
//   Each consumer keeps one wgmma group in flight: after committing slice t it waits for slice
//   t - 1's group and frees that slice's stage.
// - Epilogue: fp32 accumulators -> bf16 pairs stored straight from the fragment (row-masked and
//   column-masked for partial tiles).
// - Block order: tiles grouped 8 along M (a block's neighbours in launch order share its B
//   columns and nearby A rows, which keeps them in L2). KL_PERSISTENT (default): as many blocks
//   as fit at once, each walking tiles; the ring's counter runs across tiles, so the next tile's
//   first slices load while this one's C is stored.
// - KL_CLUSTER = 2 (off by default): clusters of two blocks on vertically adjacent tiles; each
//   block copies half of the B boxes with multicast into both, so B is read from L2 once per
//   pair; a stage is free when all 16 consumer warps of the pair have arrived (remote arrivals
//   through mapa), and cluster barriers fence the start and the end.
// The emulator checks all but the PTX itself and the clusters with C++ models of the
// instructions (tests/test_hopper_expert.py).
#include <cuda.h>  // CUtensorMap and its enums only: no driver-API symbol is linked
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include <stdio.h>

#ifndef KL_BN
#define KL_BN 256  // block tile columns (a multiple of 64)
#endif
#ifndef KL_STAGES
#define KL_STAGES 4  // slices in the ring
#endif
#ifndef KL_CONSUMERS
#define KL_CONSUMERS 2  // consumer warpgroups, 64 rows of C each
#endif
#ifndef KL_WGMMA_N
#define KL_WGMMA_N 256  // N of one wgmma (128 or 256; <= KL_BN)
#endif
#ifndef KL_PERSISTENT
#define KL_PERSISTENT 1  // 1: one block per SM walks the tiles; 0: one block per tile
#endif
#ifndef KL_SETMAXNREG
#define KL_SETMAXNREG 1  // 0: no register reallocation (ptxas fits the default in 154 without it)
#endif
#ifndef KL_CLUSTER
#define KL_CLUSTER 1  // blocks per cluster along M: 2 share every B box through TMA multicast
#endif
#ifndef KL_B_SWAP_OFFSETS
#define KL_B_SWAP_OFFSETS 0  // 1: B's descriptor offsets exchanged (a diagnosis build only)
#endif

namespace {

constexpr int kBM = 64 * KL_CONSUMERS;
constexpr int kBN = KL_BN;
constexpr int kBK = 64;                           // 64 bf16 = 128 bytes: one swizzle row
constexpr int kStages = KL_STAGES;
constexpr int kConsumers = KL_CONSUMERS;
constexpr int kThreads = 128 * (kConsumers + 1);
constexpr int kBoxN = 64;                         // columns of one B box
constexpr int kBoxes = kBN / kBoxN;
constexpr int kABytes = kBM * kBK * 2;
constexpr int kBoxBytes = kBK * kBoxN * 2;        // 8 KB
constexpr int kBBytes = kBoxes * kBoxBytes;
constexpr int kStageBytes = kABytes + kBBytes;    // a multiple of 1024: swizzle atoms stay aligned
constexpr int kBarrierBytes = 2 * kStages * 8;
constexpr int kSmemBytes = 1024 /* base alignment */ + kStages * kStageBytes + kBarrierBytes;
constexpr int kWgmmaN = KL_WGMMA_N;
constexpr int kAcc = kBN / 2;                     // fp32 accumulators per consumer thread
constexpr int kGroupM = 8;                        // block raster: groups of 8 tile rows
constexpr int kCluster = KL_CLUSTER;
constexpr bool kReallocate = KL_SETMAXNREG && kAcc > 64 && kConsumers > 1;  // wide accumulators, 384+ threads

static_assert(kBN % kBoxN == 0 && kBN % kWgmmaN == 0, "BN: whole boxes and whole wgmmas");
static_assert(kWgmmaN == 128 || kWgmmaN == 256, "wgmma N: 128 or 256");
static_assert(kCluster == 1 || kCluster == 2, "clusters of 1 or 2 blocks");
static_assert(kStageBytes % 1024 == 0, "stages must keep the 1024-byte swizzle alignment");
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");

// ---- shared-memory matrix descriptors (integer code) ---------------------------------------

// Shared-memory matrix descriptor: start address, leading and stride byte offsets (all >> 4),
// 128-byte swizzle (mode 1 in bits 62-63); base offset 0 since every swizzle atom of the ring
// starts 1024-byte aligned.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t leading, uint32_t stride) {
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
           (static_cast<uint64_t>((leading & 0x3FFFF) >> 4) << 16) |
           (static_cast<uint64_t>((stride & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// ---- PTX helpers ---------------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// ---- clusters (KL_CLUSTER = 2): the blocks of a cluster share B boxes, so a stage is free only
// when the consumers of every block of the cluster are done with it

__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r = 0;
    if constexpr (kCluster > 1) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// Every thread of every block of the cluster (a block barrier when the cluster is one block).
__device__ __forceinline__ void cluster_sync() {
    if constexpr (kCluster > 1)
        asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    else
        __syncthreads();
}

// One arrival on the barrier at this shared offset in every block of the cluster.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar) {
    if constexpr (kCluster == 1) {
        mbar_arrive(bar);
    } else {
#pragma unroll
        for (uint32_t r = 0; r < kCluster; ++r) {
            uint32_t remote;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(r));
            asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
        }
    }
}

// tma_load_2d into the same shared offset of every block of the cluster (each block's barrier at
// `bar` counts the bytes that land in it).
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                                      uint32_t bar) {
    const uint16_t blocks = (1u << kCluster) - 1;
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%2, %3}], [%4], %5;"
        ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(blocks)
        : "memory");
}

// Spin until the phase of `bar` with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}

// 2-D tiled TMA copy of the box at (column c0, row c1) into shared memory; completes on `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1,
                                            uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];"
        ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
        : "memory");
}

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across the asynchronous MMAs.
template <int kN>
__device__ __forceinline__ void fence_accumulators(float (&d)[kN]) {
#pragma unroll
    for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (64 x 128, fp32, 64 per thread) += A (64 x 16, K-major) * B (16 x 128, MN-major: imm-trans-b = 1)
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 1;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

// D (64 x 256, fp32, 128 per thread) += A (64 x 16, K-major) * B (16 x 256, MN-major: imm-trans-b = 1)
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, p, 1, 1, 0, 1;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
          "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
          "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
          "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(1));
}

// ---- end of the PTX helpers --------------------------------------------------------------

// ---- the kernel ----------------------------------------------------------------------------

struct Tile {
    int m0, n0;
};

constexpr int kClusterBM = kBM * kCluster;  // rows of C a cluster computes at once

// Cluster tile `t` (kClusterBM x kBN) of the grid of them, in groups of kGroupM tile rows:
// consecutive tiles walk down a group's rows first, so the tiles in flight together share B
// columns and A rows. Block r of the cluster takes rows r * kBM .. of it.
__device__ __forceinline__ Tile tile_origin(int t, int M, int N) {
    const int tiles_m = (M + kClusterBM - 1) / kClusterBM, tiles_n = (N + kBN - 1) / kBN;
    const int per_group = kGroupM * tiles_n;
    const int first_m = (t / per_group) * kGroupM;
    const int rows_in_group = min(tiles_m - first_m, kGroupM);
    const int in_group = t % per_group;
    return {(first_m + in_group % rows_in_group) * kClusterBM + (int)cluster_rank() * kBM,
            (in_group / rows_in_group) * kBN};
}

// The ring in shared memory: kStages (A, B) slices, then the full[s] and empty[s] barriers.
struct Ring {
    uint32_t base;  // 1024-byte aligned
    __device__ __forceinline__ uint32_t a(int s) const { return base + s * kStageBytes; }
    __device__ __forceinline__ uint32_t b(int s) const { return base + s * kStageBytes + kABytes; }
    __device__ __forceinline__ uint32_t full(int s) const { return base + kStages * kStageBytes + 8 * s; }
    __device__ __forceinline__ uint32_t empty(int s) const {
        return base + kStages * kStageBytes + 8 * (kStages + s);
    }
};

// The producer thread: every slice of every tile of this cluster into the ring. The slice counter
// `it` runs across tiles (ring slot it % kStages, round it / kStages).
__device__ __forceinline__ void produce(const CUtensorMap& map_a, const CUtensorMap& map_b, int M, int N, int first,
                                       int step, int tiles, int num_k, const Ring& ring) {
    const int rank = (int)cluster_rank();
    int it = 0;
    for (int tile = first; tile < tiles; tile += step) {
        const Tile o = tile_origin(tile, M, N);
        int boxes = 0;  // B boxes that hold columns < N (N is a multiple of 64): the same in every block
        for (int c = 0; c < kBoxes; ++c) boxes += (o.n0 + c * kBoxN < N) ? 1 : 0;
        const bool rows = o.m0 < M;  // false only for a cluster's second block past M: no A copy
        const uint32_t bytes = (rows ? kABytes : 0) + boxes * kBoxBytes;  // what lands here per slice
        for (int t = 0; t < num_k; ++t, ++it) {
            const int s = it % kStages;
            if (it >= kStages) mbar_wait(ring.empty(s), ((it / kStages) - 1) & 1);
            mbar_expect_tx(ring.full(s), bytes);
            if (rows) tma_load_2d(ring.a(s), &map_a, t * kBK, o.m0, ring.full(s));
            for (int c = rank; c < boxes; c += kCluster) {  // block r copies boxes r, r + kCluster, ...
                if constexpr (kCluster == 1)
                    tma_load_2d(ring.b(s) + c * kBoxBytes, &map_b, o.n0 + c * kBoxN, t * kBK, ring.full(s));
                else
                    tma_load_2d_multicast(ring.b(s) + c * kBoxBytes, &map_b, o.n0 + c * kBoxN, t * kBK,
                                          ring.full(s));
            }
        }
    }
}

// Consumer warpgroup `wg`: rows 64 wg .. 64 wg + 63 of each of this block's tiles.
__device__ __forceinline__ void consume(__nv_bfloat16* __restrict__ C, int M, int N, int first, int step, int tiles,
                                        int num_k, const Ring& ring, int wg) {
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    constexpr uint32_t kBLeading = KL_B_SWAP_OFFSETS ? 1024 : kBoxBytes;
    constexpr uint32_t kBStride = KL_B_SWAP_OFFSETS ? kBoxBytes : 1024;
    float acc[kAcc];
    int it = 0;  // slices consumed so far, as the producer counts them
    for (int tile = first; tile < tiles; tile += step) {
        const Tile o = tile_origin(tile, M, N);
#pragma unroll
        for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
        for (int t = 0; t < num_k; ++t, ++it) {
            const int s = it % kStages;
            mbar_wait(ring.full(s), (it / kStages) & 1);
            const uint32_t a_tile = ring.a(s) + wg * 64 * (kBK * 2);
            const uint32_t b_tile = ring.b(s);
            fence_accumulators(acc);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < kBK / 16; ++kk) {
                const uint64_t da = smem_desc(a_tile + kk * 32, 16, 1024);
#pragma unroll
                for (int h = 0; h < kBN / kWgmmaN; ++h) {
                    const uint64_t db = smem_desc(
                        b_tile + kk * 16 * (kBoxN * 2) + h * (kWgmmaN / kBoxN) * kBoxBytes, kBLeading, kBStride);
                    if constexpr (kWgmmaN == 256)
                        wgmma_m64n256k16(*reinterpret_cast<float(*)[128]>(&acc[h * 128]), da, db);
                    else
                        wgmma_m64n128k16(*reinterpret_cast<float(*)[64]>(&acc[h * 64]), da, db);
                }
            }
            wgmma_commit();
            fence_accumulators(acc);
            wgmma_wait<1>();  // the previous slice's MMAs are done: its stage may be refilled
            if (t > 0 && lane == 0) mbar_arrive_cluster(ring.empty((it - 1) % kStages));
        }
        wgmma_wait<0>();
        fence_accumulators(acc);
        if (lane == 0) mbar_arrive_cluster(ring.empty((it - 1) % kStages));  // the tile's last slice

        // epilogue: fragment of warp w: rows 16 w + lane / 4 (+ 8), columns 8 j + 2 (lane % 4) (+ 1)
        const int row = o.m0 + wg * 64 + warp * 16 + lane / 4;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
            const int col = o.n0 + j * 8 + 2 * (lane % 4);
            if (col < N) {
                if (row < M)
                    *reinterpret_cast<__nv_bfloat162*>(C + (size_t)row * N + col) =
                        __floats2bfloat162_rn(acc[4 * j], acc[4 * j + 1]);
                if (row + 8 < M)
                    *reinterpret_cast<__nv_bfloat162*>(C + (size_t)(row + 8) * N + col) =
                        __floats2bfloat162_rn(acc[4 * j + 2], acc[4 * j + 3]);
            }
        }
    }
}

// Cluster c computes cluster tiles c, c + clusters, ... (one tile when the grid has a block per
// tile; with KL_PERSISTENT as many blocks as fit at once). The ring's slice counter runs on across
// tiles, so the producer loads the next tile's first slices while the consumers store this one's C.
// A block whose rows start past M (the second of a cluster on the last tile row of an odd count)
// copies no A, still multicasts its share of B, multiplies whatever its A stages hold and stores
// nothing.
__global__ void __launch_bounds__(kThreads, 1)
gemm_bf16_wgmma(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                __nv_bfloat16* __restrict__ C, int M, int N, int K) {
    extern __shared__ uint8_t smem_raw[];
    const Ring ring{(smem_u32(smem_raw) + 1023u) & ~1023u};
    const int tiles = ((M + kClusterBM - 1) / kClusterBM) * ((N + kBN - 1) / kBN);
    const int first = blockIdx.x / kCluster, step = gridDim.x / kCluster;
    const int num_k = K / kBK;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(ring.full(s), 1);                           // the producer's arrive.expect_tx
            mbar_init(ring.empty(s), 4 * kConsumers * kCluster);  // each consumer warp of the cluster
        }
        fence_barrier_init();
    }
    cluster_sync();  // barriers initialized in every block before any copy or remote arrival

    if (wg == kConsumers) {  // producer warpgroup
        if constexpr (kReallocate) setmaxnreg_dec<40>();
        if (threadIdx.x % 128 == 0) produce(map_a, map_b, M, N, first, step, tiles, num_k, ring);
    } else {
        if constexpr (kReallocate) setmaxnreg_inc<232>();
        consume(C, M, N, first, step, tiles, num_k, ring, wg);
    }
    if constexpr (kCluster > 1) cluster_sync();  // no block leaves while another may still write to it
}

// ---- host: tensor maps and the launch ------------------------------------------------------

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled from the driver the runtime already loaded (no -lcuda at link time).
EncodeTiled encode_tiled() {
    static EncodeTiled fn = nullptr;
    if (fn == nullptr) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = reinterpret_cast<EncodeTiled>(p);
    }
    return fn;
}

// Row-major bf16 matrix `rows` x `cols`, copied in boxes of box_rows x box_cols, 128-byte swizzle,
// out-of-bounds elements read as zero.
bool tensor_map(CUtensorMap* map, const void* ptr, int rows, int cols, int box_rows, int box_cols) {
    const EncodeTiled encode = encode_tiled();
    if (encode == nullptr) return false;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    const cuuint32_t unit[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(ptr), dims, strides, box, unit,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A launch of `blocks` blocks in clusters of kCluster along x (built in place: cfg points at attr).
struct ClusterLaunch {
    cudaLaunchAttribute attr{};
    cudaLaunchConfig_t cfg{};
    ClusterLaunch(int blocks, cudaStream_t stream) {
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = kCluster;
        attr.val.clusterDim.y = 1;
        attr.val.clusterDim.z = 1;
        cfg.gridDim = dim3(blocks);
        cfg.blockDim = dim3(kThreads);
        cfg.dynamicSmemBytes = kSmemBytes;
        cfg.stream = stream;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
    }
    ClusterLaunch(const ClusterLaunch&) = delete;
};

// Clusters of kCluster blocks the device runs at once (a block per SM when kCluster = 1; a cluster
// of 2 needs two SMs of one GPC, so there may be fewer than SMs / 2 places).
int resident_clusters() {
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (sms <= 0) sms = 132;
    if constexpr (kCluster == 1) return sms;
    const ClusterLaunch l(sms / kCluster * kCluster, nullptr);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, gemm_bf16_wgmma, &l.cfg) != cudaSuccess || n <= 0) {
        cudaGetLastError();  // the query's error is not the launch's
        n = sms / kCluster;
    }
    return n;
}

void launch_clusters(int clusters, const CUtensorMap& map_a, const CUtensorMap& map_b, __nv_bfloat16* C, int M,
                     int N, int K, cudaStream_t stream) {
    if constexpr (kCluster == 1) {
        gemm_bf16_wgmma<<<clusters, kThreads, kSmemBytes, stream>>>(map_a, map_b, C, M, N, K);
    } else {
        const ClusterLaunch l(clusters * kCluster, stream);
        cudaLaunchKernelEx(&l.cfg, gemm_bf16_wgmma, map_a, map_b, C, M, N, K);
    }
}

}  // namespace

extern "C" void launch(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N, int K,
                       cudaStream_t stream) {
    static bool attr_set = false;
    if (!attr_set) {
        cudaFuncSetAttribute(gemm_bf16_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
        attr_set = true;
    }
    CUtensorMap map_a, map_b;
    if (!tensor_map(&map_a, A, M, K, kBM, kBK) || !tensor_map(&map_b, B, K, N, kBK, kBoxN)) {
        fprintf(stderr, "gemm_bf16_wgmma: cuTensorMapEncodeTiled unavailable or refused the shapes\n");
        return;  // C stays as it was: the gate's poisoned output reports it
    }
    const int tiles = ((M + kClusterBM - 1) / kClusterBM) * ((N + kBN - 1) / kBN);  // cluster tiles
    static int resident = 0;
    if (resident == 0) resident = resident_clusters();
    const int clusters = KL_PERSISTENT ? (tiles < resident ? tiles : resident) : tiles;
    launch_clusters(clusters, map_a, map_b, C, M, N, K, stream);
}

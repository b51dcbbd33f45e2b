// attention_fwd, Hopper variant: fp16 attention forward on wgmma, fed by TMA through an mbarrier
// ring, warp-specialized (one producer warp, consumer warpgroups of 64 query rows).
//
// STATUS: checked and timed on an H100 (2026-12-07, benchmarks/RESULTS.md "seventeenth session"):
// B 8, H 16, S 2048, D 128 fp16, three consumers (this default) 0.5740 ms = 0.74x SDPA non-causal,
// 0.3495 ms = 0.77x causal; two consumers with the overlap 0.52x / 0.58x; the mma.sync expert.cu
// 0.49x / 0.55x, same process. The CPU emulator runs it as written (TMA, mbarrier, named barriers,
// wgmma: gates/emu/ptx_hopper.py); its ring, online softmax, masks and descriptor arithmetic also run
// there with C++ models of the PTX helpers (tests/test_hopper_attention.py). Preconditions (workload): D is 64
// or 128, S a multiple of 128 (a 192-row block's last tile is partial and masked).
//
// Against expert.cu (FlashAttention-2 on mma.sync: every warp loads with cp.async and multiplies):
// - A block per (KL_CONSUMERS x 64 query rows, head, batch), heaviest causal tiles first. The
//   block is KL_CONSUMERS + 1 warpgroups: the last is the producer (one thread issues every copy),
//   the others consumers, each owning 64 query rows. `setmaxnreg` moves registers from the
//   producer to the consumers, which hold S, P and O in registers.
// - Q, K and V are read as 2-D row-major matrices (B H S rows of D halves) through tensor maps the
//   launcher encodes (cuTensorMapEncodeTiled through the runtime's driver entry point: no
//   -lcuda). Every tile is stored as D / 64 slabs of 64 columns (128-byte rows, 128-byte swizzle).
//   Q's tile is copied once; K and V tiles of KL_BN keys go through a KL_STAGES-deep ring:
//   full_k[s] and full_v[s] complete when the bytes have landed (arrive.expect_tx + complete_tx),
//   empty[s] when every consumer warp is done with both. Keys past S (KL_BN = 176 leaves a part
//   tile) are read from the next head or zero-filled, and masked.
// - S = Q K^T: wgmma m64nKL_BNk16 with both operands in shared memory, both K-major (a k16 step
//   is +32 bytes inside a swizzled row, the next 64 d columns the next slab; 8-row groups 1024
//   bytes apart). Online softmax on the fp32 fragment (rows lane / 4 and + 8 of the warp's 16;
//   row max over the quad's 4 lanes by shuffles, exponentials as ex2.approx on log2e-prescaled
//   scores, per-lane row sums reduced once at the end). P is packed as fp16 pairs: the
//   accumulator layout of two 8-column groups is the register A layout of a k16 step.
// - O += P V: wgmma m64nDk16 with A = P from registers and B = V from shared memory, MN-major
//   (imm-trans-b = 1): 8-key groups 1024 bytes apart (stride offset), the next 64 d columns the
//   next slab (leading offset), a k16 step +2048 bytes.
// - KL_OVERLAP (kOverlap): tile j's S = Q K^T is issued before tile j - 1's O += P V and its softmax
//   runs while that product is in flight (wgmma.wait_group 1); O is rescaled before the product
//   is issued and P packed after it completed, so no register an in-flight wgmma reads is written
//   (ptxas would serialize the wgmmas otherwise: its C7513 note). Only where consumers get 240
//   registers (two consumer warpgroups with setmaxnreg, or one): elsewhere it spills.
// - KL_PINGPONG (kPingpong, off by default; with the overlap and two consumers): the consumer
//   warpgroups take turns issuing their wgmmas (named barriers), so one's softmax runs while the
//   other's products use the tensor cores. Both then walk every key tile of the block (no causal
//   skip: the turns must pair up), and the second warpgroup's arrivals number its turns.
// - Causal: key tiles past the block's last row are never loaded; tiles that cross the diagonal
//   are masked element-wise; a consumer skips the math of a tile wholly above its rows (it still
//   waits for the tile, so its arrivals stay one per ring round).
// - Epilogue: O / l as fp16 pairs stored from the fragment.
#include <cuda.h>  // CUtensorMap and its enums only: no driver-API symbol is linked
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdio.h>

#ifndef KL_CONSUMERS
#define KL_CONSUMERS 3  // consumer warpgroups, 64 query rows each (1, 2 or 3; 3 measured fastest)
#endif
#ifndef KL_BN
#define KL_BN 128  // keys per K / V tile (64, 128 or 176)
#endif
#ifndef KL_STAGES
#define KL_STAGES 2  // K / V tiles in the ring
#endif
#ifndef KL_SETMAXNREG
#define KL_SETMAXNREG 1  // 0: no register reallocation between producer and consumers
#endif
#ifndef KL_OVERLAP
#define KL_OVERLAP 1  // 1: a tile's S = Q K^T and softmax overlap the previous tile's O += P V (see kOverlap)
#endif
#ifndef KL_PINGPONG
#define KL_PINGPONG 0  // 1: the two consumer warpgroups take turns issuing their wgmmas (see kPingpong)
#endif
#ifndef KL_V_SWAP_OFFSETS
#define KL_V_SWAP_OFFSETS 0  // 1: V's descriptor offsets exchanged (a diagnosis build only)
#endif

namespace {

constexpr int kConsumers = KL_CONSUMERS;
constexpr int kBQ = 64 * kConsumers;  // query rows per block
constexpr int kBN = KL_BN;
constexpr int kStages = KL_STAGES;
constexpr int kThreads = 128 * (kConsumers + 1);
constexpr int kSlabCols = 64;  // halves per swizzled 128-byte row

static_assert(kConsumers >= 1 && kConsumers <= 3, "1 to 3 consumer warpgroups");
static_assert(kBN == 64 || kBN == 128 || kBN == 176, "KL_BN: 64, 128 or 176 keys");
static_assert(kStages >= 2, "a ring of two or more stages");

// Registers per thread after setmaxnreg: the producer keeps the minimum, the consumers share the
// rest of the 64K-register file (multiples of 8).
constexpr int kProducerRegs = 24;
constexpr int kConsumerRegs = kConsumers == 1 ? 240 : kConsumers == 2 ? 240 : 160;
constexpr bool kReallocate = KL_SETMAXNREG && kConsumers > 1;
// The overlap holds two P tiles beside S and O: only where a consumer thread has 240 registers
// (ptxas spills it at the 168 of 384 threads without setmaxnreg, and at 160 with three consumers).
constexpr bool kOverlap = KL_OVERLAP && (kReallocate ? kConsumerRegs >= 240 : kConsumers == 1);
// Turns between two consumer warpgroups, on top of the overlap (named barriers 1 and 2).
constexpr bool kPingpong = KL_PINGPONG && kOverlap && kConsumers == 2;

template <int D>
struct Cfg {
    static constexpr int kSlabs = D / kSlabCols;
    static constexpr int kQSlab = kBQ * 128;   // bytes of one 64-column slab of the Q tile
    static constexpr int kKVSlab = kBN * 128;  // of a K or V tile
    static constexpr int kQBytes = kSlabs * kQSlab;
    static constexpr int kKVBytes = kSlabs * kKVSlab;
    static constexpr int kStageBytes = 2 * kKVBytes;  // K then V
    static constexpr int kBarriers = 1 + 3 * kStages;  // q_full, full_k[], full_v[], empty[]
    static constexpr int kSmem = 1024 /* alignment */ + kQBytes + kStages * kStageBytes + 8 * kBarriers;
    static_assert(kQSlab % 1024 == 0 && kKVSlab % 1024 == 0, "slabs keep the swizzle atoms aligned");
    static_assert(kSmem <= 227 * 1024, "shared memory per block");
};

// ---- shared-memory matrix descriptors (integer code) ---------------------------------------

// Start address, leading and stride byte offsets (all >> 4), 128-byte swizzle (mode 1 in bits
// 62-63); base offset 0: every swizzle atom starts 1024-byte aligned.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t leading, uint32_t stride) {
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
           (static_cast<uint64_t>((leading & 0x3FFFF) >> 4) << 16) |
           (static_cast<uint64_t>((stride & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// ---- PTX helpers ---------------------------------------------------------------------------
// (the mbarrier, TMA, setmaxnreg and wgmma-fence wrappers are the gemm_bf16 Hopper variant's,
// repeated here because the gate compiles one self-contained file)

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
template <int kN>
__device__ __forceinline__ void fence_registers(uint32_t (&r)[kN]) {
#pragma unroll
    for (int i = 0; i < kN; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// Named barrier kId among kThreadsAt threads: sync waits for the arrivals, arrive does not wait.
template <int kId, int kThreadsAt>
__device__ __forceinline__ void named_sync() {
    asm volatile("bar.sync %0, %1;" ::"n"(kId), "n"(kThreadsAt) : "memory");
}
template <int kId, int kThreadsAt>
__device__ __forceinline__ void named_arrive() {
    asm volatile("bar.arrive %0, %1;" ::"n"(kId), "n"(kThreadsAt) : "memory");
}

__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

#if KL_BN == 64  // only the S product of this tile width is instantiated
// S (64 x 64, fp32) (+)= A (64 x 16, K-major) * B (16 x 64, K-major); scale_d 0 overwrites S
__device__ __forceinline__ void wgmma_ss_n64(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "%32, %33, p, 1, 1, 0, 0;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
#endif
#if KL_BN == 128  // only the S product of this tile width is instantiated
// S (64 x 128, fp32) (+)= A (64 x 16, K-major) * B (16 x 128, K-major); scale_d 0 overwrites S
__device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
#endif
#if KL_BN == 176  // only the S product of this tile width is instantiated
// S (64 x 176, fp32) (+)= A (64 x 16, K-major) * B (16 x 176, K-major); scale_d 0 overwrites S
__device__ __forceinline__ void wgmma_ss_n176(float (&d)[88], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %90, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n176k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87}, "
        "%88, %89, p, 1, 1, 0, 0;\n}\n"
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
          "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
        : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
#endif
// O (64 x 64, fp32) (+)= P (64 x 16, fp16 registers) * V (16 x 64, MN-major: imm-trans-b = 1)
__device__ __forceinline__ void wgmma_rs_n64(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}
// O (64 x 128, fp32) (+)= P (64 x 16, fp16 registers) * V (16 x 128, MN-major: imm-trans-b = 1)
__device__ __forceinline__ void wgmma_rs_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
        :
          "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}

// ---- end of the PTX helpers --------------------------------------------------------------

// ---- the kernel ----------------------------------------------------------------------------

template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {
    if constexpr (N == 64) wgmma_ss_n64(d, desc_a, desc_b, scale_d);
    else if constexpr (N == 128) wgmma_ss_n128(d, desc_a, desc_b, scale_d);
    else wgmma_ss_n176(d, desc_a, desc_b, scale_d);
}

template <int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) {
    if constexpr (N == 64) wgmma_rs_n64(d, a, desc_b, scale_d);
    else wgmma_rs_n128(d, a, desc_b, scale_d);
}

// The block's shared memory: the Q tile's slabs, the ring's K and V tiles, then the barriers.
template <int D>
struct Smem {
    using C = Cfg<D>;
    uint32_t base;  // 1024-byte aligned
    __device__ __forceinline__ uint32_t q() const { return base; }
    __device__ __forceinline__ uint32_t k(int s) const { return base + C::kQBytes + s * C::kStageBytes; }
    __device__ __forceinline__ uint32_t v(int s) const { return k(s) + C::kKVBytes; }
    __device__ __forceinline__ uint32_t bar(int i) const {
        return base + C::kQBytes + kStages * C::kStageBytes + 8 * i;
    }
    __device__ __forceinline__ uint32_t q_full() const { return bar(0); }
    __device__ __forceinline__ uint32_t full_k(int s) const { return bar(1 + s); }
    __device__ __forceinline__ uint32_t full_v(int s) const { return bar(1 + kStages + s); }
    __device__ __forceinline__ uint32_t empty(int s) const { return bar(1 + 2 * kStages + s); }
};

// Where a block works: its first query row in the head, the head's first row of the 2-D view
// (B H S rows of D), and how many key tiles it reads (causal: none past its last row).
struct Work {
    int q0, row0, tiles;
};

template <bool kCausal>
__device__ __forceinline__ Work block_work(int S) {
    const int q_tiles = gridDim.y;
    const int qt = kCausal ? q_tiles - 1 - (int)blockIdx.y : (int)blockIdx.y;  // causal: longest rows first
    const int q0 = qt * kBQ;
    const int end = kCausal ? min(S, q0 + kBQ) : S;
    return {q0, (int)blockIdx.x * S, (end + kBN - 1) / kBN};
}

// The producer thread: the Q tile once, then every K and V tile of the block through the ring
// (slot j % kStages, round j / kStages; a slot is refilled once its empty barrier's previous
// round has completed).
template <int D>
__device__ __forceinline__ void produce(const CUtensorMap& map_q, const CUtensorMap& map_k, const CUtensorMap& map_v,
                                        const Smem<D>& sm, const Work& w) {
    using C = Cfg<D>;
    mbar_expect_tx(sm.q_full(), C::kQBytes);
#pragma unroll
    for (int c = 0; c < C::kSlabs; ++c)
        tma_load_2d(sm.q() + c * C::kQSlab, &map_q, c * kSlabCols, w.row0 + w.q0, sm.q_full());
    for (int j = 0; j < w.tiles; ++j) {
        const int s = j % kStages;
        if (j >= kStages) mbar_wait(sm.empty(s), ((j / kStages) - 1) & 1);
        const int row = w.row0 + j * kBN;
        mbar_expect_tx(sm.full_k(s), C::kKVBytes);
#pragma unroll
        for (int c = 0; c < C::kSlabs; ++c)
            tma_load_2d(sm.k(s) + c * C::kKVSlab, &map_k, c * kSlabCols, row, sm.full_k(s));
        mbar_expect_tx(sm.full_v(s), C::kKVBytes);
#pragma unroll
        for (int c = 0; c < C::kSlabs; ++c)
            tma_load_2d(sm.v(s) + c * C::kKVSlab, &map_v, c * kSlabCols, row, sm.full_v(s));
    }
}

// The fragment of an m64nN accumulator a thread holds: element i is row 16 warp + lane / 4
// (+ 8 when bit 1 of i is set), column 8 (i / 4) + 2 (lane % 4) + (i % 2).
__device__ __forceinline__ int frag_row(int i) { return 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int frag_col(int i, int lane) { return 8 * (i >> 2) + 2 * (lane % 4) + (i & 1); }

// Issues S = Q K^T for the warpgroup's 64 rows and the tile's kBN keys as one wgmma group (the
// caller waits for it). Both operands K-major in shared memory: a k16 step is +32 bytes inside a
// swizzled row, every 64 d columns the next slab.
template <int D>
__device__ __forceinline__ void issue_scores(float (&s)[kBN / 2], uint32_t q_rows, uint32_t k_tile) {
    using C = Cfg<D>;
    fence_accumulators(s);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
        const uint64_t da = smem_desc(q_rows + (kk / 4) * C::kQSlab + (kk % 4) * 32, 16, 1024);
        const uint64_t db = smem_desc(k_tile + (kk / 4) * C::kKVSlab + (kk % 4) * 32, 16, 1024);
        wgmma_ss<kBN>(s, da, db, kk > 0);
    }
    wgmma_commit();
}

// Issues O += P V as one wgmma group: P from registers, V MN-major in shared memory (8-key groups
// 1024 bytes apart, the next 64 d columns the next slab, a k16 step +2048 bytes).
template <int D>
__device__ __forceinline__ void issue_weighted_sum(float (&o)[D / 2], uint32_t (&p)[kBN / 4], uint32_t v_tile) {
    constexpr uint32_t kLeading = KL_V_SWAP_OFFSETS ? 1024 : Cfg<D>::kKVSlab;
    constexpr uint32_t kStride = KL_V_SWAP_OFFSETS ? Cfg<D>::kKVSlab : 1024;
    fence_accumulators(o);
    fence_registers(p);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
        const uint32_t a[4] = {p[4 * kk], p[4 * kk + 1], p[4 * kk + 2], p[4 * kk + 3]};
        wgmma_rs<D>(o, a, smem_desc(v_tile + kk * 2048, kLeading, kStride), 1);
    }
    wgmma_commit();
}

// Keys past S, and under the causal mask keys after the query, score -inf.
template <bool kCausal>
__device__ __forceinline__ void mask(float (&s)[kBN / 2], int k0, int row, int S, int lane) {
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) {
        const int key = k0 + frag_col(i, lane);
        if (key >= S || (kCausal && key > row + frag_row(i))) s[i] = -INFINITY;
    }
}

// The running softmax of the thread's two rows (h = 0: lane / 4, h = 1: + 8): the new row max
// over the quad, alpha = exp2(m_old - m_new) for O and the per-lane row sums, and the scores
// replaced by their exponentials (in fp32: they become P's fp16 pairs in pack_p, once the
// previous P is no longer read).
__device__ __forceinline__ void online_softmax(float (&s)[kBN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                               float scale_log2) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int g = 0; g < kBN / 8; ++g) mx = fmaxf(mx, fmaxf(s[4 * g + 2 * h], s[4 * g + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[h], mx * scale_log2);
        const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with no key yet: no NaN
        alpha[h] = fast_exp2(m[h] - m_use);
        m[h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int g = 0; g < kBN / 8; ++g) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float& x = s[4 * g + 2 * h + e];
                x = fast_exp2(fmaf(x, scale_log2, -m_use));
                sum += x;
            }
        }
        l[h] = fmaf(l[h], alpha[h], sum);
    }
}

// P as fp16 pairs: p[2 g + h] holds columns 8 g + 2 (lane % 4) (+ 1) of row h, so
// p[4 kk .. 4 kk + 3] is the register A fragment of keys 16 kk .. 16 kk + 15.
__device__ __forceinline__ void pack_p(const float (&s)[kBN / 2], uint32_t (&p)[kBN / 4]) {
#pragma unroll
    for (int i = 0; i < kBN / 4; ++i) {
        const __half2 pair = __floats2half2_rn(s[2 * i], s[2 * i + 1]);
        p[i] = *reinterpret_cast<const uint32_t*>(&pair);
    }
}

template <int D>
__device__ __forceinline__ void rescale(float (&o)[D / 2], const float (&alpha)[2]) {
#pragma unroll
    for (int g = 0; g < D / 8; ++g) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            o[4 * g + 2 * h] *= alpha[h];
            o[4 * g + 2 * h + 1] *= alpha[h];
        }
    }
}

// kPingpong's turns: warpgroup w issues its wgmmas after the other's previous issue (named barrier
// 1 + w, 256 threads: one warpgroup syncs, the other arrives). Warpgroup 1 opens the first turn
// of warpgroup 0 and does not arrive after its own last issue, so every arrival meets a sync.
struct Turns {
    int wg;
    __device__ __forceinline__ void open() const {
        if (kPingpong && wg == 1) named_arrive<1, 256>();
    }
    __device__ __forceinline__ void begin() const {
        if (!kPingpong) return;
        if (wg == 0) named_sync<1, 256>();
        else named_sync<2, 256>();
    }
    __device__ __forceinline__ void end(bool last) const {
        if (!kPingpong) return;
        if (wg == 0) named_arrive<2, 256>();
        else if (!last) named_arrive<1, 256>();
    }
};

// One consumer warpgroup's state over the key tiles: its rows, O, the running max and sums.
template <int D, bool kCausal>
struct Consumer {
    const Smem<D>& sm;
    int S, lane, first, row;  // first: the warpgroup's first query row; row, row + 8: the thread's
    uint32_t q_rows;          // the warpgroup's 64 rows of every Q slab
    float scale_log2;
    float o[D / 2], m[2], l[2], alpha[2];

    __device__ __forceinline__ void wait_k(int j) const { mbar_wait(sm.full_k(j % kStages), (j / kStages) & 1); }
    __device__ __forceinline__ void wait_v(int j) const { mbar_wait(sm.full_v(j % kStages), (j / kStages) & 1); }
    // this warp is done with tile j's stage (one arrival per warp and ring round)
    __device__ __forceinline__ void release(int j) const {
        __syncwarp();
        if (lane == 0) mbar_arrive(sm.empty(j % kStages));
    }
    // tile j's scores (S complete) masked where needed, then the softmax in place
    __device__ __forceinline__ void softmax(float (&s)[kBN / 2], int j) {
        const int k0 = j * kBN;
        if (k0 + kBN > S || (kCausal && k0 + kBN - 1 > first)) mask<kCausal>(s, k0, row, S, lane);
        online_softmax(s, m, l, alpha, scale_log2);
    }
};

// Consumer warpgroup `wg`: query rows q0 + 64 wg .. + 63 of the block. The `live` tiles hold a key
// some row of the warpgroup sees (causal: the rest lie wholly above its rows; their stages are
// waited for and released without math, so its arrivals stay one per ring round). Per tile j:
// O = alpha_j O + P_j V_j. kOverlap: tile j's S = Q K^T is issued before tile j - 1's
// O += P V, and its softmax runs while that product is in flight; O is rescaled before the
// product is issued and P packed after it completed (registers an in-flight wgmma reads are
// never written).
template <int D, bool kCausal>
__device__ __forceinline__ void consume(__half* __restrict__ O, const Smem<D>& sm, const Work& w, int S, int wg,
                                        float scale_log2) {
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    const int first = w.q0 + wg * 64;
    Consumer<D, kCausal> c{sm, S, lane, first, first + warp * 16 + lane / 4, sm.q() + wg * 64 * 128, scale_log2};
#pragma unroll
    for (int i = 0; i < D / 2; ++i) c.o[i] = 0.f;
    c.m[0] = c.m[1] = -INFINITY;
    c.l[0] = c.l[1] = 0.f;
    const int live = kCausal && !kPingpong ? min(w.tiles, (first + 63) / kBN + 1) : w.tiles;
    const Turns turns{wg};
    uint32_t p[kBN / 4];
    mbar_wait(sm.q_full(), 0);
    if constexpr (kOverlap) {
        turns.open();
        {
            float s[kBN / 2];
            c.wait_k(0);
            turns.begin();
            issue_scores<D>(s, c.q_rows, sm.k(0));
            turns.end(false);
            wgmma_wait<0>();
            fence_accumulators(s);
            c.softmax(s, 0);
            pack_p(s, p);
        }
        for (int j = 1; j < live; ++j) {
            float s[kBN / 2];
            c.wait_k(j);
            turns.begin();
            issue_scores<D>(s, c.q_rows, sm.k(j % kStages));
            rescale<D>(c.o, c.alpha);  // alpha of tile j - 1
            c.wait_v(j - 1);
            issue_weighted_sum<D>(c.o, p, sm.v((j - 1) % kStages));
            turns.end(false);
            wgmma_wait<1>();  // S of tile j is complete, O += P V of tile j - 1 may still run
            fence_accumulators(s);
            c.softmax(s, j);
            wgmma_wait<0>();
            fence_accumulators(c.o);
            fence_registers(p);
            c.release(j - 1);
            pack_p(s, p);
        }
        rescale<D>(c.o, c.alpha);
        c.wait_v(live - 1);
        turns.begin();
        issue_weighted_sum<D>(c.o, p, sm.v((live - 1) % kStages));
        turns.end(true);
        wgmma_wait<0>();
        fence_accumulators(c.o);
        c.release(live - 1);
    } else {
        for (int j = 0; j < live; ++j) {
            float s[kBN / 2];
            c.wait_k(j);
            issue_scores<D>(s, c.q_rows, sm.k(j % kStages));
            wgmma_wait<0>();
            fence_accumulators(s);
            c.softmax(s, j);
            pack_p(s, p);
            rescale<D>(c.o, c.alpha);
            c.wait_v(j);
            issue_weighted_sum<D>(c.o, p, sm.v(j % kStages));
            wgmma_wait<0>();
            fence_accumulators(c.o);
            c.release(j);
        }
    }
    for (int j = live; j < w.tiles; ++j) {  // causal: tiles wholly above the warpgroup's rows
        c.wait_k(j);
        c.wait_v(j);
        c.release(j);
    }
    // epilogue: the quad's row sums, O / l as fp16 pairs (rows past S belong to no query)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float l_row = c.l[h] + __shfl_xor_sync(0xffffffffu, c.l[h], 1);
        l_row += __shfl_xor_sync(0xffffffffu, l_row, 2);
        const float inv = l_row > 0.f ? 1.f / l_row : 0.f;
        if (c.row + 8 * h >= S) continue;
        __half* out = O + (size_t)(w.row0 + c.row + 8 * h) * D + 2 * (lane % 4);
#pragma unroll
        for (int g = 0; g < D / 8; ++g)
            *reinterpret_cast<__half2*>(out + 8 * g) =
                __floats2half2_rn(c.o[4 * g + 2 * h] * inv, c.o[4 * g + 2 * h + 1] * inv);
    }
}

// Grid: (B H, query tiles). The last warpgroup produces, the others consume.
template <int D, bool kCausal>
__global__ void __launch_bounds__(kThreads, 1)
attention_wgmma(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                const __grid_constant__ CUtensorMap map_v, __half* __restrict__ O, int S, float scale_log2) {
    extern __shared__ uint8_t smem_raw[];
    const Smem<D> sm{(smem_u32(smem_raw) + 1023u) & ~1023u};
    const Work w = block_work<kCausal>(S);
    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        mbar_init(sm.q_full(), 1);
        for (int s = 0; s < kStages; ++s) {
            mbar_init(sm.full_k(s), 1);                // the producer's arrive.expect_tx
            mbar_init(sm.full_v(s), 1);
            mbar_init(sm.empty(s), 4 * kConsumers);    // each consumer warp
        }
        fence_barrier_init();
    }
    __syncthreads();
    if (wg == kConsumers) {
        if constexpr (kReallocate) setmaxnreg_dec<kProducerRegs>();
        if (threadIdx.x % 128 == 0) produce<D>(map_q, map_k, map_v, sm, w);
    } else {
        if constexpr (kReallocate) setmaxnreg_inc<kConsumerRegs>();
        consume<D, kCausal>(O, sm, w, S, wg, scale_log2);
    }
}

// ---- host: tensor maps ---------------------------------------------------------------------

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

// Row-major fp16 matrix `rows` x `cols`, copied in boxes of box_rows x 64 columns, 128-byte
// swizzle, out-of-bounds elements read as zero.
bool tensor_map(CUtensorMap* map, const void* ptr, int rows, int cols, int box_rows) {
    const EncodeTiled encode = encode_tiled();
    if (encode == nullptr) return false;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
    const cuuint32_t box[2] = {(cuuint32_t)kSlabCols, (cuuint32_t)box_rows};
    const cuuint32_t unit[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void*>(ptr), dims, strides, box, unit,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// ---- end of the tensor maps ----------------------------------------------------------------

template <int D, bool kCausal>
void launch_cfg(const __half* Q, const __half* K, const __half* V, __half* O, int B, int H, int S,
                cudaStream_t stream) {
    static bool attr_set = false;
    if (!attr_set) {
        cudaFuncSetAttribute(attention_wgmma<D, kCausal>, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg<D>::kSmem);
        attr_set = true;
    }
    CUtensorMap map_q, map_k, map_v;
    const int rows = B * H * S;
    if (!tensor_map(&map_q, Q, rows, D, kBQ) || !tensor_map(&map_k, K, rows, D, kBN) ||
        !tensor_map(&map_v, V, rows, D, kBN)) {
        fprintf(stderr, "attention_wgmma: cuTensorMapEncodeTiled unavailable or refused the shapes\n");
        return;  // O stays as it was: the gate's poisoned output reports it
    }
    const float scale_log2 = 1.4426950408889634f / sqrtf((float)D);
    const dim3 grid(B * H, (S + kBQ - 1) / kBQ);
    attention_wgmma<D, kCausal><<<grid, kThreads, Cfg<D>::kSmem, stream>>>(map_q, map_k, map_v, O, S, scale_log2);
}

}  // namespace

extern "C" void launch(const __half* Q, const __half* K, const __half* V, __half* O, float* P, int B, int H,
                       int S, int D, int causal, cudaStream_t stream) {
    (void)P;  // the naive kernel's score scratch: unused here
    if (D == 64) {
        if (causal) launch_cfg<64, true>(Q, K, V, O, B, H, S, stream);
        else launch_cfg<64, false>(Q, K, V, O, B, H, S, stream);
    } else {
        if (causal) launch_cfg<128, true>(Q, K, V, O, B, H, S, stream);
        else launch_cfg<128, false>(Q, K, V, O, B, H, S, stream);
    }
}

// KLineage torch-extension shim: the small part of torch::Tensor that load_inline bindings use,
// backed by buffers the gate allocated. It lets a KernelBench binding (which allocates its output
// with torch::empty_like / zeros and launches on the current stream) run unchanged behind the
// C launcher convention: an allocation of the next output's shape and dtype hands out the gate's
// output buffer; any other is a temporary of the binding (stream-ordered, freed after it returns).
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <vector>

namespace klshim {

enum class ScalarType { Float, Double, Half, BFloat16, Int, Long, Char, Byte, Bool };

inline size_t element_size(ScalarType t) {
    switch (t) {
        case ScalarType::Double: case ScalarType::Long: return 8;
        case ScalarType::Float: case ScalarType::Int: return 4;
        case ScalarType::Half: case ScalarType::BFloat16: return 2;
        default: return 1;
    }
}

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "klineage torch shim: %s\n", what);
    std::abort();
}

struct Device {
    bool is_cuda() const { return true; }
};

struct TensorOptions {
    ScalarType st = ScalarType::Float;
    TensorOptions() = default;
    TensorOptions(ScalarType t) : st(t) {}  // NOLINT: torch converts a dtype to options implicitly
    TensorOptions dtype(ScalarType t) const { TensorOptions o = *this; o.st = t; return o; }
    TensorOptions device(Device) const { return *this; }
    TensorOptions device(int) const { return *this; }
};

// torch's IntArrayRef, as far as bindings use it: a vector with vec()
struct IntList : std::vector<int64_t> {
    using std::vector<int64_t>::vector;
    std::vector<int64_t> vec() const { return *this; }
};

struct Tensor {
    void* ptr = nullptr;
    std::vector<int64_t> shape;
    ScalarType st = ScalarType::Float;

    template <typename T> T* data_ptr() const { return static_cast<T*>(ptr); }
    void* data_ptr() const { return ptr; }
    int64_t dim() const { return static_cast<int64_t>(shape.size()); }
    int64_t numel() const { int64_t n = 1; for (auto d : shape) n *= d; return n; }
    int64_t size(int64_t d) const {
        if (d < 0) d += dim();
        if (d < 0 || d >= dim()) fail("size(): dimension out of range");
        return shape[static_cast<size_t>(d)];
    }
    IntList sizes() const { return IntList(shape.begin(), shape.end()); }
    int64_t stride(int64_t d) const {  // the gate's buffers are contiguous
        size(d);
        if (d < 0) d += dim();
        int64_t s = 1;
        for (int64_t i = d + 1; i < dim(); ++i) s *= shape[static_cast<size_t>(i)];
        return s;
    }
    template <typename T> T* data() const { return static_cast<T*>(ptr); }
    ScalarType type() const { return st; }
    Tensor view(std::vector<int64_t> to) const;
    Tensor view(int64_t n) const { return view(std::vector<int64_t>{n}); }
    Tensor reshape(std::vector<int64_t> to) const { return view(to); }
    Tensor reshape(int64_t n) const { return view(std::vector<int64_t>{n}); }
    Tensor flatten() const { return view({numel()}); }
    ScalarType scalar_type() const { return st; }
    ScalarType dtype() const { return st; }
    TensorOptions options() const { TensorOptions o; o.st = st; return o; }
    Device device() const { return Device{}; }
    bool is_cuda() const { return true; }
    bool is_contiguous() const { return true; }
    bool defined() const { return ptr != nullptr; }
    Tensor contiguous() const { return *this; }
    Tensor cuda() const { return *this; }
    size_t element_size() const { return klshim::element_size(st); }
    Tensor& zero_();
};

struct State {
    Tensor* outputs = nullptr;
    int count = 0;
    int next = 0;
    cudaStream_t stream = nullptr;
    std::vector<void*> scratch;  // the binding's own temporaries, freed after it returns
};
inline State& state() { static State s; return s; }

inline Tensor& Tensor::zero_() {
    cudaMemsetAsync(ptr, 0, static_cast<size_t>(numel()) * element_size(), state().stream);
    return *this;
}

inline Tensor Tensor::view(std::vector<int64_t> to) const {
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < to.size(); ++i) {
        if (to[i] == -1) { if (infer >= 0) fail("view(): more than one -1"); infer = static_cast<int64_t>(i); }
        else known *= to[i];
    }
    if (infer >= 0 && known > 0) to[static_cast<size_t>(infer)] = numel() / known;
    int64_t n = 1;
    for (auto d : to) n *= d;
    if (n != numel()) fail("view()/reshape(): the new shape has another number of elements");
    Tensor t = *this;
    t.shape = to;
    return t;
}

inline Tensor wrap(void* p, std::initializer_list<int64_t> shape, ScalarType st) {
    Tensor t;
    t.ptr = p;
    t.shape = shape;
    t.st = st;
    return t;
}

// An allocation of the next output's shape and dtype is that output (the gate's buffer); any other
// is a temporary of the binding, allocated on the launch stream and freed after it returns.
inline Tensor next_output(const std::vector<int64_t>& shape, ScalarType st) {
    State& s = state();
    if (s.next < s.count && s.outputs[s.next].shape == shape && s.outputs[s.next].st == st) return s.outputs[s.next++];
    Tensor t;
    t.shape = shape;
    t.st = st;
    size_t bytes = static_cast<size_t>(t.numel()) * element_size(st);
    if (cudaMallocAsync(&t.ptr, bytes ? bytes : 1, s.stream) != cudaSuccess) fail("could not allocate a temporary tensor");
    s.scratch.push_back(t.ptr);
    return t;
}

inline Tensor empty_like(const Tensor& like) { return next_output(like.shape, like.st); }
inline Tensor empty_like(const Tensor& like, TensorOptions o) { return next_output(like.shape, o.st); }
inline Tensor zeros_like(const Tensor& like) { Tensor t = next_output(like.shape, like.st); t.zero_(); return t; }
inline Tensor zeros_like(const Tensor& like, TensorOptions o) { Tensor t = next_output(like.shape, o.st); t.zero_(); return t; }
inline Tensor empty(std::vector<int64_t> shape, TensorOptions opts = TensorOptions()) { return next_output(shape, opts.st); }
inline Tensor zeros(std::vector<int64_t> shape, TensorOptions opts = TensorOptions()) { Tensor t = next_output(shape, opts.st); t.zero_(); return t; }
// torch's IntArrayRef converts from one int64: `torch::zeros(n, opts)`
inline Tensor empty(int64_t n, TensorOptions opts = TensorOptions()) { return empty(std::vector<int64_t>{n}, opts); }
inline Tensor zeros(int64_t n, TensorOptions opts = TensorOptions()) { return zeros(std::vector<int64_t>{n}, opts); }

inline void begin(Tensor* outputs, int count, cudaStream_t stream) {
    State& s = state();
    s.outputs = outputs;
    s.count = count;
    s.next = 0;
    s.stream = stream;
    s.scratch.clear();
}

// The binding's result lands in the output: it is the output's buffer, or a temporary of the same
// size and dtype copied there (as torch's copy_ would); then the temporaries are freed.
inline void check_result(const Tensor& r) {
    State& s = state();
    if (s.count < 1) fail("the workload has no output");
    const Tensor& out = s.outputs[0];
    if (r.ptr != out.ptr) {
        if (r.numel() != out.numel() || r.st != out.st) fail("the binding returned a tensor of another size or dtype than the workload's output");
        cudaMemcpyAsync(out.ptr, r.ptr, static_cast<size_t>(out.numel()) * out.element_size(), cudaMemcpyDeviceToDevice, s.stream);
    }
    for (void* p : s.scratch) cudaFreeAsync(p, s.stream);
    s.scratch.clear();
}

}  // namespace klshim

namespace c10 {
using Half = __half;
using BFloat16 = __nv_bfloat16;
}  // namespace c10

namespace torch {
using Tensor = klshim::Tensor;
using ScalarType = klshim::ScalarType;
using TensorOptions = klshim::TensorOptions;
using klshim::empty;
using klshim::empty_like;
using klshim::zeros;
using klshim::zeros_like;
constexpr klshim::ScalarType kFloat32 = klshim::ScalarType::Float;
constexpr klshim::ScalarType kFloat = klshim::ScalarType::Float;
constexpr klshim::ScalarType kFloat16 = klshim::ScalarType::Half;
constexpr klshim::ScalarType kHalf = klshim::ScalarType::Half;
constexpr klshim::ScalarType kBFloat16 = klshim::ScalarType::BFloat16;
constexpr klshim::ScalarType kInt32 = klshim::ScalarType::Int;
constexpr klshim::ScalarType kInt64 = klshim::ScalarType::Long;
constexpr klshim::ScalarType kLong = klshim::ScalarType::Long;
constexpr int kCUDA = 1;
}  // namespace torch

namespace at {
using Tensor = klshim::Tensor;
using ScalarType = klshim::ScalarType;
constexpr klshim::ScalarType kFloat = klshim::ScalarType::Float;
constexpr klshim::ScalarType kHalf = klshim::ScalarType::Half;
constexpr klshim::ScalarType kBFloat16 = klshim::ScalarType::BFloat16;
using klshim::empty;
using klshim::empty_like;
using klshim::zeros;
using klshim::zeros_like;
using Half = __half;
using BFloat16 = __nv_bfloat16;
namespace cuda {
inline cudaStream_t getCurrentCUDAStream() { return klshim::state().stream; }
inline cudaStream_t getDefaultCUDAStream() { return klshim::state().stream; }
}  // namespace cuda
}  // namespace at

// AT_DISPATCH_*: the lambda runs with scalar_t set to the C type of the tensor's dtype; a dtype
// the macro does not list is a hard error, as in torch.
#define KLSHIM_CASE(ENUM, CTYPE, ...) case klshim::ScalarType::ENUM: { using scalar_t = CTYPE; return __VA_ARGS__(); }
#define KLSHIM_DISPATCH(TYPE, NAME, CASES) [&] { switch (TYPE) { CASES default: klshim::fail(NAME ": AT_DISPATCH on an unlisted dtype"); } }()
#define KLSHIM_FLOATS(...) KLSHIM_CASE(Float, float, __VA_ARGS__) KLSHIM_CASE(Double, double, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...) KLSHIM_DISPATCH(TYPE, NAME, KLSHIM_FLOATS(__VA_ARGS__))
#define AT_DISPATCH_FLOATING_TYPES_AND_HALF(TYPE, NAME, ...) \
    KLSHIM_DISPATCH(TYPE, NAME, KLSHIM_FLOATS(__VA_ARGS__) KLSHIM_CASE(Half, __half, __VA_ARGS__))
#define AT_DISPATCH_FLOATING_TYPES_AND2(A, B, TYPE, NAME, ...) \
    KLSHIM_DISPATCH(TYPE, NAME, KLSHIM_FLOATS(__VA_ARGS__) KLSHIM_CASE(Half, __half, __VA_ARGS__) \
                    KLSHIM_CASE(BFloat16, __nv_bfloat16, __VA_ARGS__))
#define AT_DISPATCH_ALL_TYPES(TYPE, NAME, ...) \
    KLSHIM_DISPATCH(TYPE, NAME, KLSHIM_FLOATS(__VA_ARGS__) KLSHIM_CASE(Int, int, __VA_ARGS__) \
                    KLSHIM_CASE(Long, int64_t, __VA_ARGS__))

#define TORCH_CHECK(cond, ...) \
    do { if (!(cond)) klshim::fail("TORCH_CHECK failed: " #cond); } while (0)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() do { } while (0)
#define AT_ASSERT(cond) TORCH_CHECK(cond)
#define AT_ASSERTM(cond, ...) TORCH_CHECK(cond)
#define AT_ERROR(...) klshim::fail("AT_ERROR")
#define TORCH_INTERNAL_ASSERT(cond, ...) TORCH_CHECK(cond)
#define C10_CUDA_CHECK(expr) do { cudaError_t klshim_err = (expr); if (klshim_err != cudaSuccess) klshim::fail(cudaGetErrorString(klshim_err)); } while (0)

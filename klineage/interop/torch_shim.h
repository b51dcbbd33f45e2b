// KLineage torch-extension shim: the small part of torch::Tensor that load_inline bindings use,
// backed by buffers the gate allocated. It lets a KernelBench binding (which allocates its output
// with torch::empty_like / zeros and launches on the current stream) run unchanged behind the
// C launcher convention: an allocation of the next output's shape and dtype hands out the gate's
// output buffer; any other is a temporary of the binding (stream-ordered, freed after it returns).
// The torch operators bindings call on their tensors most (sum, mean, var, arithmetic with
// broadcasting, sqrt/exp/log/abs, select, cpu()/item()) run as small kernels on the binding's stream.
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>     // these four: standard headers <torch/extension.h> brings, which bindings
#include <stdexcept>  // name without including them (std::runtime_error, std::numeric_limits,
#include <string>     // std::to_string, std::tuple)
#include <tuple>
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
    bool cuda = true;  // false only for a cpu() copy
    bool is_cuda() const { return cuda; }
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
    bool host = false;  // a cpu() copy: host memory, freed after the binding returns

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
    Device device() const { return Device{!host}; }
    bool is_cuda() const { return !host; }
    bool is_contiguous() const { return true; }
    bool defined() const { return ptr != nullptr; }
    Tensor contiguous() const { return *this; }
    Tensor cuda() const {
        if (host) fail("cuda() of a cpu() copy");
        return *this;
    }
    Tensor to(Device d) const {
        if (d.cuda == host) fail("to(): moving a tensor between host and device");
        return *this;
    }
    Tensor view_as(const Tensor& other) const { return view(other.shape); }
    size_t element_size() const { return klshim::element_size(st); }
    Tensor& zero_();
    // operators computed on the device (defined below)
    Tensor cpu() const;
    template <typename T> T item() const;
    Tensor sum() const;
    Tensor sum(std::vector<int64_t> dims, bool keepdim = false) const;
    Tensor sum(int64_t dim, bool keepdim = false) const { return sum(std::vector<int64_t>{dim}, keepdim); }
    Tensor mean() const;
    Tensor mean(std::vector<int64_t> dims, bool keepdim = false) const;
    Tensor mean(int64_t dim, bool keepdim = false) const { return mean(std::vector<int64_t>{dim}, keepdim); }
    Tensor var() const;
    Tensor var(std::vector<int64_t> dims, bool unbiased = true, bool keepdim = false) const;
    Tensor var(int64_t dim, bool unbiased = true, bool keepdim = false) const {
        return var(std::vector<int64_t>{dim}, unbiased, keepdim);
    }
    Tensor sqrt() const;
    Tensor exp() const;
    Tensor log() const;
    Tensor abs() const;
    Tensor select(int64_t dim, int64_t index) const;
};

struct State {
    Tensor* outputs = nullptr;
    int count = 0;
    int next = 0;
    cudaStream_t stream = nullptr;
    std::vector<void*> scratch;  // the binding's own temporaries, freed after it returns
    std::vector<void*> host_scratch;  // its cpu() copies
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
    s.host_scratch.clear();
}

// The binding's result lands in the output: it is the output's buffer, or a temporary of the same
// size and dtype copied there (as torch's copy_ would); then the temporaries are freed.
inline void check_result(const Tensor& r) {
    State& s = state();
    if (s.count < 1) fail("the workload has no output");
    if (r.host) fail("the binding returned a cpu() tensor");
    const Tensor& out = s.outputs[0];
    if (r.ptr != out.ptr) {
        if (r.numel() != out.numel() || r.st != out.st) fail("the binding returned a tensor of another size or dtype than the workload's output");
        cudaMemcpyAsync(out.ptr, r.ptr, static_cast<size_t>(out.numel()) * out.element_size(), cudaMemcpyDeviceToDevice, s.stream);
    }
    for (void* p : s.scratch) cudaFreeAsync(p, s.stream);
    s.scratch.clear();
    for (void* p : s.host_scratch) std::free(p);
    s.host_scratch.clear();
}

// ---- operators on tensors: one small kernel each, on the binding's stream ----------------------

constexpr int kMaxDims = 8;
// sizes of an index space and, per axis, the element stride of an operand (0: broadcast)
struct Dims {
    int n = 0;
    int64_t size[kMaxDims] = {};
    int64_t stride[kMaxDims] = {};
};

__device__ inline double to_double(float v) { return v; }
__device__ inline double to_double(double v) { return v; }
__device__ inline double to_double(__half v) { return __half2float(v); }
__device__ inline double to_double(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ inline T from_double(double v) { return static_cast<T>(v); }
template <> __device__ inline __half from_double<__half>(double v) { return __float2half(static_cast<float>(v)); }
template <> __device__ inline __nv_bfloat16 from_double<__nv_bfloat16>(double v) {
    return __float2bfloat16(static_cast<float>(v));
}

// offset of the i-th element of the index space `d` (row-major) in an operand with d's strides
__device__ inline int64_t offset_of(const Dims& d, int64_t i) {
    int64_t off = 0;
    for (int k = d.n - 1; k >= 0; --k) {
        off += (i % d.size[k]) * d.stride[k];
        i /= d.size[k];
    }
    return off;
}

enum Reduction { kSum = 0, kMean = 1, kVar = 2 };

// One block per output element: its threads stride over the reduced elements, then a tree in
// shared memory; var takes a second pass over the deviations from the mean (double throughout).
template <typename T>
__global__ void reduce_kernel(const T* in, T* out, Dims kept, Dims reduced, int64_t count, int mode, int64_t ddof) {
    __shared__ double part[256];
    const T* base = in + offset_of(kept, blockIdx.x);
    double mean = 0.0, result = 0.0;
    for (int pass = 0; pass < (mode == kVar ? 2 : 1); ++pass) {
        double acc = 0.0;
        for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
            double v = to_double(base[offset_of(reduced, r)]);
            acc += pass == 0 ? v : (v - mean) * (v - mean);
        }
        part[threadIdx.x] = acc;
        __syncthreads();
        for (unsigned span = blockDim.x / 2; span > 0; span /= 2) {
            if (threadIdx.x < span) part[threadIdx.x] += part[threadIdx.x + span];
            __syncthreads();
        }
        result = part[0];
        mean = result / static_cast<double>(count);
        __syncthreads();  // part[0] is read by every thread before the next pass writes it
    }
    if (threadIdx.x == 0) {
        double v = mode == kSum ? result : mode == kMean ? mean : result / static_cast<double>(count - ddof);
        out[blockIdx.x] = from_double<T>(v);
    }
}

enum MapOp { kAdd = 0, kSub, kMul, kDiv, kSqrt, kExp, kLog, kAbs, kNeg, kCopy };

// out[i] = op(a, b) over out's index space; a missing operand is its scalar
template <typename T>
__global__ void map_kernel(const T* a, Dims da, double sa, const T* b, Dims db, double sb, T* out, int64_t n, int op) {
    int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double x = a ? to_double(a[offset_of(da, i)]) : sa;
    double y = b ? to_double(b[offset_of(db, i)]) : sb;
    double v = x;
    switch (op) {
        case kAdd: v = x + y; break;
        case kSub: v = x - y; break;
        case kMul: v = x * y; break;
        case kDiv: v = x / y; break;
        case kSqrt: v = ::sqrt(x); break;
        case kExp: v = ::exp(x); break;
        case kLog: v = ::log(x); break;
        case kAbs: v = ::fabs(x); break;
        case kNeg: v = -x; break;
        default: break;
    }
    out[i] = from_double<T>(v);
}

// the lambda runs with scalar_t set to the C type of a floating dtype; others stop with a reason
#define KLSHIM_FLOATING(TYPE, WHAT, ...)                                                    \
    do { switch (TYPE) {                                                                         \
        case ScalarType::Float: { using scalar_t = float; __VA_ARGS__(); break; }          \
        case ScalarType::Double: { using scalar_t = double; __VA_ARGS__(); break; }        \
        case ScalarType::Half: { using scalar_t = __half; __VA_ARGS__(); break; }          \
        case ScalarType::BFloat16: { using scalar_t = __nv_bfloat16; __VA_ARGS__(); break; } \
        default: fail(WHAT ": the shim computes it for floating dtypes only");             \
    } } while (0)

inline int64_t wrap_dim(const Tensor& x, int64_t d) {
    if (d < 0) d += x.dim();
    if (d < 0 || d >= x.dim()) fail("reduction or select(): dimension out of range");
    return d;
}

inline Tensor reduce(const Tensor& x, std::vector<int64_t> dims, bool keepdim, Reduction mode, int64_t ddof) {
    if (x.dim() > kMaxDims) fail("reduction of a tensor of more than 8 dimensions");
    bool all = dims.empty();  // torch: no dims reduces every dimension
    std::vector<bool> red(static_cast<size_t>(x.dim()), all);
    for (int64_t d : dims) red[static_cast<size_t>(wrap_dim(x, d))] = true;
    Dims kept, reduced;
    std::vector<int64_t> shape;
    int64_t count = 1;
    for (int64_t d = 0; d < x.dim(); ++d) {
        Dims& into = red[static_cast<size_t>(d)] ? reduced : kept;
        into.size[into.n] = x.shape[static_cast<size_t>(d)];
        into.stride[into.n++] = x.stride(d);
        if (red[static_cast<size_t>(d)]) count *= x.shape[static_cast<size_t>(d)];
        if (!red[static_cast<size_t>(d)]) shape.push_back(x.shape[static_cast<size_t>(d)]);
        else if (keepdim) shape.push_back(1);
    }
    Tensor out = next_output(shape, x.st);
    if (out.numel() == 0) return out;
    unsigned threads = 1;
    while (threads < 256 && static_cast<int64_t>(threads) < count) threads *= 2;
    KLSHIM_FLOATING(x.st, "sum()/mean()/var()", [&] {
        reduce_kernel<scalar_t><<<static_cast<unsigned>(out.numel()), threads, 0, state().stream>>>(
            x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), kept, reduced, count, mode, ddof);
    });
    return out;
}

// operand strides of `x` broadcast to `shape` (numpy rules: trailing axes aligned, size 1 repeats)
inline Dims broadcast(const Tensor& x, const std::vector<int64_t>& shape) {
    Dims d;
    d.n = static_cast<int>(shape.size());
    for (int k = 0; k < d.n; ++k) {
        d.size[k] = shape[static_cast<size_t>(k)];
        int64_t xk = k - (d.n - x.dim());
        if (xk < 0 || x.shape[static_cast<size_t>(xk)] == 1) d.stride[k] = 0;
        else d.stride[k] = x.stride(xk);
    }
    return d;
}

inline std::vector<int64_t> broadcast_shape(const Tensor& a, const Tensor& b) {
    size_t n = std::max(a.shape.size(), b.shape.size());
    std::vector<int64_t> shape(n);
    for (size_t k = 0; k < n; ++k) {
        int64_t x = k + a.shape.size() >= n ? a.shape[k + a.shape.size() - n] : 1;
        int64_t y = k + b.shape.size() >= n ? b.shape[k + b.shape.size() - n] : 1;
        if (x != y && x != 1 && y != 1) fail("arithmetic on tensors whose shapes do not broadcast");
        shape[k] = x == 1 ? y : x;
    }
    return shape;
}

// op over tensors and scalars (a null tensor stands for its scalar); the result has the tensors' dtype
inline Tensor map(MapOp op, const Tensor* a, double sa, const Tensor* b, double sb) {
    const Tensor& t = a ? *a : *b;
    if ((a && a->host) || (b && b->host)) fail("arithmetic on a cpu() copy");
    if (a && b && a->st != b->st) fail("arithmetic on tensors of two dtypes");
    std::vector<int64_t> shape = a && b ? broadcast_shape(*a, *b) : t.shape;
    if (shape.size() > static_cast<size_t>(kMaxDims)) fail("arithmetic on a tensor of more than 8 dimensions");
    Dims da = a ? broadcast(*a, shape) : Dims{}, db = b ? broadcast(*b, shape) : Dims{};
    Tensor out = next_output(shape, t.st);
    int64_t n = out.numel();
    if (n == 0) return out;
    KLSHIM_FLOATING(t.st, "tensor arithmetic", [&] {
        map_kernel<scalar_t><<<static_cast<unsigned>((n + 255) / 256), 256, 0, state().stream>>>(
            a ? a->data_ptr<scalar_t>() : nullptr, da, sa, b ? b->data_ptr<scalar_t>() : nullptr, db, sb,
            out.data_ptr<scalar_t>(), n, op);
    });
    return out;
}

inline Tensor Tensor::sum() const { return reduce(*this, {}, false, kSum, 0); }
inline Tensor Tensor::sum(std::vector<int64_t> dims, bool keepdim) const { return reduce(*this, dims, keepdim, kSum, 0); }
inline Tensor Tensor::mean() const { return reduce(*this, {}, false, kMean, 0); }
inline Tensor Tensor::mean(std::vector<int64_t> dims, bool keepdim) const { return reduce(*this, dims, keepdim, kMean, 0); }
inline Tensor Tensor::var() const { return reduce(*this, {}, false, kVar, 1); }
inline Tensor Tensor::var(std::vector<int64_t> dims, bool unbiased, bool keepdim) const {
    return reduce(*this, dims, keepdim, kVar, unbiased ? 1 : 0);
}
inline Tensor Tensor::sqrt() const { return map(kSqrt, this, 0, nullptr, 0); }
inline Tensor Tensor::exp() const { return map(kExp, this, 0, nullptr, 0); }
inline Tensor Tensor::log() const { return map(kLog, this, 0, nullptr, 0); }
inline Tensor Tensor::abs() const { return map(kAbs, this, 0, nullptr, 0); }
inline Tensor operator+(const Tensor& a, const Tensor& b) { return map(kAdd, &a, 0, &b, 0); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return map(kSub, &a, 0, &b, 0); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return map(kMul, &a, 0, &b, 0); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return map(kDiv, &a, 0, &b, 0); }
inline Tensor operator+(const Tensor& a, double s) { return map(kAdd, &a, 0, nullptr, s); }
inline Tensor operator-(const Tensor& a, double s) { return map(kSub, &a, 0, nullptr, s); }
inline Tensor operator*(const Tensor& a, double s) { return map(kMul, &a, 0, nullptr, s); }
inline Tensor operator/(const Tensor& a, double s) { return map(kDiv, &a, 0, nullptr, s); }
inline Tensor operator+(double s, const Tensor& b) { return map(kAdd, nullptr, s, &b, 0); }
inline Tensor operator-(double s, const Tensor& b) { return map(kSub, nullptr, s, &b, 0); }
inline Tensor operator*(double s, const Tensor& b) { return map(kMul, nullptr, s, &b, 0); }
inline Tensor operator/(double s, const Tensor& b) { return map(kDiv, nullptr, s, &b, 0); }
inline Tensor operator-(const Tensor& a) { return map(kNeg, &a, 0, nullptr, 0); }

// a copy of the slice (torch returns a view; only dimension 0 gives a contiguous one here)
inline Tensor Tensor::select(int64_t dim, int64_t index) const {
    dim = wrap_dim(*this, dim);
    if (index < 0) index += shape[static_cast<size_t>(dim)];
    if (index < 0 || index >= shape[static_cast<size_t>(dim)]) fail("select(): index out of range");
    Tensor part = *this;
    part.ptr = static_cast<char*>(ptr) + static_cast<size_t>(index * stride(dim)) * element_size();
    part.shape.erase(part.shape.begin() + dim);
    if (dim == 0) return part;
    Dims d;  // the slice's elements in this tensor's layout
    for (int64_t k = 0; k < this->dim(); ++k) {
        if (k == dim) continue;
        d.size[d.n] = shape[static_cast<size_t>(k)];
        d.stride[d.n++] = stride(k);
    }
    Tensor out = next_output(part.shape, st);
    int64_t n = out.numel();
    if (n == 0) return out;
    KLSHIM_FLOATING(st, "select() off dimension 0", [&] {
        map_kernel<scalar_t><<<static_cast<unsigned>((n + 255) / 256), 256, 0, state().stream>>>(
            part.data_ptr<scalar_t>(), d, 0, nullptr, Dims{}, 0, out.data_ptr<scalar_t>(), n, kCopy);
    });
    return out;
}

inline Tensor Tensor::cpu() const {
    if (host) return *this;
    Tensor t = *this;
    size_t bytes = static_cast<size_t>(numel()) * element_size();
    t.ptr = std::malloc(bytes ? bytes : 1);
    t.host = true;
    state().host_scratch.push_back(t.ptr);
    cudaStreamSynchronize(state().stream);
    cudaMemcpy(t.ptr, ptr, bytes, cudaMemcpyDeviceToHost);
    return t;
}

template <typename T> T Tensor::item() const {
    if (numel() != 1) fail("item(): the tensor has more than one element");
    unsigned char b[8];
    if (host) {
        std::memcpy(b, ptr, element_size());
    } else {
        cudaStreamSynchronize(state().stream);
        cudaMemcpy(b, ptr, element_size(), cudaMemcpyDeviceToHost);
    }
    switch (st) {
        case ScalarType::Float: { float v; std::memcpy(&v, b, 4); return static_cast<T>(v); }
        case ScalarType::Double: { double v; std::memcpy(&v, b, 8); return static_cast<T>(v); }
        case ScalarType::Half: { __half v; std::memcpy(&v, b, 2); return static_cast<T>(__half2float(v)); }
        case ScalarType::BFloat16: { __nv_bfloat16 v; std::memcpy(&v, b, 2); return static_cast<T>(__bfloat162float(v)); }
        case ScalarType::Int: { int32_t v; std::memcpy(&v, b, 4); return static_cast<T>(v); }
        case ScalarType::Long: { int64_t v; std::memcpy(&v, b, 8); return static_cast<T>(v); }
        default: { int8_t v; std::memcpy(&v, b, 1); return static_cast<T>(v); }
    }
}

// torch:: free functions that mirror the methods
inline Tensor sum(const Tensor& x) { return x.sum(); }
inline Tensor sum(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false) { return x.sum(dims, keepdim); }
inline Tensor mean(const Tensor& x) { return x.mean(); }
inline Tensor mean(const Tensor& x, std::vector<int64_t> dims, bool keepdim = false) { return x.mean(dims, keepdim); }
inline Tensor var(const Tensor& x) { return x.var(); }
inline Tensor sqrt(const Tensor& x) { return x.sqrt(); }
inline Tensor exp(const Tensor& x) { return x.exp(); }
inline Tensor log(const Tensor& x) { return x.log(); }
inline Tensor abs(const Tensor& x) { return x.abs(); }
inline TensorOptions device(Device d) { return TensorOptions().device(d); }

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
using klshim::abs;
using klshim::device;
using klshim::exp;
using klshim::log;
using klshim::mean;
using klshim::sqrt;
using klshim::sum;
using klshim::var;
using Device = klshim::Device;
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
using klshim::mean;
using klshim::sum;
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

// KLineage torch adapter: the same klshim calls as torch_shim.h, on real torch tensors. An
// exported ModelNew compiles with torch's own headers (load_inline), where the shim's stand-in
// torch::Tensor would collide with the real one; the launcher text is unchanged: it wraps the
// raw buffers with from_blob, calls the solution's binding, and copies the binding's result into
// the output buffer when the binding allocated its own tensor.
#pragma once
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace klshim {

enum class ScalarType { Float, Double, Half, BFloat16, Int, Long, Char, Byte, Bool };

inline at::ScalarType to_torch(ScalarType t) {
    switch (t) {
        case ScalarType::Double: return at::kDouble;
        case ScalarType::Half: return at::kHalf;
        case ScalarType::BFloat16: return at::kBFloat16;
        case ScalarType::Int: return at::kInt;
        case ScalarType::Long: return at::kLong;
        case ScalarType::Char: return at::kChar;
        case ScalarType::Byte: return at::kByte;
        case ScalarType::Bool: return at::kBool;
        default: return at::kFloat;
    }
}

using Tensor = torch::Tensor;

inline std::vector<Tensor>& outputs() {
    static std::vector<Tensor> o;
    return o;
}

inline Tensor wrap(void* p, std::initializer_list<int64_t> shape, ScalarType st) {
    const auto opts = torch::TensorOptions().dtype(to_torch(st)).device(torch::kCUDA, at::cuda::current_device());
    return torch::from_blob(p, std::vector<int64_t>(shape), opts);
}

inline void begin(Tensor* outs, int count, cudaStream_t) { outputs().assign(outs, outs + count); }

inline void check_result(const Tensor& r) {
    Tensor& out = outputs().at(0);
    TORCH_CHECK(r.numel() == out.numel(), "the binding returned ", r.numel(), " elements; the output has ", out.numel());
    if (r.data_ptr() != out.data_ptr()) out.copy_(r.reshape(out.sizes()));
}

}  // namespace klshim

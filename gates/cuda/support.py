"""CUDA source linked into every candidate's shared library by the `cuda` backend.

Kept as a string (not a .cu file) so it ships with the package without package-data changes.
"""

SUPPORT_FILENAME = "klineage_support.cu"
MARKER_KERNEL = "klineage_marker_kernel"

SUPPORT_SOURCE = r"""// Linked into every candidate's shared library by the `cuda` gate backend.
//
// nvcc links the CUDA runtime statically into the .so, so a launch error (bad grid, too many
// resources) is recorded in *that* runtime copy: only code inside the same library can read it.
// The marker kernel brackets the timed window on the launch stream, so the CUPTI trace shows
// where the window begins and ends on the device.
#include <cuda_runtime.h>

extern "C" int klineage_last_error(void) { return static_cast<int>(cudaGetLastError()); }

extern "C" int klineage_peek_error(void) { return static_cast<int>(cudaPeekAtLastError()); }

extern "C" const char* klineage_error_name(int code) {
  return cudaGetErrorName(static_cast<cudaError_t>(code));
}

extern "C" const char* klineage_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

__global__ void klineage_marker_kernel(int tag) {
  if (tag < 0) asm volatile("trap;");  // never taken: keeps the launch from being optimized away
}

extern "C" int klineage_marker(int tag, cudaStream_t stream) {
  klineage_marker_kernel<<<1, 1, 0, stream>>>(tag);
  return static_cast<int>(cudaGetLastError());
}
"""

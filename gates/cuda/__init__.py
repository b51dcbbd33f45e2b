"""GPU backend `cuda`: nvcc-built launchers called through ctypes on torch CUDA tensors."""

"""CPU emulation backend `emu`: CUDA kernels compiled with the host C++ compiler and run on fibers."""

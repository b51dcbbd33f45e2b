// Naive transpose in the "one thread per element on a 2-D grid" idiom: the destination comes
// first, the sizes are width/height, the row guard wraps the copy, and the indices are locals
// declared inside the guard. Reads are coalesced, writes stride by `height`.
#include <cuda_runtime.h>

#define BLOCK_DIM 16

__global__ void transposeNaive(float *odata, const float *idata, int width, int height)
{
    unsigned int xIndex = blockDim.x * blockIdx.x + threadIdx.x;
    unsigned int yIndex = threadIdx.y + blockIdx.y * blockDim.y;
    if (xIndex < width && yIndex < height)
    {
        unsigned int index_in = xIndex + width * yIndex;
        unsigned int index_out = yIndex + height * xIndex;
        odata[index_out] = idata[index_in];
    }
}

extern "C" void launch(const float* in, float* out, int rows, int cols, cudaStream_t stream) {
    dim3 grid((cols + BLOCK_DIM - 1) / BLOCK_DIM, (rows + BLOCK_DIM - 1) / BLOCK_DIM);
    dim3 threads(BLOCK_DIM, BLOCK_DIM);
    transposeNaive<<<grid, threads, 0, stream>>>(out, in, cols, rows);
}

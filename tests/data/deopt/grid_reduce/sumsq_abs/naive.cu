// Written for KLineage's tests: one thread walks the vector for its sum of squares and its largest
// magnitude at once (unsigned counter, a temporary per element, stores through plain pointers).
#include <cuda_runtime.h>
#include <math.h>

__global__ void stats_serial(const float* __restrict__ v, float* __restrict__ result, unsigned count) {
    double ss = 0.0;
    float peak = 0.0f;
    for (unsigned k = 0; k < count; k++) {
        const float t = v[k];
        ss = ss + (double)t * t;
        peak = fmaxf(peak, fabsf(t));
    }
    *result = (float)sqrt(ss);
    result[1] = peak;
}

extern "C" void launch(const float* v, float* result, int n, cudaStream_t stream) {
    stats_serial<<<1, 1, 0, stream>>>(v, result, (unsigned)n);
}

/* One block per row. One read of the row finds its max and Σ exp(l - max) together (an
 * online softmax: each thread rescales its running sum when its max grows, and the block
 * merges the per-thread pairs); a second pass writes the gradient. expf is the accurate
 * libdevice exp; the CPU's polynomial agrees with it to a few ulp. */
#include <math.h>

#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

#define CE_THREADS 1024

/* A running max m and s = Σ exp(l - m) over the logits seen so far. */
struct max_sum {
    float m, s;
};

static __device__ __forceinline__ max_sum max_sum_merge(max_sum a, max_sum b)
{
    float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return {m, 0.f}; /* both empty: exp(-inf - -inf) would be NaN */
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

static __device__ __forceinline__ max_sum warp_max_sum(max_sum v)
{
    for (int o = 16; o > 0; o >>= 1) {
        max_sum other = {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
        v = max_sum_merge(v, other);
    }
    return v;
}

/* The merged pair of the block, returned to every thread. */
static __device__ max_sum block_max_sum(max_sum v)
{
    __shared__ max_sum warp_pairs[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max_sum(v);
    if (lane == 0) warp_pairs[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x >> 5) ? warp_pairs[lane] : max_sum{-INFINITY, 0.f};
    return warp_max_sum(v);
}

/* grad16, where not NULL, gets the gradient rounded to bf16 too (zt_cpu_cross_entropy_bf16) */
static __global__ void __launch_bounds__(CE_THREADS)
    cross_entropy_kernel(float *logits, double *loss_rows, const int32_t *targets, int V, float grad_scale,
                         uint16_t *grad16)
{
    float *l = logits + (size_t)blockIdx.x * V;
    uint16_t *l16 = grad16 ? grad16 + (size_t)blockIdx.x * V : NULL;
    int target = targets[blockIdx.x];
    if (target < 0) { /* ignored: no loss, zero gradient */
        if (grad_scale != 0)
            for (int v = threadIdx.x; v < V; v += blockDim.x) l[v] = 0;
        if (l16)
            for (int v = threadIdx.x; v < V; v += blockDim.x) l16[v] = 0;
        return;
    }
    float picked = l[target]; /* read before the gradient pass overwrites it */
    max_sum acc = {-INFINITY, 0.f};
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float x = l[v];
        if (x > acc.m) {
            acc.s = acc.s * expf(acc.m - x) + 1;
            acc.m = x;
        } else if (x != -INFINITY) { /* -inf adds 0; NaN falls through and poisons the sum, as on the CPU */
            acc.s += expf(x - acc.m);
        }
    }
    acc = block_max_sum(acc);
    float mx = acc.m, sum = acc.s;
    if (threadIdx.x == 0) loss_rows[blockIdx.x] += mx + log((double)sum) - picked;
    if (grad_scale == 0) return;
    float k = grad_scale / sum;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float d = expf(l[v] - mx) * k;
        if (v == target) d -= grad_scale;
        l[v] = d;
        if (l16) l16[v] = zt_bf16_round(d);
    }
}

void zt_cuda_cross_entropy(cudaStream_t s, float *logits, double *loss_rows, const int32_t *targets, int n, int V,
                           float grad_scale)
{
    if (n <= 0 || V <= 0) return;
    cross_entropy_kernel<<<n, CE_THREADS, 0, s>>>(logits, loss_rows, targets, V, grad_scale, NULL);
    zt_cuda_check("cross_entropy");
}

void zt_cuda_cross_entropy_bf16(cudaStream_t s, float *logits, double *loss_rows, const int32_t *targets, int n, int V,
                                float grad_scale, uint16_t *grad16)
{
    if (n <= 0 || V <= 0) return;
    cross_entropy_kernel<<<n, CE_THREADS, 0, s>>>(logits, loss_rows, targets, V, grad_scale, grad16);
    zt_cuda_check("cross_entropy_bf16");
}

static __global__ void scale_rows_kernel(float *x, const float *scale, int V)
{
    float k = scale[blockIdx.x];
    float *row = x + (size_t)blockIdx.x * V;
    for (int v = threadIdx.x; v < V; v += blockDim.x) row[v] *= k;
}

void zt_cuda_scale_rows(cudaStream_t s, float *x, const float *scale, int n, int V)
{
    if (n <= 0 || V <= 0) return;
    scale_rows_kernel<<<n, 256, 0, s>>>(x, scale, V);
    zt_cuda_check("scale_rows");
}

/* AdamW with 8-bit moments (lib/optim/adamw8bit.h's zt_adamw8_step and zt_adamw8_finish), bit for
 * bit: a thread block of 256 for each block of moments; the update adamw.cuh's; a block's absmax the
 * largest |x| (a maximum of the bits, exact in any order); the codes nearest as kernels/cpu/dyn8.h
 * finds them, from its tables copied as they are, the codes and midpoints in shared memory. */
#include "kernels/cuda/adamw.cuh"
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

enum { B = ZT_ADAMW8_BLOCK };

/* the two maps on the device, copied on the first call */
static const zt_dyn8 *device_maps(const zt_dyn8 *const host[2])
{
    static zt_dyn8 *maps;
    if (!maps) {
        ZT_CUDA_CHECK(cudaMalloc((void **)&maps, 2 * sizeof *maps));
        for (int k = 0; k < 2; k++) ZT_CUDA_CHECK(cudaMemcpy(maps + k, host[k], sizeof *maps, cudaMemcpyHostToDevice));
    }
    return maps;
}

/* zt_dyn8_index, the midpoints from shared memory */
__device__ __forceinline__ uint8_t dyn8_index(const zt_dyn8 *d, const float *mid, float s)
{
    int i = d->below[__float_as_uint(s) >> 16];
    return (uint8_t)(i + (mid[i] < s));
}

/* the largest |x| over the thread block, to every thread (zt_adamw8_absmax: the bits' maximum) */
__device__ float block_absmax(float x)
{
    __shared__ unsigned int most;
    if (threadIdx.x == 0) most = 0;
    __syncthreads();
    atomicMax(&most, __float_as_uint(x) & 0x7fffffffu);
    __syncthreads();
    float m = __uint_as_float(most);
    __syncthreads(); /* read by all before the next call resets it */
    return m;
}

__device__ void load_mids(const zt_dyn8 *maps, float mid[2][B])
{
    for (int k = 0; k < 2; k++) mid[k][threadIdx.x] = maps[k].mid[threadIdx.x];
    __syncthreads();
}

/* thread block g: blocks[g], or past nb cut[g - nb] (its part held at g - nb) */
static __global__ void adamw8_kernel(const zt_adamw8_piece *pieces, const zt_adamw8_block *blocks, size_t nb,
                                     const zt_adamw8_cut *cut, const zt_dyn8 *maps, float *param, const float *grad,
                                     uint8_t *q1, uint8_t *q2, float *a1, float *a2, uint16_t *param16, float *held,
                                     float *slots)
{
    __shared__ float mid[2][B];
    load_mids(maps, mid);
    size_t g = blockIdx.x;
    const zt_adamw8_cut *c = g < nb ? NULL : &cut[g - nb];
    uint32_t j = c ? c->j : blocks[g].j, n;
    const zt_adamw8_piece *p = &pieces[c ? c->piece : blocks[g].piece];
    uint64_t l = p->local + zt_adamw8_block_at(p, j, &n);
    uint32_t at = p->absmax + j;
    uint8_t *q[2] = {q1, q2};
    float *a[2] = {a1, a2}, mv[2] = {0.0f, 0.0f};
    int t = threadIdx.x;
    if (t < (int)n) {
        size_t i = l + t;
        mv[0] = __fmul_rn(maps[0].code[q1[i]], a1[at]);
        mv[1] = __fmul_rn(maps[1].code[q2[i]], a2[at]);
        float w = zt_adamw_element(p->c, param[i], grad[i], &mv[0], &mv[1]);
        param[i] = w;
        if (param16) param16[p->flat + (i - p->local)] = zt_bf16_round(w);
    }
    for (int k = 0; k < 2; k++) {
        float x = block_absmax(mv[k]); /* after every thread read the old absmax */
        if (!c) {
            if (t == 0) a[k][at] = x;
            if (t < (int)n) q[k][l + t] = dyn8_index(&maps[k], mid[k], x > 0.0f ? __fdiv_rn(mv[k], x) : 0.0f);
            continue;
        }
        if (t < (int)n) held[(g - nb) * 2 * B + (size_t)k * B + t] = mv[k];
        if (t == 0)
            for (int e = 0; e < 2; e++)
                if (c->slot[e] >= 0) slots[c->slot[e] + k] = x;
    }
}

static __global__ void adamw8_finish_kernel(const zt_adamw8_release *r, const zt_dyn8 *maps, uint8_t *q1, uint8_t *q2,
                                            float *a1, float *a2, const float *held, const float *slots)
{
    __shared__ float mid[2][B], most[2];
    load_mids(maps, mid);
    const zt_adamw8_release j = r[blockIdx.x];
    uint8_t *q[2] = {q1, q2};
    float *a[2] = {a1, a2};
    int t = threadIdx.x;
    if (t < 2) {
        float x = 0.0f;
        for (uint32_t i = 0; i < j.nslots; i++) {
            float y = slots[j.first + 2 * i + t];
            x = y > x ? y : x;
        }
        most[t] = a[t][j.absmax] = x;
    }
    __syncthreads();
    for (int k = 0; k < 2 && t < (int)j.n; k++) {
        float s = held[(size_t)j.held * 2 * B + (size_t)k * B + t];
        q[k][j.local + t] = dyn8_index(&maps[k], mid[k], most[k] > 0.0f ? __fdiv_rn(s, most[k]) : 0.0f);
    }
}

void zt_cuda_adamw8(cudaStream_t s, const zt_dyn8 *const maps[2], const zt_adamw8_piece *pieces,
                    const zt_adamw8_block *blocks, size_t nb, const zt_adamw8_cut *cut, size_t nc, float *param,
                    const float *grad, uint8_t *q1, uint8_t *q2, float *a1, float *a2, uint16_t *param16, float *held,
                    float *slots)
{
    if (nb + nc == 0) return;
    adamw8_kernel<<<(unsigned)(nb + nc), B, 0, s>>>(pieces, blocks, nb, cut, device_maps(maps), param, grad, q1, q2,
                                                    a1, a2, param16, held, slots);
    zt_cuda_check("adamw8");
}

void zt_cuda_adamw8_finish(cudaStream_t s, const zt_dyn8 *const maps[2], const zt_adamw8_release *r, size_t nr,
                           uint8_t *q1, uint8_t *q2, float *a1, float *a2, const float *held, const float *slots)
{
    if (nr == 0) return;
    adamw8_finish_kernel<<<(unsigned)nr, B, 0, s>>>(r, device_maps(maps), q1, q2, a1, a2, held, slots);
    zt_cuda_check("adamw8_finish");
}

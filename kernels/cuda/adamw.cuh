/* One element of the AdamW update of lib/optim/adamw.c, bit for bit: every multiply, add, divide
 * and square root an explicitly rounded intrinsic (no FMA), in the order of zt_adamw_kernel_scalar.
 * adamw.cu's whole arrays and adamw8.cu's 8-bit blocks share it. */
#pragma once

#include "kernels/cuda/device.cuh"
#include "lib/optim/adamw_kernels.h"

/* m and v in and out; returns the new weight */
__device__ __forceinline__ float zt_adamw_element(const zt_adamw_consts &c, float param, float grad, float *m, float *v)
{
    float g = __fmul_rn(grad, c.grad_scale);
    float mi = __fadd_rn(__fmul_rn(c.beta1, *m), __fmul_rn(c.one_minus_beta1, g));
    float vi = __fadd_rn(__fmul_rn(c.beta2, *v), __fmul_rn(__fmul_rn(c.one_minus_beta2, g), g));
    float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.bias2_sqrt), c.eps);
    *m = mi;
    *v = vi;
    return __fsub_rn(__fmul_rn(param, c.decay), __fmul_rn(c.step_size, __fdiv_rn(mi, denom)));
}

/* kernels/cpu/bf16_row: an element-wise kernel's bf16 copy of its output, row by row.
 *
 *     zt_bf16_row(y16, y, n, C);   // row n of y [., C] rounded into row n of y16, if y16
 *
 * Called right after the kernel writes row n, while the row is in cache: a bf16 model's
 * products take the copy without a pass of their own over the activation. Rounds as
 * zt_f32_to_bf16 does; does nothing in the double build, which has no bf16 copies. */
#ifndef ZT_KERNELS_CPU_BF16_ROW_H
#define ZT_KERNELS_CPU_BF16_ROW_H

#include <stddef.h>
#include <stdint.h>

#include "gemm_bf16.h"
#include "lib/core/real.h"

static inline void zt_bf16_row(uint16_t *y16, const zt_real *y, size_t n, int C)
{
#ifndef ZT_REAL_DOUBLE
    if (y16) zt_f32_to_bf16_array(y16 + n * C, y + n * C, (size_t)C);
#else
    (void)y16, (void)y, (void)n, (void)C;
#endif
}

#endif

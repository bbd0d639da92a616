/* kernels/cpu/dyn8: the dynamic 8-bit codes (Dettmers, 8-bit approximations) that blockwise
 * 8-bit formats quantize with: the signed one (NF4's double quantization, AdamW8bit's first
 * moment) and the unsigned one (AdamW8bit's second moment), each 256 values sorted ascending,
 * as the reference implementation's create_dynamic_map makes them: for the decimal exponents
 * 10^-6 .. 10^0, the midpoints of a linear grid over [0.1, 1] of 2^i + 1 points (signed, with
 * their negatives) or 2^(i+1) + 1 (unsigned), times the exponent; then 0 and 1.
 *
 * A value's index is that of the code nearest to it, a tie to the lower: the number of midpoints
 * (code[i] + code[i + 1]) / 2 (in float) below it. It is found from the value's top 16 bits (sign,
 * exponent and 7 bits of mantissa: 1/128 of an octave), which give the count below the smallest
 * value that shares them; no two midpoints are that close (the nearest are 0.7% apart), so one
 * comparison with the next midpoint finishes it.
 *
 *     uint8_t q = zt_dyn8_index(zt_dyn8_unsigned(), x / absmax);   // x ≈ code[q] · absmax
 */
#ifndef ZT_KERNELS_CPU_DYN8_H
#define ZT_KERNELS_CPU_DYN8_H

#include <stdint.h>
#include <string.h>

extern const float zt_dyn8_code[256]; /* the signed code */

/* A code with its lookup table, self-contained (a device copies it as it is). */
typedef struct zt_dyn8 {
    float code[256];
    float mid[256];       /* the 255 midpoints, then +inf */
    uint8_t below[65536]; /* by a float's top 16 bits: the midpoints below the smallest such float */
} zt_dyn8;

/* Each made once, on the first call (thread-safe). */
const zt_dyn8 *zt_dyn8_signed(void);
const zt_dyn8 *zt_dyn8_unsigned(void);
/* The code create_dynamic_map(signed) makes, in its float arithmetic, into code[256]. */
void zt_dyn8_build(float *code, int is_signed);

static inline int zt_dyn8_index(const zt_dyn8 *d, float s)
{
    uint32_t bits;
    memcpy(&bits, &s, sizeof bits);
    int i = d->below[bits >> 16];
    return i + (d->mid[i] < s); /* mid[255] = +inf: never past 255 */
}

#endif

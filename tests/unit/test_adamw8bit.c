/* AdamW's 8-bit moments (lib/optim/adamw8bit.h, kernels/cpu/dyn8.h): the two codes are
 * bitsandbytes' own (tests/fixtures/adamw8bit/maps.txt, written by its make_fixture.py from
 * AdamW8bit's state), a value's code is the nearest one, and a block of dequantized moments (what a
 * checkpoint holds) gives back its codes and its absmax exactly, whatever its signs, so that a
 * resumed run continues bit for bit. The training itself (against fp32 AdamW, over ranks, resumed)
 * is tests/cli/t1630-adamw8bit.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/dyn8.h"
#include "lib/core/rng.h"
#include "lib/optim/adamw8bit.h"
#include "test.h"

static int same_bits(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof *a); }

static void test_maps_are_bitsandbytes(void)
{
    FILE *f = fopen("tests/fixtures/adamw8bit/maps.txt", "r");
    CHECK(f != NULL);
    if (!f) return;
    float want[512];
    char line[64];
    int n = 0;
    while (n < 512 && fgets(line, sizeof line, f)) want[n++] = strtof(line, NULL);
    fclose(f);
    CHECK(n == 512);
    CHECK(same_bits(zt_adamw8_map(0)->code, want, 256));
    CHECK(same_bits(zt_adamw8_map(1)->code, want + 256, 256));
    float built[256]; /* the builder makes the signed table NF4's double quantization holds */
    zt_dyn8_build(built, 1);
    CHECK(same_bits(built, zt_dyn8_code, 256));
}

/* zt_dyn8_index against a count over all 255 midpoints (code[i] + code[i + 1]) / 2 below s, and
 * the code it gives no farther from s than any other but where s is within an ulp of a midpoint
 * (the midpoint's own rounding decides there) */
static void test_nearest_code(void)
{
    zt_rng r;
    zt_rng_seed(&r, 3, 0);
    int bad = 0, far = 0;
    for (int k = 0; k < 2; k++) {
        const zt_dyn8 *d = zt_adamw8_map(k);
        const float *map = d->code;
        for (int t = 0; t < 20000; t++) {
            /* uniform, log-uniform down to 1e-8 (where the codes are dense), and the midpoints */
            float s = t % 3 == 0   ? (float)(2 * zt_rng_uniform(&r) - 1)
                      : t % 3 == 1 ? (float)(pow(10.0, -8 * zt_rng_uniform(&r)) * (zt_rng_uniform(&r) < 0.5 ? -1 : 1))
                                   : (map[t % 255] + map[t % 255 + 1]) / 2;
            if (k) s = fabsf(s);
            int q = zt_dyn8_index(d, s), below = 0, best = 0;
            for (int j = 0; j < 255; j++) below += (map[j] + map[j + 1]) / 2 < s;
            for (int j = 1; j < 256; j++)
                if (fabsf(map[j] - s) < fabsf(map[best] - s)) best = j;
            float mid = q > best ? (map[best] + map[q]) / 2 : (map[q] + map[best]) / 2;
            bad += q != below;
            far += fabsf(map[q] - s) > fabsf(map[best] - s) &&
                   fabsf(s - mid) > 2 * (nextafterf(fabsf(mid), INFINITY) - fabsf(mid));
        }
    }
    CHECK_MSG(bad == 0, "%d values not given the count of midpoints below them", bad);
    CHECK_MSG(far == 0, "%d values not on their nearest code", far);
}

/* Moments quantized as a step does, dequantized as a checkpoint holds them, recovered: the same
 * codes and absmax, for blocks whose largest value is positive, negative, or both at once. */
static void test_recover_exactly(void)
{
    zt_rng r;
    zt_rng_seed(&r, 5, 0);
    int bad = 0, blocks = 0;
    for (int k = 0; k < 2; k++) {
        const zt_dyn8 *map = zt_adamw8_map(k);
        for (int t = 0; t < 4000; t++) {
            size_t n = t % 7 == 0 ? 1 + (size_t)(zt_rng_uniform(&r) * ZT_ADAMW8_BLOCK) : ZT_ADAMW8_BLOCK;
            float x[ZT_ADAMW8_BLOCK], y[ZT_ADAMW8_BLOCK], scale = (float)pow(10.0, 12 * zt_rng_uniform(&r) - 10);
            for (size_t i = 0; i < n; i++) {
                x[i] = (float)(zt_rng_normal(&r) * scale);
                if (k) x[i] = x[i] * x[i];
            }
            if (t % 5 == 1) x[n / 2] = -2 * zt_adamw8_absmax(x, n);          /* the extreme negative */
            if (t % 5 == 2) x[0] = zt_adamw8_absmax(x, n), x[n - 1] = -x[0]; /* both signs */
            if (t % 11 == 3) memset(x, 0, n * sizeof *x);
            if (k)
                for (size_t i = 0; i < n; i++) x[i] = fabsf(x[i]);
            uint8_t q[ZT_ADAMW8_BLOCK], back[ZT_ADAMW8_BLOCK];
            float a = zt_adamw8_absmax(x, n);
            zt_adamw8_quantize(map, x, n, a, q);
            zt_adamw8_dequantize(map, q, n, a, y);
            float got = zt_adamw8_recover(map, y, n, back);
            float z[ZT_ADAMW8_BLOCK];
            zt_adamw8_dequantize(map, back, n, got, z);
            /* the absmax may come back one ulp off where both give every value: the step sees the same */
            bad += memcmp(q, back, n) || !same_bits(y, z, n);
            blocks++;
        }
    }
    CHECK_MSG(bad == 0, "%d of %d blocks not recovered", bad, blocks);
    /* fp32 moments of another optimizer: quantized afresh with max |x| */
    float x[3] = {0.5f, -0.25f, 0.123456f}, y[3];
    uint8_t q[3];
    CHECK(zt_adamw8_recover(zt_adamw8_map(0), x, 3, q) == 0.5f);
    zt_adamw8_dequantize(zt_adamw8_map(0), q, 3, 0.5f, y);
    CHECK(y[0] == 0.5f && fabsf(y[2] - x[2]) < 0.5f * 0.008f);
}

int main(void)
{
    RUN(test_maps_are_bitsandbytes);
    RUN(test_nearest_code);
    RUN(test_recover_exactly);
    return test_summary();
}

/* kernels/cpu/fastmath: zt_expf_fast against libm over its range, and on inputs outside
 * it (NaN, infinities, huge magnitudes), which must not reach undefined behaviour (the
 * sanitizer build checks that) and give NaN for NaN and the clamped values otherwise. */
#include <float.h>

#include "kernels/cpu/fastmath.h"
#include "test.h"

/* The largest relative error over a sweep of [-87, 88] against libm's double exp; the
 * bound is the one fastmath.h documents for its degree-6 polynomial after range reduction. */
static void test_accuracy_in_range(void)
{
    double worst = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.001953125f) {
        double want = exp((double)x);
        double rel = fabs((double)zt_expf_fast(x) - want) / want;
        if (rel > worst) worst = rel;
    }
    CHECK_MSG(worst < 3e-7, "worst relative error %.3g", worst);
}

static void test_nan_gives_nan(void)
{
    CHECK(isnan(zt_expf_fast(NAN)));
    CHECK(isnan(zt_expf_fast(-NAN)));
}

/* Inputs past the clamps give exactly the value at the clamp. */
static void test_out_of_range_clamps(void)
{
    float top = zt_expf_fast(88.0f), bottom = zt_expf_fast(-87.0f);
    const float high[] = {INFINITY, FLT_MAX, 1e30f, 3e9f, 89.0f};
    const float low[] = {-INFINITY, -FLT_MAX, -1e30f, -3e9f, -88.0f};
    for (int i = 0; i < 5; i++) {
        CHECK_MSG(zt_expf_fast(high[i]) == top, "x = %g", high[i]);
        CHECK_MSG(zt_expf_fast(low[i]) == bottom, "x = %g", low[i]);
    }
    CHECK(isfinite(top) && top > 1e38f);
    CHECK(bottom > 0 && bottom < 2e-38f);
}

int main(void)
{
    RUN(test_accuracy_in_range);
    RUN(test_nan_gives_nan);
    RUN(test_out_of_range_clamps);
    return test_summary();
}

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/arena.h"
#include "lib/core/cpu.h"
#include "lib/core/dtype.h"
#include "lib/optim/adamw.h"
#include "lib/optim/adamw_kernels.h"
#include "lib/optim/clip.h"
#include "lib/optim/schedule.h"
#include "tests/unit/test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* uniform in [-1, 1) */
static float rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((double)(rng_state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fill(float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) x[i] = rnd() * scale;
}

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* Error of x against ref, relative to |ref| but never to less than floor: m sums terms of
 * both signs, and near its zeros only the size of those terms says what is accurate. */
static double rel_err(double x, double ref, double floor) { return fabs(x - ref) / fmax(fabs(ref), floor); }

static zt_adamw hyper(long step)
{
    return (zt_adamw){.lr = 1e-2 * (1.0 + 0.1 * (double)step),
                      .beta1 = 0.9,
                      .beta2 = 0.95,
                      .eps = 1e-8,
                      .weight_decay = 0.1,
                      .step = step};
}

/* The formula of adamw.h in double, on the same float gradients. */
static void adamw_double(const zt_adamw *h, double *p, const float *grad, double *m, double *v, size_t n, double gs,
                         int decay)
{
    double t = (double)h->step;
    for (size_t i = 0; i < n; i++) {
        double g = (double)grad[i] * gs;
        if (decay) p[i] = p[i] - h->lr * h->weight_decay * p[i];
        m[i] = h->beta1 * m[i] + (1 - h->beta1) * g;
        v[i] = h->beta2 * v[i] + (1 - h->beta2) * g * g;
        p[i] -= (h->lr / (1 - pow(h->beta1, t))) * m[i] / (sqrt(v[i]) / sqrt(1 - pow(h->beta2, t)) + h->eps);
    }
}

static void test_adamw_scalar_vs_double(void)
{
    enum { N = 1000, STEPS = 10 };
    float p[N], g[N], m[N] = {0}, v[N] = {0};
    double pd[N], md[N] = {0}, vd[N] = {0};
    fill(p, N, 1.0f);
    for (size_t i = 0; i < N; i++) pd[i] = p[i];
    const float gs = 0.37f;
    for (long k = 1; k <= STEPS; k++) {
        fill(g, N, 2.0f);
        g[0] = 0, g[1] = 1e-30f; /* no gradient; a square that underflows in float */
        zt_adamw h = hyper(k);
        zt_adamw_update_with(zt_adamw_kernel_scalar, &h, p, g, m, v, N, gs, 1, NULL);
        adamw_double(&h, pd, g, md, vd, N, gs, 1);
    }
    /* floors: the distance p travels in ten steps of lr ~1e-2, one step's term for m and v */
    double worst = 0, gmax = 2.0 * gs;
    for (size_t i = 0; i < N; i++) {
        double e = fmax(rel_err(p[i], pd[i], 0.1),
                        fmax(rel_err(m[i], md[i], 0.1 * gmax), rel_err(v[i], vd[i], 0.05 * gmax * gmax)));
        if (e > worst) worst = e;
    }
    printf("  scalar vs double over %d steps: worst relative error %.2e\n", STEPS, worst);
    /* p (≈ 1) is rounded to float once a step: 10·2⁻²⁴ ≈ 6e-7 of it at most, the update's own
     * roundings (2⁻²⁴ of lr) far below; m and v round twice a step with the error decaying by β,
     * about sqrt(20)·2⁻²⁴ ≈ 3e-7 of the floors for errors of random sign. The scalar kernel has
     * no FMA and no CPU-dependent path and the inputs come from a fixed seed, so the measured
     * 5.1e-7 is the same on every CPU. */
    CHECK_MSG(worst < 1e-6, "worst %g", worst);
}

typedef struct {
    const char *name;
    zt_adamw_kernel *kernel;
    int usable;
} kernel_path;

enum { NPATHS = 3 };

/* Every kernel, and whether this CPU (under the ZT_CPU cap) may run it. */
static void paths(kernel_path out[NPATHS])
{
    out[0] = (kernel_path){"scalar", zt_adamw_kernel_scalar, 1};
    out[1] = (kernel_path){"avx2", zt_adamw_kernel_avx2, zt_cpu_has(ZT_CPU_AVX2)};
    out[2] = (kernel_path){"avx512", zt_adamw_kernel_avx512, zt_cpu_has(ZT_CPU_AVX512)};
}

/* Every SIMD path gives bitwise the scalar result: 10 steps, a length with a tail,
 * arrays one float off alignment. */
static void test_adamw_paths_match_scalar(void)
{
    enum { N = 1000 + 13, STEPS = 10, NA = 7 }; /* arrays: p m v g, reference p m v */
    float *buf = zt_calloc_aligned((size_t)NA * (N + 1) * sizeof(float));
    uint16_t *pb = zt_calloc_aligned(2 * (N + 1) * sizeof(uint16_t));
    ZT_ASSERT(buf && pb);
    float *p = buf + 1, *m = p + N + 1, *v = m + N + 1, *g = v + N + 1, *rp = g + N + 1, *rm = rp + N + 1,
          *rv = rm + N + 1;
    uint16_t *b = pb + 1, *rb = b + N + 1;
    kernel_path kp[NPATHS];
    paths(kp);
    for (int k = 1; k < NPATHS; k++) {
        if (!kp[k].usable) {
            printf("  %s path: skipped (this CPU or ZT_CPU lacks it)\n", kp[k].name);
            continue;
        }
        fill(p, N, 1.0f);
        memcpy(rp, p, N * sizeof(float));
        memset(m, 0, N * sizeof(float)), memset(v, 0, N * sizeof(float));
        memset(rm, 0, N * sizeof(float)), memset(rv, 0, N * sizeof(float));
        size_t diff = 0;
        for (long s = 1; s <= STEPS; s++) {
            fill(g, N, 3.0f);
            zt_adamw h = hyper(s);
            int decay = s % 3 != 0;
            zt_adamw_update_with(kp[k].kernel, &h, p, g, m, v, N, 0.5f, decay, b);
            zt_adamw_update_with(zt_adamw_kernel_scalar, &h, rp, g, rm, rv, N, 0.5f, decay, rb);
            for (size_t i = 0; i < N; i++)
                diff += bits(p[i]) != bits(rp[i]) || bits(m[i]) != bits(rm[i]) || bits(v[i]) != bits(rv[i]) ||
                        b[i] != rb[i];
        }
        printf("  %s path vs scalar: %zu of %d element-steps differ\n", kp[k].name, diff, N * STEPS);
        CHECK_MSG(diff == 0, "%s: %zu differ", kp[k].name, diff);
    }
    zt_free(buf);
    zt_free(pb);
}

/* With lr = 0 and no decay the parameters stay put, so the bf16 copy is just their
 * rounding: ties to even, subnormals, inf, the float that rounds up to inf, NaN. */
static void test_adamw_bf16_rounding(void)
{
    static const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3f80ffffu, 0xbf808000u, 0x00008000u,
                                       0x00018000u, 0x00000001u, 0x7f7fffffu, 0x7f800000u, 0xff800000u,
                                       0x7fc00001u, 0x7f800001u, 0xffffffffu, 0x80000000u, 0x3f7fffffu};
    enum { N = 64, NS = sizeof special / sizeof special[0] };
    float in[N], p[N], g[N] = {0}, m[N] = {0}, v[N] = {0};
    uint16_t b[N];
    for (size_t i = 0; i < N; i++) {
        uint32_t u = special[i % NS] ^ (i >= N / 2 ? 0x80000000u : 0); /* and the negatives */
        memcpy(&in[i], &u, 4);
    }
    kernel_path kp[NPATHS];
    paths(kp);
    for (int k = 0; k < NPATHS; k++) {
        if (!kp[k].usable) continue;
        memcpy(p, in, sizeof p);
        zt_adamw h = {.lr = 0, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1, .step = 1};
        zt_adamw_update_with(kp[k].kernel, &h, p, g, m, v, N, 1.0f, 0, b);
        for (size_t i = 0; i < N; i++)
            CHECK_MSG(b[i] == zt_f32_to_bf16(in[i]), "%s: %08x -> %04x, want %04x", kp[k].name, bits(in[i]), b[i],
                      zt_f32_to_bf16(in[i]));
    }
}

static void test_adamw_bf16_copy(void)
{
    enum { N = 40000 }; /* more than two OpenMP chunks */
    float *p = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
    float *m = calloc(N, sizeof(float)), *v = calloc(N, sizeof(float));
    uint16_t *b = malloc(N * sizeof(uint16_t));
    ZT_ASSERT(p && g && m && v && b);
    fill(p, N, 1.0f);
    fill(g, N, 1.0f);
    zt_adamw h = hyper(1);
    zt_adamw_update(&h, p, g, m, v, N, 1.0f, 1, b);
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) bad += b[i] != zt_f32_to_bf16(p[i]);
    CHECK_MSG(bad == 0, "%zu of %d bf16 values differ", bad, N);
    free(p), free(g), free(m), free(v), free(b);
}

static void test_adamw_decay_flag(void)
{
    enum { N = 100 };
    float p0[N], g[N], p1[N], p2[N], p3[N], m[N], v[N];
    fill(p0, N, 1.0f);
    fill(g, N, 1.0f);
    zt_adamw h = hyper(3), h0 = h;
    h0.weight_decay = 0;
    float *runs[3] = {p1, p2, p3};
    for (int r = 0; r < 3; r++) {
        memcpy(runs[r], p0, sizeof p0);
        memset(m, 0, sizeof m), memset(v, 0, sizeof v);
        zt_adamw_update(r == 2 ? &h0 : &h, runs[r], g, m, v, N, 1.0f, r == 0, NULL);
    }
    CHECK(memcmp(p2, p3, sizeof p2) == 0); /* decay off == weight_decay 0 */
    int moved = 0;
    for (int i = 0; i < N; i++) moved += p1[i] != p2[i];
    CHECK(moved > N / 2);
    /* no gradient, no moments: only the decay moves p, by exactly the factor */
    float p[4] = {1, -2, 0.5f, 3}, z[4] = {0}, zm[4] = {0}, zv[4] = {0};
    zt_adamw_update(&h, p, z, zm, zv, 4, 1.0f, 1, NULL);
    float f = (float)(1 - h.lr * h.weight_decay);
    CHECK(p[0] == f && p[1] == -2 * f && p[2] == 0.5f * f && p[3] == 3 * f);
}

static void test_adamw_thread_count(void)
{
    enum { N = 100003 };
    float *p[2], *m[2], *v[2], *g = malloc(N * sizeof(float));
    ZT_ASSERT(g);
    fill(g, N, 1.0f);
    int saved = omp_get_max_threads();
    for (int r = 0; r < 2; r++) {
        p[r] = malloc(N * sizeof(float)), m[r] = calloc(N, sizeof(float)), v[r] = calloc(N, sizeof(float));
        ZT_ASSERT(p[r] && m[r] && v[r]);
        for (size_t i = 0; i < N; i++) p[r][i] = g[(i * 7) % N];
        omp_set_num_threads(r + 1);
        for (long s = 1; s <= 3; s++) {
            zt_adamw h = hyper(s);
            zt_adamw_update(&h, p[r], g, m[r], v[r], N, 1.0f, 1, NULL);
        }
    }
    omp_set_num_threads(saved);
    CHECK(memcmp(p[0], p[1], N * sizeof(float)) == 0);
    CHECK(memcmp(m[0], m[1], N * sizeof(float)) == 0);
    CHECK(memcmp(v[0], v[1], N * sizeof(float)) == 0);
    for (int r = 0; r < 2; r++) free(p[r]), free(m[r]), free(v[r]);
    free(g);
}

/* ---- against PyTorch -------------------------------------------------------------- */

/* Reads the line "TAG x1 .. xn" into x; 0 on success. */
static int read_record(FILE *f, const char *tag, double *x, size_t n)
{
    char *line = NULL, *end;
    size_t cap = 0;
    int rc = -1;
    if (getline(&line, &cap, f) > 0 && !strncmp(line, tag, strlen(tag)) && line[strlen(tag)] == ' ') {
        char *s = line + strlen(tag);
        size_t i = 0;
        for (; i < n; i++, s = end) {
            x[i] = strtod(s, &end);
            if (end == s) break;
        }
        rc = i == n ? 0 : -1;
    }
    free(line);
    return rc;
}

static void test_adamw_matches_torch(void)
{
    const char *script = "tests/unit/adamw_ref.py";
    if (access("/usr/bin/python3", X_OK) || access(script, R_OK)) {
        printf("  skipped: needs /usr/bin/python3 and %s (run from the repository root)\n", script);
        return;
    }
    FILE *f = popen("/usr/bin/python3 tests/unit/adamw_ref.py 1234 2>&1", "r");
    ZT_ASSERT(f);
    char head[256] = "";
    double hp[7];
    CHECK(fgets(head, sizeof head, f) != NULL);
    if (!strncmp(head, "skip", 4)) {
        printf("  skipped: %s", head);
        pclose(f);
        return;
    }
    int ok =
        sscanf(head, "hyper %lf %lf %lf %lf %lf %lf %lf", &hp[0], &hp[1], &hp[2], &hp[3], &hp[4], &hp[5], &hp[6]) == 7;
    CHECK_MSG(ok, "bad first line from %s: %s", script, head);
    size_t n = ok ? (size_t)hp[5] : 0;
    long steps = ok ? (long)hp[6] : 0;
    double *rec = malloc((n + 1) * sizeof(double));
    float *p = malloc((n + 1) * sizeof(float)), *g = malloc((n + 1) * sizeof(float));
    float *m = calloc(n + 1, sizeof(float)), *v = calloc(n + 1, sizeof(float));
    ZT_ASSERT(rec && p && g && m && v);
    ok = ok && !read_record(f, "param", rec, n);
    for (size_t i = 0; ok && i < n; i++) p[i] = (float)rec[i];
    double worst = 0;
    for (long k = 1; ok && k <= steps; k++) {
        double lr;
        ok = !read_record(f, "lr", &lr, 1) && !read_record(f, "grad", rec, n);
        for (size_t i = 0; ok && i < n; i++) g[i] = (float)rec[i];
        if (!ok) break;
        zt_adamw h = {.lr = lr, .beta1 = hp[0], .beta2 = hp[1], .eps = hp[2], .weight_decay = hp[3], .step = k};
        zt_adamw_update(&h, p, g, m, v, n, (float)hp[4], 1, NULL);
        /* gradients are N(0, 9) * GRAD_SCALE: floors as in test_adamw_scalar_vs_double; two
         * float evaluations of the formula in other orders, each within about 5e-7 of exact
         * (test_adamw_scalar_vs_double's arithmetic), so 1e-6 apart */
        const char *tags[3] = {"param", "m", "v"};
        const float *ours[3] = {p, m, v};
        double gmax = 3 * hp[4], floors[3] = {lr, 0.1 * gmax, 0.05 * gmax * gmax};
        for (int t = 0; ok && t < 3; t++) {
            ok = !read_record(f, tags[t], rec, n);
            for (size_t i = 0; ok && i < n; i++) {
                double e = rel_err(ours[t][i], rec[i], floors[t]);
                if (e > worst) worst = e;
                CHECK_MSG(e <= 1e-6, "step %ld %s[%zu]: ours %.9g torch %.9g", k, tags[t], i, ours[t][i], rec[i]);
            }
        }
    }
    CHECK_MSG(ok, "could not read the output of %s", script);
    CHECK(pclose(f) == 0);
    printf("  vs torch.optim.AdamW over %ld steps: worst relative error %.2e\n", steps, worst);
    free(rec), free(p), free(g), free(m), free(v);
}

/* ---- clipping ---------------------------------------------------------------------- */

static void test_sumsq(void)
{
    size_t n = 256 * 4096 + 4096 * 3 + 77; /* more than one round of blocks, a partial block */
    float *x = malloc(n * sizeof(float));
    ZT_ASSERT(x);
    fill(x, n, 2.0f);
    double ref = 0;
    for (size_t i = 0; i < n; i++) ref += (double)x[i] * x[i];
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    double s1 = zt_sumsq(x, n);
    omp_set_num_threads(2);
    double s2 = zt_sumsq(x, n);
    omp_set_num_threads(saved);
    /* double sums of exact squares (floats' products fit a double) in blocks against one loop:
     * about sqrt(n)·2⁻⁵³ ≈ 1e-13 relative for 1e6 positive terms; deterministic on every CPU */
    CHECK_NEAR(s1, ref, 1e-12 * ref);
    CHECK(memcmp(&s1, &s2, sizeof s1) == 0);
    CHECK(zt_sumsq(x, 0) == 0);
    float small[5] = {1, 2, 3, 4, 5};
    CHECK(zt_sumsq(small, 5) == 55);
    free(x);
}

static void test_clip_coef(void)
{
    float norm = 0;
    CHECK(zt_clip_coef(4.0, 1.0f, &norm) == (float)(1.0 / (2.0 + 1e-6)));
    CHECK(norm == 2.0f);
    CHECK(zt_clip_coef(4.0, 5.0f, &norm) == 1.0f);
    CHECK(zt_clip_coef(400.0, 0.0f, &norm) == 1.0f && norm == 20.0f); /* max_norm 0: no clipping */
    CHECK(zt_clip_coef(400.0, -1.0f, NULL) == 1.0f);
    CHECK(zt_clip_coef(INFINITY, 1.0f, &norm) == 1.0f && isinf(norm));
    CHECK(zt_clip_coef(NAN, 1.0f, &norm) == 1.0f && isnan(norm));
    CHECK(zt_clip_coef(1e80, 1.0f, &norm) == 1.0f && isinf(norm)); /* norm past FLT_MAX */
    CHECK(zt_clip_coef(0.0, 1.0f, &norm) == 1.0f && norm == 0.0f);
}

/* ---- schedules --------------------------------------------------------------------- */

static double lr_of(zt_schedule_type type, long S, long W, double ratio, double r, double d, long step)
{
    zt_schedule s;
    zt_status st = zt_schedule_init(&s, type, 1e-3, S, W, ratio, r, d, NULL);
    ZT_ASSERT(st == ZT_OK);
    return zt_schedule_lr(&s, step);
}

/* learning rates of 1e-3 from a few double operations: within a few 2⁻⁵³·1e-3 ≈ 1e-19 */
#define CHECK_LR(got, want) CHECK_NEAR(got, want, 1e-15)

static void test_schedule_constant(void)
{
    CHECK_LR(lr_of(ZT_SCHEDULE_CONSTANT, 100, 0, 0, 0, 0, 1), 1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_CONSTANT, 100, 10, 0, 0, 0, 1), 0.0); /* HF: first warmup step has lr 0 */
    CHECK_LR(lr_of(ZT_SCHEDULE_CONSTANT, 100, 10, 0, 0, 0, 5), 0.4e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_CONSTANT, 100, 10, 0, 0, 0, 10), 0.9e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_CONSTANT, 100, 10, 0, 0, 0, 11), 1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_CONSTANT, 100, 10, 0, 0.5, 0, 100), 1e-3); /* min_lr_ratio plays no part */
}

static void test_schedule_linear(void)
{
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 0, 0, 0, 0, 1), 1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 0, 0, 0, 0, 51), 0.5e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 0, 0, 0, 0, 100), 1e-5);
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 10, 0, 0, 0, 1), 0.0);
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 10, 0, 0, 0, 10), 0.9e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 10, 0, 0, 0, 11), 1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 10, 0, 0, 0, 56), 0.5e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 10, 0, 0, 0, 100), 1e-3 / 90);
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 10, 0, 0.2, 0, 56), 0.6e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 10, 0, 0.2, 0, 100), 1e-3 * (0.2 + 0.8 / 90));
    CHECK_LR(lr_of(ZT_SCHEDULE_LINEAR, 100, 10, 0, 0.2, 0, 150), 0.2e-3); /* past the end */
}

static void test_schedule_cosine(void)
{
    CHECK_LR(lr_of(ZT_SCHEDULE_COSINE, 100, 0, 0, 0, 0, 1), 1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_COSINE, 100, 0, 0, 0, 0, 51), 0.5e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_COSINE, 100, 10, 0, 0, 0, 1), 0.0);
    CHECK_LR(lr_of(ZT_SCHEDULE_COSINE, 100, 10, 0, 0, 0, 10), 0.9e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_COSINE, 100, 10, 0, 0, 0, 11), 1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_COSINE, 100, 10, 0, 0, 0, 56), 0.5e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_COSINE, 100, 10, 0, 0, 0, 100), 1e-3 * 0.5 * (1 + cos(M_PI * 89 / 90)));
    CHECK_LR(lr_of(ZT_SCHEDULE_COSINE, 100, 10, 0, 0.1, 0, 56), 0.55e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_COSINE, 100, 10, 0, 0.1, 0, 33), 1e-3 * (0.1 + 0.9 * 0.5 * (1 + cos(M_PI * 22 / 90))));
    CHECK_LR(lr_of(ZT_SCHEDULE_COSINE, 100, 10, 0, 0.1, 0, 500), 0.1e-3); /* held at the end, not rising */
}

static void test_schedule_wsd(void)
{
    /* S 100, W 10, decay_ratio 0.2: D 20, stable until s = 80 */
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0, 0.2, 1), 0.0);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0, 0.2, 10), 0.9e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0, 0.2, 11), 1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0, 0.2, 80), 1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0, 0.2, 81), 1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0, 0.2, 91), 0.5e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0, 0.2, 100), 0.05e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0.1, 0.2, 91), 0.55e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0.1, 0.2, 101), 0.1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0.1, 0.2, 1), 0.1e-3);  /* HF lifts the wsd warmup by r */
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 100, 10, 0, 0.1, 0.2, 6), 0.55e-3); /* 0.5 * 0.9 + 0.1 */
    /* decay longer than what warmup leaves: it starts right after warmup */
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 10, 4, 0, 0, 0.9, 5), 1e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 10, 4, 0, 0, 0.9, 8), 0.5e-3);
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 10, 0, 0, 0, 0.25, 8), 1e-3 * (1 - 0.0 / 3)); /* D = ceil(2.5) = 3 */
    CHECK_LR(lr_of(ZT_SCHEDULE_WSD, 10, 0, 0, 0, 0.25, 9), 1e-3 * (1 - 1.0 / 3));
}

static void test_schedule_warmup_ratio(void)
{
    zt_schedule s;
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_COSINE, 1e-3, 100, 0, 0.1, 0, 0, NULL) == ZT_OK && s.warmup_steps == 10);
    CHECK_LR(zt_schedule_lr(&s, 6), 0.5e-3);
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_LINEAR, 1e-3, 30, 0, 0.05, 0, 0, NULL) == ZT_OK &&
          s.warmup_steps == 2); /* ceil 1.5 */
    CHECK_LR(zt_schedule_lr(&s, 2), 0.5e-3);
    CHECK_LR(zt_schedule_lr(&s, 3), 1e-3);
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_LINEAR, 1e-3, 30, 5, 0.5, 0, 0, NULL) == ZT_OK &&
          s.warmup_steps == 5); /* steps win */
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_CONSTANT, 1e-3, 7, 0, 1.0, 0, 0, NULL) == ZT_OK && s.warmup_steps == 7);
    CHECK_LR(zt_schedule_lr(&s, 7), 1e-3 * 6 / 7);
}

static void test_schedule_errors(void)
{
    zt_schedule s;
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_COSINE, 1e-3, 0, 0, 0, 0, 0, NULL) == ZT_EUSER);
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_COSINE, -1e-3, 10, 0, 0, 0, 0, NULL) == ZT_EUSER);
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_COSINE, NAN, 10, 0, 0, 0, 0, NULL) == ZT_EUSER);
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_COSINE, 1e-3, 10, -1, 0, 0, 0, NULL) == ZT_EUSER);
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_COSINE, 1e-3, 10, 0, 1.5, 0, 0, NULL) == ZT_EUSER);
    CHECK_MSG(strstr(zt_errmsg(), "warmup_ratio 1.5"), "%s", zt_errmsg());
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_COSINE, 1e-3, 10, 0, 0, NAN, 0, NULL) == ZT_EUSER);
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_WSD, 1e-3, 10, 0, 0, 0, -0.1, NULL) == ZT_EUSER);
    CHECK(zt_schedule_init(&s, ZT_SCHEDULE_COSINE, 1e-3, 10, 0, 0, 0, -0.1, NULL) == ZT_OK); /* decay_ratio is wsd's */
}

/* ---- bandwidth (printed, not asserted) --------------------------------------------- */

static void bench_adamw(void)
{
    size_t n = (size_t)4 << 20;
    float *p = zt_calloc_aligned(n * 4), *g = zt_calloc_aligned(n * 4), *m = zt_calloc_aligned(n * 4),
          *v = zt_calloc_aligned(n * 4);
    uint16_t *b = zt_calloc_aligned(n * 2);
    ZT_ASSERT(p && g && m && v && b);
    fill(g, n, 1.0f);
    kernel_path kp[NPATHS];
    paths(kp);
    for (int k = 0; k < NPATHS; k++) {
        if (!kp[k].usable) continue;
        for (int with_bf16 = 0; with_bf16 < 2; with_bf16++) {
            double best = 1e30;
            for (int rep = 0; rep < 5; rep++) {
                zt_adamw h = hyper(rep + 1);
                double t0 = omp_get_wtime();
                zt_adamw_update_with(kp[k].kernel, &h, p, g, m, v, n, 1.0f, 1, with_bf16 ? b : NULL);
                double dt = omp_get_wtime() - t0;
                if (dt < best) best = dt;
            }
            double bytes = (double)n * (28 + 2 * with_bf16);
            printf("  adamw %-6s %s %d threads: %.1f GB/s (%.2f ns/element)\n", kp[k].name,
                   with_bf16 ? "+bf16" : "     ", omp_get_max_threads(), bytes / best / 1e9, best / (double)n * 1e9);
        }
    }
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = omp_get_wtime();
        volatile double ss = zt_sumsq(g, n);
        double dt = omp_get_wtime() - t0;
        (void)ss;
        if (dt < best) best = dt;
    }
    printf("  sumsq: %.1f GB/s\n", (double)n * 4 / best / 1e9);
    zt_free(p), zt_free(g), zt_free(m), zt_free(v), zt_free(b);
}

int main(void)
{
    printf("  cpu: %s\n", zt_cpu_level_name());
    RUN(test_adamw_scalar_vs_double);
    RUN(test_adamw_paths_match_scalar);
    RUN(test_adamw_bf16_rounding);
    RUN(test_adamw_bf16_copy);
    RUN(test_adamw_decay_flag);
    RUN(test_adamw_thread_count);
    RUN(test_adamw_matches_torch);
    RUN(test_sumsq);
    RUN(test_clip_coef);
    RUN(test_schedule_constant);
    RUN(test_schedule_linear);
    RUN(test_schedule_cosine);
    RUN(test_schedule_wsd);
    RUN(test_schedule_warmup_ratio);
    RUN(test_schedule_errors);
    bench_adamw();
    return test_summary();
}

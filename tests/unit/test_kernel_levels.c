/* kernels/cpu/levels: the loops built for each CPU level (swiglu, cross-entropy, the
 * attention softmax) run the variant ZT_CPU allows, not the best the CPU has. The test runs
 * itself (--digests) under each ZT_CPU and compares the CRC-32C of each kernel's output:
 * - scalar against avx2: the AVX2 and AVX-512 variants have FMA, and the compiler contracts
 *   a·b + c into one rounding (zt_expf_fast's polynomial, softmax_backward's dot product)
 *   where the scalar variant rounds twice, so some of each kernel's thousands of outputs
 *   differ in their last bit;
 * - avx2 against avx512: the cross-entropy's sums are omp simd reductions, 8 partial sums
 *   against 16, so the row sums differ in rounding (the other kernels compute each
 *   output alike at both widths);
 * - runs at the same variant (the default and ZT_CPU=avx512 on an AVX-512 machine) agree
 *   bitwise: the kernels are deterministic.
 * A dispatch that ignored ZT_CPU would give every run the same digests. The sanitizer build
 * compiles at -O1, which neither vectorises nor contracts into FMA: there the variants
 * compute alike, and only the agreement of runs at the same variant is checked. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu/ops.h"
#include "lib/core/cpu.h"
#include "lib/core/crc32c.h"
#include "test.h"
#include "test_rand.h"

enum { N = 8, F = 100, V = 1000, T = 70, H = 2, KV = 1, D = 16, KERNELS = 5, CROSS_ENTROPY = 2 };
static const char *kernel_names[KERNELS] = {"swiglu", "swiglu backward", "cross-entropy", "attention",
                                            "attention backward"};

static void fill(float *x, int n, float scale)
{
    for (int i = 0; i < n; i++) x[i] = scale * rnd();
}

static uint32_t crc(const void *x, size_t bytes) { return zt_crc32c(0, x, bytes); }

/* The five kernels on fixed inputs: one CRC each (F, V and T leave loop tails; T > 64 two query blocks). */
static void kernel_digests(uint32_t out[KERNELS])
{
    static float gateup[N * 2 * F], h[N * F], dh[N * F], dgateup[N * 2 * F], logits[N * V];
    static float qkv[T * (H + 2 * KV) * D], o[T * H * D], lse[H * T], dout[T * H * D], dqkv[T * (H + 2 * KV) * D];
    int32_t targets[N], pos[T];
    double loss[N] = {0};
    fill(gateup, N * 2 * F, 8); /* exp's arguments over [-8, 8] */
    fill(dh, N * F, 1);
    zt_cpu_swiglu_forward(h, NULL, gateup, N, F);
    zt_cpu_swiglu_backward(dgateup, NULL, dh, gateup, N, F);
    out[0] = crc(h, sizeof h);
    out[1] = crc(dgateup, sizeof dgateup);
    fill(logits, N * V, 4);
    for (int i = 0; i < N; i++) targets[i] = rnd_int(0, V - 1);
    zt_cpu_cross_entropy(logits, loss, targets, N, V, 1.0f / N);
    out[CROSS_ENTROPY] = crc(loss, sizeof loss) ^ crc(logits, sizeof logits);
    fill(qkv, T * (H + 2 * KV) * D, 2);
    fill(dout, T * H * D, 1);
    for (int t = 0; t < T; t++) pos[t] = t < 30 ? t : t - 30; /* two documents */
    zt_cpu_attention_forward(o, lse, qkv, pos, 1, T, H, KV, D, 0, 1 / sqrt(D), 0);
    zt_cpu_attention_backward(dqkv, dout, qkv, o, lse, pos, 1, T, H, KV, D, 0, 1 / sqrt(D), 0);
    out[3] = crc(o, sizeof o) ^ crc(lse, sizeof lse);
    out[4] = crc(dqkv, sizeof dqkv);
}

typedef struct {
    char level[16]; /* what zt_cpu_level_name said in that run */
    uint32_t digest[KERNELS];
} level_run;

/* 0 scalar, 1 AVX2, 2 AVX-512 (with or without BF16): the variant kernels/cpu/levels.h picks */
static int variant(const level_run *r) { return !strcmp(r->level, "scalar") ? 0 : !strcmp(r->level, "avx2") ? 1 : 2; }

/* This binary again with ZT_CPU=cap (NULL: unset), its level and digests into r. */
static int run_at(const char *cap, level_run *r)
{
    char self[PATH_MAX], cmd[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 0;
    self[n] = 0;
    snprintf(cmd, sizeof cmd, "'%s' --digests", self);
    if (cap) setenv("ZT_CPU", cap, 1);
    else unsetenv("ZT_CPU");
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    int got = fscanf(p, "%15s %x %x %x %x %x", r->level, &r->digest[0], &r->digest[1], &r->digest[2], &r->digest[3],
                     &r->digest[4]);
    return pclose(p) == 0 && got == 1 + KERNELS;
}

#ifdef __SANITIZE_ADDRESS__
enum { VARIANTS_DIFFER = 0 };
#else
enum { VARIANTS_DIFFER = 1 };
#endif

/* 1: runs at variants va and vb must agree bitwise on kernel k; 0: they must differ; -1: either */
static int expect_same(int va, int vb, int k)
{
    if (va == vb) return 1;
    if (!VARIANTS_DIFFER) return -1;
    if ((va == 0) != (vb == 0)) return 0; /* FMA against none */
    return k == CROSS_ENTROPY ? 0 : -1;   /* sums of 8 lanes against 16 */
}

static void test_each_level_runs_its_own_variant(void)
{
    const char *caps[] = {"scalar", "avx2", "avx512", NULL};
    level_run runs[4];
    for (int i = 0; i < 4; i++) CHECK_MSG(run_at(caps[i], &runs[i]), "ZT_CPU=%s", caps[i] ? caps[i] : "(unset)");
    printf("  levels: ZT_CPU=scalar %s, avx2 %s, avx512 %s, unset %s\n", runs[0].level, runs[1].level, runs[2].level,
           runs[3].level);
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            for (int k = 0; k < KERNELS; k++) {
                int want = expect_same(variant(&runs[a]), variant(&runs[b]), k);
                int same = runs[a].digest[k] == runs[b].digest[k];
                CHECK_MSG(want < 0 || same == want, "%s: %s and %s give %s results", kernel_names[k], runs[a].level,
                          runs[b].level, same ? "the same" : "different");
            }
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--digests")) {
        uint32_t d[KERNELS];
        kernel_digests(d);
        printf("%s %08x %08x %08x %08x %08x\n", zt_cpu_level_name(), d[0], d[1], d[2], d[3], d[4]);
        return 0;
    }
    RUN(test_each_level_runs_its_own_variant);
    return test_summary();
}

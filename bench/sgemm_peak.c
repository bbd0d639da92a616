/* bench/sgemm_peak: the fp32 GEMM ceiling of this machine, as OpenBLAS reaches it.
 *
 *     gcc -O2 -fopenmp bench/sgemm_peak.c $(pkg-config --cflags --libs openblas) -o build/bench/sgemm_peak
 *     OMP_NUM_THREADS=2 build/bench/sgemm_peak [--json]
 *
 * Times cblas_sgemm (best of several runs) on 2048^3 and on the GEMM shapes of a training
 * step of the benchmark model (M = 1024 tokens); prints what OpenBLAS says about itself.
 * With --json the last line is {"peak_gflops": ..., "corename": ..., ...} for bench/run.sh.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct {
    const char *what;
    int ta, tb, m, n, k;
} shape;

/* Best GFLOP/s of `reps` timed runs after one warm-up run. */
static double time_sgemm(const shape *s, int reps, float *a, float *b, float *c)
{
    enum CBLAS_TRANSPOSE ta = s->ta ? CblasTrans : CblasNoTrans, tb = s->tb ? CblasTrans : CblasNoTrans;
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    double best = 1e30;
    for (int r = 0; r <= reps; r++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, ta, tb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c, s->n);
        double dt = now_s() - t0;
        if (r > 0 && dt < best) best = dt;
    }
    return 2.0 * s->m * s->n * s->k / best * 1e-9;
}

int main(int argc, char **argv)
{
    int json = argc > 1 && !strcmp(argv[1], "--json");
    /* Training shapes of the bench model (hidden 512, intermediate 1408, vocab 32000, 1024 tokens):
     * forward X·Wᵀ, input grad dY·W, weight grad dYᵀ·X. */
    static const shape shapes[] = {
        {"square 2048^3", 0, 0, 2048, 2048, 2048},
        {"fwd  mlp up   X·Wt", 0, 1, 1024, 1408, 512},
        {"fwd  mlp down X·Wt", 0, 1, 1024, 512, 1408},
        {"fwd  lm head  X·Wt", 0, 1, 1024, 32000, 512},
        {"dX   lm head  dY·W", 0, 0, 1024, 512, 32000},
        {"dW   lm head  dYt·X", 1, 0, 32000, 512, 1024},
        {"dW   mlp up   dYt·X", 1, 0, 1408, 512, 1024},
    };
    size_t cap = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        size_t need = (size_t)s->m * s->k + (size_t)s->k * s->n + (size_t)s->m * s->n;
        if (need > cap) cap = need;
    }
    float *buf = malloc(cap * sizeof(float));
    if (!buf) {
        fprintf(stderr, "sgemm_peak: out of memory\n");
        return 1;
    }
    srand(1);
    for (size_t i = 0; i < cap; i++) buf[i] = (float)rand() / RAND_MAX - 0.5f;

    printf("OpenBLAS: %s\n  core: %s, threads: %d\n", openblas_get_config(), openblas_get_corename(),
           openblas_get_num_threads());
    double peak = 0, square = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const shape *s = &shapes[i];
        float *a = buf, *b = a + (size_t)s->m * s->k, *c = b + (size_t)s->k * s->n;
        double flop = 2.0 * s->m * s->n * s->k;
        int reps = flop > 2e10 ? 3 : 5;
        double g = time_sgemm(s, reps, a, b, c);
        printf("  %-20s M=%-5d N=%-5d K=%-5d %8.1f GFLOP/s\n", s->what, s->m, s->n, s->k, g);
        if (i == 0) square = g;
        if (g > peak) peak = g;
    }
    printf("peak: %.1f GFLOP/s\n", peak);
    if (json)
        printf("{\"peak_gflops\": %.2f, \"square_gflops\": %.2f, \"corename\": \"%s\", \"threads\": %d}\n", peak,
               square, openblas_get_corename(), openblas_get_num_threads());
    free(buf);
    return 0;
}

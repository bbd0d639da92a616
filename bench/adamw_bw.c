/* bench/adamw_bw: the CPU AdamW step (lib/optim/adamw.h) as memory bandwidth, against a
 * STREAM-like triad on the same threads in the same run (bench/offload.sh).
 *
 *     make build/libzt.a
 *     gcc -std=gnu11 -O3 -fopenmp -I. bench/adamw_bw.c build/libzt.a -lm -o build/bench/adamw_bw
 *     OMP_NUM_THREADS=2 build/bench/adamw_bw [--params 64M] [--reps 8]
 *
 * AdamW: zt_adamw_update over --params elements, bf16 copy written, decay applied; 30 bytes
 * of state per element (fp32 weight, grad, m, v read: 16; weight, m, v written: 12; bf16
 * copy written: 2). Triad: a[i] = b[i] + s * c[i] over three float arrays of 2.5 × --params
 * elements, the same bytes as AdamW's state. Its GB/s is given both STREAM's way (12 bytes
 * an element) and with the write-allocate of a[] (16 bytes: a store that misses the cache
 * reads the line first), which is what the memory really carries; AdamW's stores all land
 * on lines it has just read except the bf16 copy's, so its 30 bytes miss only 2 of that
 * kind. The two alternate, each the best of --reps timed passes after one warm-up; one JSON
 * line, GB = 10^9.
 */
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/core/cpu.h"
#include "lib/optim/adamw.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* A count with an optional suffix M (2^20); 0 when malformed or out of range. */
static size_t parse_count(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-') return 0;
    int shift = *end == 'M' ? 20 : 0;
    if (shift) end++;
    if (*end || v > (1ull << 36) >> shift) return 0;
    return (size_t)v << shift;
}

static void *alloc_or_die(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "adamw_bw: out of memory for %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

/* Parallel first touch, so each thread's pages come from where it runs. */
static void fill(float *x, size_t n, float value)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = value * (float)(i % 1000 + 1);
}

static void triad(float *a, const float *b, const float *c, float s, size_t n)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

int main(int argc, char **argv)
{
    size_t n = 64 << 20;
    int reps = 8;
    for (int i = 1; i < argc; i++) {
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        size_t got = val ? parse_count(val) : 0;
        if (!strcmp(argv[i], "--params") && got) n = got;
        else if (!strcmp(argv[i], "--reps") && got && got <= 1000) reps = (int)got;
        else {
            fprintf(stderr, "usage: adamw_bw [--params N (M = 2^20)] [--reps 1..1000]\n");
            return 2;
        }
        i++;
    }

    size_t nt = n / 2 * 5; /* 3 arrays × 4 bytes × 2.5 n = 30 n bytes */
    float *param = alloc_or_die(n * 4), *grad = alloc_or_die(n * 4), *m = alloc_or_die(n * 4), *v = alloc_or_die(n * 4);
    uint16_t *bf16 = alloc_or_die(n * 2);
    float *a = alloc_or_die(nt * 4), *b = alloc_or_die(nt * 4), *c = alloc_or_die(nt * 4);
    fill(param, n, 1e-3f), fill(grad, n, 1e-4f), fill(m, n, 0), fill(v, n, 0);
    memset(bf16, 0, n * 2);
    fill(a, nt, 0), fill(b, nt, 1), fill(c, nt, 2);

    /* The two alternate, so that whatever else the machine does falls on both alike. */
    double best = 1e30, tbest = 1e30;
    for (int r = 0; r <= reps; r++) {
        zt_adamw h = {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = r + 1};
        double t0 = now_s();
        zt_adamw_update(&h, param, grad, m, v, n, 1.0f, 1, bf16);
        double t1 = now_s();
        triad(a, b, c, 0.5f, nt);
        double t2 = now_s();
        if (r > 0 && t1 - t0 < best) best = t1 - t0;
        if (r > 0 && t2 - t1 < tbest) tbest = t2 - t1;
    }
    volatile float sink = a[nt / 3]; /* the result is used: the passes stay */
    (void)sink;
    double adamw_gbps = 30.0 * n / best / 1e9;
    free(param), free(grad), free(m), free(v), free(bf16), free(a), free(b), free(c);
    double triad12 = 12.0 * nt / tbest / 1e9, triad16 = 16.0 * nt / tbest / 1e9;

    printf("{\"adamw_GBps\": %.2f, \"adamw_ms\": %.1f, \"triad_GBps\": %.2f, \"triad_wa_GBps\": %.2f, "
           "\"triad_ms\": %.1f, \"adamw_vs_triad\": %.3f, \"adamw_vs_triad_wa\": %.3f, \"params\": %zu, "
           "\"threads\": %d, \"cpu_level\": \"%s\", \"reps\": %d}\n",
           adamw_gbps, best * 1e3, triad12, triad16, tbest * 1e3, adamw_gbps / triad12, adamw_gbps / triad16, n,
           omp_get_max_threads(), zt_cpu_level_name(), reps);
    return 0;
}

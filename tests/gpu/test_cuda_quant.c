/* The CUDA block quantizers (kernels/cuda/quant.cu) and a quantized base's decoders (nf4.cu) against their
 * CPU twins (kernels/cpu/quant.h, nf4.h), bitwise:
 * q bytes, scale bits, y bits (any NaN equals any NaN: the GPU does not keep x86's NaN payloads) and the
 * non-finite counts. Every device output has 64 sentinel bytes after it that must survive the kernel.
 * Exits 77 where there is no CUDA device. */
#include <cuda_runtime.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/nf4.h"
#include "kernels/cpu/quant.h"
#include "kernels/cuda/ops.h"
#include "tests/unit/test.h"
#include "tests/unit/test_rand.h"

#define CUDA_OK(call)                                                                                                  \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                     \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static cudaStream_t stream;

/* Random data whose runs of 1..300 elements each have an exponent in [emin, emax]; a few elements stand out
 * by 2^10 (where that stays finite), so blocks span exponents between and within themselves. */
static void fill_range(float *x, size_t n, int emin, int emax)
{
    size_t i = 0;
    while (i < n) {
        size_t run = (size_t)rnd_int(1, 300);
        int e = rnd_int(emin, emax);
        float scale = ldexpf(1.0f, e), big = e + 10 < 127 ? 1024.0f : 1.0f;
        for (; run && i < n; run--, i++) x[i] = rnd() * scale * (rnd_int(0, 50) ? 1.0f : big);
    }
}

static void fill_spread(float *x, size_t n) { fill_range(x, n, -30, 30); }

/* The index of the first float of a that differs from b in its bits (with nan_equal, any two NaNs are
 * equal), or n. */
static size_t first_diff(const float *a, const float *b, size_t n, int nan_equal)
{
    for (size_t i = 0; i < n; i++)
        if (bits(a[i]) != bits(b[i]) && !(nan_equal && isnan(a[i]) && isnan(b[i]))) return i;
    return n;
}

static size_t first_diff_bytes(const unsigned char *a, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return n;
}

/* --- device buffers: at an offset from cudaMalloc's alignment, with sentinel bytes after them ------------- */

enum { SENTINEL = 64, MAX_OFFSET = 3 };

typedef struct dbuf {
    unsigned char *base;
    void *p;
    size_t bytes;
} dbuf;

static dbuf dbuf_new(size_t bytes, size_t offset)
{
    dbuf b = {.bytes = bytes};
    CUDA_OK(cudaMalloc((void **)&b.base, offset + bytes + SENTINEL));
    CUDA_OK(cudaMemset(b.base, 0xa5, offset + bytes + SENTINEL));
    b.p = b.base + offset;
    return b;
}

static dbuf dbuf_from(const void *host, size_t bytes, size_t offset)
{
    dbuf b = dbuf_new(bytes, offset);
    if (bytes) CUDA_OK(cudaMemcpy(b.p, host, bytes, cudaMemcpyHostToDevice));
    return b;
}

/* waits for the stream, then copies the buffer to host */
static void dbuf_get(void *host, const dbuf *b)
{
    CUDA_OK(cudaStreamSynchronize(stream));
    if (b->bytes) CUDA_OK(cudaMemcpy(host, b->p, b->bytes, cudaMemcpyDeviceToHost));
}

static int dbuf_intact(const dbuf *b)
{
    unsigned char s[SENTINEL];
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaMemcpy(s, (unsigned char *)b->p + b->bytes, SENTINEL, cudaMemcpyDeviceToHost));
    for (int i = 0; i < SENTINEL; i++)
        if (s[i] != 0xa5) return 0;
    return 1;
}

static void dbuf_free(dbuf *b) { CUDA_OK(cudaFree(b->base)); }

/* --- one width's quantize and dequantize, on either side -------------------------------------------------- */

static size_t cpu_quant(int width, const float *x, size_t n, size_t block, void *q, float *scales)
{
    return width == 8 ? zt_quant8(x, n, block, q, scales) : zt_quant4(x, n, block, q, scales);
}

static void cpu_dequant(int width, const void *q, const float *scales, size_t n, size_t block, float *y)
{
    if (width == 8) zt_dequant8(q, scales, n, block, y);
    else zt_dequant4(q, scales, n, block, y);
}

static size_t gpu_quant(int width, const float *x, size_t n, size_t block, void *q, float *scales)
{
    return width == 8 ? zt_cuda_quant8(stream, x, n, block, q, scales) : zt_cuda_quant4(stream, x, n, block, q, scales);
}

static void gpu_dequant(int width, const void *q, const float *scales, size_t n, size_t block, float *y)
{
    if (width == 8) zt_cuda_dequant8(stream, q, scales, n, block, y);
    else zt_cuda_dequant4(stream, q, scales, n, block, y);
    CUDA_OK(cudaGetLastError());
}

/* Quantizes x on both sides and compares q, scales and the count; dequantizes the CPU's q and scales on both
 * sides (so each kernel is checked on its own) and compares y. */
static void check_quant(const float *x, size_t n, size_t block, int width)
{
    size_t nb = zt_quant_nblocks(n, block), qbytes = width == 8 ? n : (n + 1) / 2, fb = sizeof(float);
    size_t off = (size_t)rnd_int(0, MAX_OFFSET);
    unsigned char *qc = malloc(qbytes + 1), *qg = malloc(qbytes + 1);
    float *sc = malloc((nb + 1) * fb), *sg = malloc((nb + 1) * fb), *yc = malloc((n + 1) * fb);
    float *yg = malloc((n + 1) * fb);
    size_t bad_c = cpu_quant(width, x, n, block, qc, sc);
    cpu_dequant(width, qc, sc, n, block, yc);

    dbuf dx = dbuf_from(x, n * fb, off * fb);
    dbuf dq = dbuf_new(qbytes, off), ds = dbuf_new(nb * fb, (MAX_OFFSET - off) * fb);
    size_t bad_g = gpu_quant(width, dx.p, n, block, dq.p, ds.p);
    dbuf_get(qg, &dq);
    dbuf_get(sg, &ds);
    CHECK_MSG(bad_g == bad_c, "int%d n %zu block %zu: %zu non-finite, CPU %zu", width, n, block, bad_g, bad_c);
    size_t i = first_diff_bytes(qg, qc, qbytes);
    CHECK_MSG(i == qbytes, "int%d n %zu block %zu: q byte %zu = 0x%02x, CPU 0x%02x", width, n, block, i, qg[i], qc[i]);
    i = first_diff(sg, sc, nb, 0);
    CHECK_MSG(i == nb, "int%d n %zu block %zu: scale %zu = %a (0x%08x), CPU %a (0x%08x)", width, n, block, i, sg[i],
              bits(sg[i]), sc[i], bits(sc[i]));
    CHECK_MSG(dbuf_intact(&dq) && dbuf_intact(&ds), "int%d n %zu block %zu: quant wrote past the end", width, n, block);

    dbuf dqc = dbuf_from(qc, qbytes, off), dsc = dbuf_from(sc, nb * fb, off * fb), dy = dbuf_new(n * fb, off * fb);
    gpu_dequant(width, dqc.p, dsc.p, n, block, dy.p);
    dbuf_get(yg, &dy);
    i = first_diff(yg, yc, n, 1);
    CHECK_MSG(i == n, "int%d n %zu block %zu: y[%zu] = %a (0x%08x), CPU %a (0x%08x)", width, n, block, i, yg[i],
              bits(yg[i]), yc[i], bits(yc[i]));
    CHECK_MSG(dbuf_intact(&dy), "int%d n %zu block %zu: dequant wrote past the end", width, n, block);

    dbuf_free(&dx), dbuf_free(&dq), dbuf_free(&ds), dbuf_free(&dqc), dbuf_free(&dsc), dbuf_free(&dy);
    free(qc), free(qg), free(sc), free(sg), free(yc), free(yg);
}

enum { KMAX = 4 };

/* zt_cuda_dequant4_sum against zt_dequant4_sum for k = 1..KMAX, accumulating or not: input 0 is x's int4
 * quantization (with its NaN blocks, if any), the others random. */
static void check_sum(const float *x, size_t n, size_t block)
{
    size_t nb = zt_quant_nblocks(n, block), qbytes = (n + 1) / 2, fb = sizeof(float);
    size_t off = (size_t)rnd_int(0, MAX_OFFSET);
    uint8_t *q[KMAX];
    float *s[KMAX];
    void *dq_ptr[KMAX], *ds_ptr[KMAX];
    dbuf dq[KMAX], ds[KMAX];
    float *xj = malloc((n + 1) * fb), *y0 = malloc((n + 1) * fb), *yc = malloc((n + 1) * fb);
    float *yg = malloc((n + 1) * fb);
    for (int j = 0; j < KMAX; j++) {
        q[j] = malloc(qbytes + 1), s[j] = malloc((nb + 1) * fb);
        fill_spread(xj, n);
        zt_quant4(j ? xj : x, n, block, q[j], s[j]);
        dq[j] = dbuf_from(q[j], qbytes, (size_t)j), ds[j] = dbuf_from(s[j], nb * fb, (size_t)j * fb);
        dq_ptr[j] = dq[j].p, ds_ptr[j] = ds[j].p;
    }
    dbuf dqp = dbuf_from(dq_ptr, sizeof dq_ptr, 0), dsp = dbuf_from(ds_ptr, sizeof ds_ptr, 0);
    fill_spread(y0, n);
    for (int k = 1; k <= KMAX; k++)
        for (int acc = 0; acc <= 1; acc++) {
            memcpy(yc, y0, n * fb);
            zt_dequant4_sum((const uint8_t *const *)q, (const float *const *)s, k, n, block, yc, acc);
            dbuf dy = dbuf_from(y0, n * fb, off * fb);
            zt_cuda_dequant4_sum(stream, dqp.p, dsp.p, k, n, block, dy.p, acc);
            CUDA_OK(cudaGetLastError());
            dbuf_get(yg, &dy);
            size_t i = first_diff(yg, yc, n, 1);
            CHECK_MSG(i == n, "n %zu block %zu k %d accumulate %d: y[%zu] = %a (0x%08x), CPU %a (0x%08x)", n, block, k,
                      acc, i, yg[i], bits(yg[i]), yc[i], bits(yc[i]));
            CHECK_MSG(dbuf_intact(&dy), "n %zu block %zu k %d accumulate %d: wrote past the end", n, block, k, acc);
            dbuf_free(&dy);
        }
    for (int j = 0; j < KMAX; j++) dbuf_free(&dq[j]), dbuf_free(&ds[j]), free(q[j]), free(s[j]);
    dbuf_free(&dqp), dbuf_free(&dsp);
    free(xj), free(y0), free(yc), free(yg);
}

static void check_all(const float *x, size_t n, size_t block)
{
    check_quant(x, n, block, 8);
    check_quant(x, n, block, 4);
    check_sum(x, n, block);
}

/* --- the cases ------------------------------------------------------------------------------------------ */

static const size_t sizes[] = {0, 1, 2, 3, 5, 7, 8, 9, 31, 32, 33, 63, 100, 255, 256, 257, 1000, 4097};
static const size_t blocks[] = {1, 2, 3, 5, 7, 8, 16, 17, 31, 32, 33, 127, 256, 1000, 2048, 4096};

static void test_random_sizes(void)
{
    float *x = malloc(4097 * sizeof(float));
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t bi = 0; bi < sizeof blocks / sizeof *blocks; bi++) {
            fill_spread(x, sizes[si]);
            check_all(x, sizes[si], blocks[bi]);
        }
    free(x);
}

/* Millions of elements: capped grids loop, odd blocks make int4 bytes straddle blocks all along. */
static void test_large(void)
{
    const size_t n = ((size_t)1 << 22) + 3;
    float *x = malloc(n * sizeof(float));
    fill_spread(x, n);
    const size_t big_blocks[] = {1, 7, 256, 2047, 2048, 65537, n};
    for (size_t bi = 0; bi < sizeof big_blocks / sizeof *big_blocks; bi++) {
        check_quant(x, n, big_blocks[bi], 8);
        check_quant(x, n, big_blocks[bi], 4);
    }
    check_sum(x, n, 2047);
    check_sum(x, n - 3, 256);
    free(x);
}

static const size_t special_blocks[] = {1, 2, 3, 7, 9, 11, 256};

static void check_special(const float *x, size_t n)
{
    for (size_t bi = 0; bi < sizeof special_blocks / sizeof *special_blocks; bi++) check_all(x, n, special_blocks[bi]);
}

static void test_zeros(void)
{
    float x[1000];
    memset(x, 0, sizeof x);
    check_special(x, 1000);
    for (size_t i = 0; i < 45; i++) x[i] = (i / 9) % 2 ? rnd() : 0.0f; /* blocks of 9: 0, 2, 4 all zero */
    x[9 * 2 + 3] = -0.0f;
    check_special(x, 45);
}

static void test_nonfinite(void)
{
    const size_t n = 103;
    float x[103], snan;
    uint32_t snan_bits = 0x7f800001u; /* a signalling NaN: counted and NaN-scaled like any other */
    memcpy(&snan, &snan_bits, 4);
    fill_spread(x, n);
    x[5] = NAN, x[7] = INFINITY, x[33] = -INFINITY, x[60] = snan, x[102] = -NAN;
    for (int width = 8; width >= 4; width -= 4) { /* the count is of inputs, not blocks */
        unsigned char q[103];
        float s[103];
        CHECK(cpu_quant(width, x, n, 11, q, s) == 5);
    }
    check_special(x, n);
    for (size_t i = 0; i < n; i++) x[i] = i % 3 ? NAN : i % 2 ? INFINITY : -INFINITY;
    check_special(x, n);
}

/* Blocks whose scale is subnormal or underflows to 0, and blocks near FLT_MAX (where q * s may round to Inf). */
static void test_extreme_magnitudes(void)
{
    const size_t n = 3001;
    float *x = malloc(n * sizeof(float));
    fill_range(x, n, -149, -118);
    check_special(x, n);
    fill_range(x, n, 100, 127);
    x[17] = FLT_MAX, x[400] = -FLT_MAX;
    check_special(x, n);
    float tiny[] = {1e-44f, -3e-45f, 0, 1e-45f, 1e-38f, -5e-39f, 2e-39f, 0x1p-149f, -0x1p-126f};
    check_special(tiny, sizeof tiny / sizeof *tiny);
    free(x);
}

/* Values k * 2^-e with max |k| = qmax (exact scale, exact round trip), and halfway cases that round to even. */
static void test_exact_values(void)
{
    const size_t n = 1001, block = 37;
    float *x = malloc(n * sizeof(float));
    for (int qmax = 127; qmax >= 7; qmax -= 120) {
        for (size_t lo = 0; lo < n; lo += block) {
            size_t hi = lo + block < n ? lo + block : n;
            int e = rnd_int(-40, 40);
            for (size_t i = lo; i < hi; i++) x[i] = ldexpf((float)rnd_int(-qmax, qmax), -e);
            x[lo + (size_t)rnd_int(0, (int)(hi - lo - 1))] = ldexpf((float)(rnd_int(0, 1) ? qmax : -qmax), -e);
        }
        check_all(x, n, block);
    }
    free(x);

    /* absmax = qmax makes s = 1: x / s is x itself */
    const float half8[8] = {127, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f};
    const float half4[8] = {7, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 6.5f};
    const int8_t want8[8] = {127, 0, 2, 2, 0, -2, -2, 126};
    const uint8_t want4[4] = {0x07, 0x22, 0xe0, 0x6e}; /* 7,0 | 2,2 | 0,-2 | -2,6 */
    check_special(half8, 8);
    check_special(half4, 8);
    dbuf dx = dbuf_from(half8, sizeof half8, 0), dq8 = dbuf_new(8, 0), dq4 = dbuf_new(4, 0);
    dbuf ds = dbuf_new(sizeof(float), 0);
    int8_t q8[8];
    uint8_t q4[4];
    float s;
    CHECK(zt_cuda_quant8(stream, dx.p, 8, 8, dq8.p, ds.p) == 0);
    dbuf_get(q8, &dq8);
    dbuf_get(&s, &ds);
    CHECK(!memcmp(q8, want8, 8) && s == 1.0f);
    CUDA_OK(cudaMemcpy(dx.p, half4, sizeof half4, cudaMemcpyHostToDevice));
    CHECK(zt_cuda_quant4(stream, dx.p, 8, 8, dq4.p, ds.p) == 0);
    dbuf_get(q4, &dq4);
    dbuf_get(&s, &ds);
    CHECK(!memcmp(q4, want4, 4) && s == 1.0f);
    dbuf_free(&dx), dbuf_free(&dq8), dbuf_free(&dq4), dbuf_free(&ds);
}

/* k = 0: y unchanged when accumulating, else zeros (the pointer arrays are not read). */
static void test_sum_of_none(void)
{
    const size_t n = 257;
    float y0[257], y[257];
    fill_spread(y0, n);
    for (int acc = 0; acc <= 1; acc++) {
        dbuf dy = dbuf_from(y0, sizeof y0, 1 * sizeof(float));
        zt_cuda_dequant4_sum(stream, NULL, NULL, 0, n, 7, dy.p, acc);
        CUDA_OK(cudaGetLastError());
        dbuf_get(y, &dy);
        for (size_t i = 0; i < n; i++) CHECK(bits(y[i]) == (acc ? bits(y0[i]) : 0));
        CHECK(dbuf_intact(&dy));
        dbuf_free(&dy);
    }
}

/* --- a quantized base's decoders (kernels/cuda/nf4.cu) -------------------------------------------------- */

/* NF4 codes and absmax values of n weights, their double quantization, and int8 rows of them: the GPU's
 * decoding of element ranges [first, first + len) (odd starts, a range's last byte half used, from an
 * offset in device memory) bit for bit the CPU's, the bytes after each output untouched. */
static void test_nf4_decoders(void)
{
    const size_t n = 64 * 1000 + 37, nb = zt_nf4_blocks(n), cols = 333, rows = n / cols;
    float *x = malloc(n * sizeof *x), *a = malloc(nb * sizeof *a), *want = malloc(n * sizeof *want),
          *got = malloc(n * sizeof *got), *b = malloc(zt_nf4_dq_blocks(nb) * sizeof *b), *r = malloc(rows * sizeof *r);
    uint8_t *q = malloc((n + 1) / 2), *qa = malloc(nb);
    int8_t *q8 = malloc(rows * cols);
    fill_range(x, n, -12, 2);
    CHECK(zt_nf4_quantize(x, n, q, a) == 0);
    float mu = zt_nf4_dq_offset(a, nb);
    zt_nf4_dq_quantize(a, nb, mu, qa, b);
    CHECK(zt_int8_rows_quantize(x, rows, cols, q8, r) == 0);
    dbuf dq = dbuf_from(q, (n + 1) / 2, 1), da = dbuf_from(a, nb * sizeof *a, 2 * sizeof(float));
    dbuf dqa = dbuf_from(qa, nb, 3), db = dbuf_from(b, zt_nf4_dq_blocks(nb) * sizeof *b, 0);
    dbuf dq8 = dbuf_from(q8, rows * cols, 1), dr = dbuf_from(r, rows * sizeof *r, 1 * sizeof(float));
    const size_t ranges[][2] = {{0, n}, {1, n - 1}, {63, 130}, {64 * 7 + 5, 1}, {n - 3, 3}, {12345, 40000}};
    for (size_t k = 0; k < sizeof ranges / sizeof *ranges; k++) {
        size_t first = ranges[k][0], len = ranges[k][1];
        dbuf dy = dbuf_new(len * sizeof(float), 3 * sizeof(float));
        zt_nf4_dequantize(q, a, first, len, want);
        zt_cuda_nf4_dequantize(stream, dq.p, da.p, first, len, dy.p);
        dbuf_get(got, &dy);
        CHECK_MSG(first_diff(got, want, len, 0) == len && dbuf_intact(&dy), "nf4 [%zu, +%zu)", first, len);
        size_t af = first % nb, an = len < nb - af ? len : nb - af; /* ranges of the absmax values alike */
        zt_nf4_dq_dequantize(qa, b, mu, af, an, want);
        zt_cuda_nf4_dq_dequantize(stream, dqa.p, db.p, mu, af, an, dy.p);
        dbuf_get(got, &dy);
        CHECK_MSG(first_diff(got, want, an, 0) == an, "double quantization [%zu, +%zu)", af, an);
        size_t row0 = first / cols % rows, nr = len / cols < rows - row0 ? len / cols : rows - row0;
        zt_int8_rows_dequantize(q8, r, cols, row0, nr, want);
        zt_cuda_int8_rows_dequantize(stream, dq8.p, dr.p, cols, row0, nr, dy.p);
        dbuf_get(got, &dy);
        CHECK_MSG(first_diff(got, want, nr * cols, 0) == nr * cols, "int8 rows [%zu, +%zu)", row0, nr);
        CHECK(dbuf_intact(&dy));
        dbuf_free(&dy);
    }
    dbuf_free(&dq), dbuf_free(&da), dbuf_free(&dqa), dbuf_free(&db), dbuf_free(&dq8), dbuf_free(&dr);
    free(x), free(a), free(want), free(got), free(b), free(r), free(q), free(qa), free(q8);
}

int main(void)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    CUDA_OK(cudaStreamCreate(&stream));
    RUN(test_random_sizes);
    RUN(test_large);
    RUN(test_zeros);
    RUN(test_nonfinite);
    RUN(test_extreme_magnitudes);
    RUN(test_exact_values);
    RUN(test_sum_of_none);
    RUN(test_nf4_decoders);
    CUDA_OK(cudaStreamDestroy(stream));
    return test_summary();
}

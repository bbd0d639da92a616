/* Block quantization (see quant.h). The block-level logic (scales, NaN/Inf, int4 blocks that start in the
 * middle of a byte, OpenMP chunks) is written once; it calls a kernel set, scalar or AVX2, for the runs of
 * elements inside a block. Both sets do the same IEEE operations in the same order, so they agree bitwise.
 * GCC treats intrinsics as plain vector arithmetic and would fuse mul+add into FMA: contraction is off. */
#pragma GCC optimize("fp-contract=off")

#include "quant.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "lib/core/cpu.h"
#include "lib/core/status.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define ABS_MASK 0x7fffffffu
#define MAX_FINITE 0x7f7fffffu  /* |x| bits above this: ±Inf or NaN */
#define ROUND_MAGIC 12582912.0f /* 1.5 * 2^23: (v + it) - it rounds |v| < 2^22 to an integer, half to even */

enum { QMAX8 = 127, QMAX4 = 7 };
enum { CHUNK_ELEMS = 1 << 16 }; /* elements per OpenMP chunk; a chunk holds whole blocks */

size_t zt_quant_nblocks(size_t n, size_t block)
{
    ZT_ASSERT(block >= 1);
    return n / block + (n % block != 0);
}

/* --- scalar kernels: runs of elements inside one block -------------------------------------------------- */

/* The bits of |x|: for non-negative floats, integer order is float order, and NaN needs no special case. */
static inline uint32_t abs_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u & ABS_MASK;
}

static uint32_t absmax_bits_scalar(const float *x, size_t len)
{
    uint32_t m = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t a = abs_bits(x[i]);
        m = a > m ? a : m;
    }
    return m;
}

/* clamp(round-half-even(x / s), -qmax, qmax) for a block scale s > 0 and finite x. The clamp (the same as
 * clamping before rounding, qmax being an integer) is done on integers, which vectorises; |x / s| stays far
 * below 2^22, where the rounding trick holds: x <= absmax and s = absmax / qmax to within 2^-24, or to
 * within a factor 1.5 when s is subnormal. */
static inline int quant_one(float x, float s, int qmax)
{
    int q = (int)((x / s + ROUND_MAGIC) - ROUND_MAGIC);
    q = q < qmax ? q : qmax;
    return q > -qmax ? q : -qmax;
}

static inline uint8_t nibble_of(float x, float s) { return (uint8_t)((unsigned)quant_one(x, s, QMAX4) & 0xfu); }

/* element i of packed int4 data, sign-extended */
static inline int nibble_at(const uint8_t *q, size_t i)
{
    int v = (q[i >> 1] >> (4 * (i & 1))) & 0xf;
    return (v ^ 8) - 8;
}

static void quant8_run_scalar(const float *x, size_t len, float s, int8_t *q)
{
    for (size_t i = 0; i < len; i++) q[i] = (int8_t)quant_one(x[i], s, QMAX8);
}

/* x[0] is an even element; q is its byte. An odd len leaves the last byte's high nibble 0. */
static void quant4_run_scalar(const float *x, size_t len, float s, uint8_t *q)
{
    size_t i = 0;
    for (; i + 2 <= len; i += 2) q[i / 2] = (uint8_t)(nibble_of(x[i], s) | nibble_of(x[i + 1], s) << 4);
    if (i < len) q[i / 2] = nibble_of(x[i], s);
}

static void dequant8_run_scalar(const int8_t *q, size_t len, float s, float *y)
{
    for (size_t i = 0; i < len; i++) y[i] = (float)q[i] * s;
}

/* q is the byte of y[0], an even element */
static void dequant4_run_scalar(const uint8_t *q, size_t len, float s, float *y)
{
    for (size_t i = 0; i < len; i++) y[i] = (float)nibble_at(q, i) * s;
}

/* The inputs of zt_dequant4_sum. */
typedef struct sum_inputs {
    const uint8_t *const *q;
    const float *const *scales;
    int k, accumulate;
} sum_inputs;

/* Element i (global index) of block b: y0 + d0 + d1 + ... or d0 + d1 + ... */
static inline float sum_one(const sum_inputs *in, size_t b, size_t i, float y0)
{
    float sum = in->accumulate ? y0 : (float)nibble_at(in->q[0], i) * in->scales[0][b];
    for (int j = in->accumulate ? 0 : 1; j < in->k; j++) sum += (float)nibble_at(in->q[j], i) * in->scales[j][b];
    return sum;
}

static void dequant4_sum_run_scalar(const sum_inputs *in, size_t b, size_t lo, size_t len, float *y)
{
    for (size_t i = 0; i < len; i++) y[lo + i] = sum_one(in, b, lo + i, y[lo + i]);
}

typedef struct quant_kernels {
    uint32_t (*absmax_bits)(const float *x, size_t len);
    void (*quant8)(const float *x, size_t len, float s, int8_t *q);
    void (*quant4)(const float *x, size_t len, float s, uint8_t *q);
    void (*dequant8)(const int8_t *q, size_t len, float s, float *y);
    void (*dequant4)(const uint8_t *q, size_t len, float s, float *y);
    void (*dequant4_sum)(const sum_inputs *in, size_t b, size_t lo, size_t len, float *y); /* lo even */
} quant_kernels;

static const quant_kernels kernels_scalar = {absmax_bits_scalar,  quant8_run_scalar,   quant4_run_scalar,
                                             dequant8_run_scalar, dequant4_run_scalar, dequant4_sum_run_scalar};

/* --- AVX2 kernels: 8 or 16 elements at a time, the rest by the scalar ones -------------------------------- */

#if defined(__x86_64__)
#define AVX2 __attribute__((target("avx2")))

AVX2 static uint32_t absmax_bits_avx2(const float *x, size_t len)
{
    const __m256i mask = _mm256_set1_epi32((int)ABS_MASK);
    __m256i m0 = _mm256_setzero_si256(), m1 = m0;
    size_t i = 0;
    for (; i + 16 <= len; i += 16) {
        m0 = _mm256_max_epu32(m0, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), mask));
        m1 = _mm256_max_epu32(m1, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i + 8)), mask));
    }
    m0 = _mm256_max_epu32(m0, m1);
    __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m0), _mm256_extracti128_si256(m0, 1));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4e));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xb1));
    uint32_t m = (uint32_t)_mm_cvtsi128_si32(h), tail = absmax_bits_scalar(x + i, len - i);
    return tail > m ? tail : m;
}

/* quant_one on 8 lanes */
AVX2 static inline __m256i quant8_lanes(const float *x, __m256 s, __m256i qmax)
{
    const __m256 magic = _mm256_set1_ps(ROUND_MAGIC);
    __m256 v = _mm256_div_ps(_mm256_loadu_ps(x), s);
    __m256i q = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(v, magic), magic));
    return _mm256_max_epi32(_mm256_min_epi32(q, qmax), _mm256_sub_epi32(_mm256_setzero_si256(), qmax));
}

/* 16 int32 in [-128, 127] to 16 int8, in order */
AVX2 static inline __m128i pack16_epi8(__m256i a, __m256i b)
{
    __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xd8);
    return _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}

AVX2 static void quant8_run_avx2(const float *x, size_t len, float s, int8_t *q)
{
    const __m256 vs = _mm256_set1_ps(s);
    const __m256i qmax = _mm256_set1_epi32(QMAX8);
    size_t i = 0;
    for (; i + 16 <= len; i += 16) {
        __m128i p = pack16_epi8(quant8_lanes(x + i, vs, qmax), quant8_lanes(x + i + 8, vs, qmax));
        _mm_storeu_si128((__m128i *)(q + i), p);
    }
    quant8_run_scalar(x + i, len - i, s, q + i);
}

AVX2 static void quant4_run_avx2(const float *x, size_t len, float s, uint8_t *q)
{
    const __m256 vs = _mm256_set1_ps(s);
    const __m256i qmax = _mm256_set1_epi32(QMAX4);
    const __m128i low4 = _mm_set1_epi8(0xf), low8 = _mm_set1_epi16(0xff);
    size_t i = 0;
    for (; i + 16 <= len; i += 16) {
        __m128i t = _mm_and_si128(pack16_epi8(quant8_lanes(x + i, vs, qmax), quant8_lanes(x + i + 8, vs, qmax)), low4);
        /* each 16-bit lane holds (even, odd) nibbles in its two bytes; fold odd into the even byte's top */
        __m128i pairs = _mm_and_si128(_mm_or_si128(t, _mm_srli_epi16(t, 4)), low8);
        _mm_storel_epi64((__m128i *)(q + i / 2), _mm_packus_epi16(pairs, pairs));
    }
    quant4_run_scalar(x + i, len - i, s, q + i / 2);
}

AVX2 static void dequant8_run_avx2(const int8_t *q, size_t len, float s, float *y)
{
    const __m256 vs = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 16 <= len; i += 16) {
        __m128i b = _mm_loadu_si128((const __m128i *)(q + i));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), vs));
        __m128i b_hi = _mm_srli_si128(b, 8);
        _mm256_storeu_ps(y + i + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b_hi)), vs));
    }
    dequant8_run_scalar(q + i, len - i, s, y + i);
}

/* The 8 sign-extended nibbles of 4 bytes, as floats: lane e shifts nibble e to the top, then back down. */
AVX2 static inline __m256 nibbles8(const uint8_t *q)
{
    int32_t w;
    memcpy(&w, q, 4);
    const __m256i up = _mm256_setr_epi32(28, 24, 20, 16, 12, 8, 4, 0);
    return _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_sllv_epi32(_mm256_set1_epi32(w), up), 28));
}

AVX2 static void dequant4_run_avx2(const uint8_t *q, size_t len, float s, float *y)
{
    const __m256 vs = _mm256_set1_ps(s);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(nibbles8(q + i / 2), vs));
    dequant4_run_scalar(q + i / 2, len - i, s, y + i);
}

AVX2 static void dequant4_sum_run_avx2(const sum_inputs *in, size_t b, size_t lo, size_t len, float *y)
{
    size_t i = lo, hi = lo + len;
    for (; i + 16 <= hi; i += 16) {
        int j = 0;
        __m256 s0, s1;
        if (in->accumulate) {
            s0 = _mm256_loadu_ps(y + i);
            s1 = _mm256_loadu_ps(y + i + 8);
        } else {
            __m256 vs = _mm256_set1_ps(in->scales[0][b]);
            s0 = _mm256_mul_ps(nibbles8(in->q[0] + i / 2), vs);
            s1 = _mm256_mul_ps(nibbles8(in->q[0] + i / 2 + 4), vs);
            j = 1;
        }
        for (; j < in->k; j++) {
            __m256 vs = _mm256_set1_ps(in->scales[j][b]);
            s0 = _mm256_add_ps(s0, _mm256_mul_ps(nibbles8(in->q[j] + i / 2), vs));
            s1 = _mm256_add_ps(s1, _mm256_mul_ps(nibbles8(in->q[j] + i / 2 + 4), vs));
        }
        _mm256_storeu_ps(y + i, s0);
        _mm256_storeu_ps(y + i + 8, s1);
    }
    dequant4_sum_run_scalar(in, b, i, hi - i, y);
}

static const quant_kernels kernels_avx2 = {absmax_bits_avx2,  quant8_run_avx2,   quant4_run_avx2,
                                           dequant8_run_avx2, dequant4_run_avx2, dequant4_sum_run_avx2};
#endif

static int force_scalar;

void zt_quant_force_scalar(int on) { force_scalar = on; }

static const quant_kernels *pick_kernels(void)
{
#if defined(__x86_64__)
    if (!force_scalar && zt_cpu_has(ZT_CPU_AVX2)) return &kernels_avx2;
#endif
    return &kernels_scalar;
}

/* --- blocks ----------------------------------------------------------------------------------------------- */

/* One call's arguments; each operation reads the fields it needs. */
typedef struct quant_job {
    const quant_kernels *kern;
    size_t n, block;
    const float *x;       /* quant: input */
    void *q;              /* quant: output */
    float *scales;        /* quant: output */
    const void *cq;       /* dequant: input */
    const float *cscales; /* dequant: input */
    sum_inputs sum;       /* dequant4_sum: inputs */
    float *y;             /* dequant, dequant4_sum: output */
} quant_job;

/* Blocks [b0, b1) of a job; returns the count of non-finite inputs (quantization), else 0. */
typedef size_t blocks_fn(const quant_job *job, size_t b0, size_t b1);

static size_t block_len(const quant_job *job, size_t b)
{
    size_t rest = job->n - b * job->block;
    return rest < job->block ? rest : job->block;
}

/* The scale of a block, and how many of its inputs are NaN or ±Inf. */
static float block_scale(const quant_job *job, const float *x, size_t len, int qmax, size_t *nonfinite)
{
    uint32_t a = job->kern->absmax_bits(x, len);
    if (a > MAX_FINITE) {
        for (size_t i = 0; i < len; i++) *nonfinite += abs_bits(x[i]) > MAX_FINITE;
        return NAN;
    }
    float absmax;
    memcpy(&absmax, &a, 4);
    return absmax / (float)qmax;
}

static size_t quant8_blocks(const quant_job *job, size_t b0, size_t b1)
{
    size_t bad = 0;
    int8_t *q = job->q;
    for (size_t b = b0; b < b1; b++) {
        size_t lo = b * job->block, len = block_len(job, b);
        float s = job->scales[b] = block_scale(job, job->x + lo, len, QMAX8, &bad);
        if (s > 0) /* not 0 (all zero, or underflowed) and not NaN */
            job->kern->quant8(job->x + lo, len, s, q + lo);
        else memset(q + lo, 0, len);
    }
    return bad;
}

/* A block that starts at an odd element puts that element in the high nibble of a byte whose low nibble
 * the previous block wrote (the same thread: chunks start at even elements). */
static size_t quant4_blocks(const quant_job *job, size_t b0, size_t b1)
{
    size_t bad = 0;
    uint8_t *q = job->q;
    for (size_t b = b0; b < b1; b++) {
        size_t lo = b * job->block, len = block_len(job, b);
        float s = job->scales[b] = block_scale(job, job->x + lo, len, QMAX4, &bad);
        int live = s > 0;
        if (lo & 1) {
            uint8_t hi = live ? nibble_of(job->x[lo], s) : 0;
            q[lo / 2] = (uint8_t)((q[lo / 2] & 0xf) | hi << 4);
            lo++, len--;
        }
        if (live) job->kern->quant4(job->x + lo, len, s, q + lo / 2);
        else memset(q + lo / 2, 0, (len + 1) / 2);
    }
    return bad;
}

static size_t dequant8_blocks(const quant_job *job, size_t b0, size_t b1)
{
    for (size_t b = b0; b < b1; b++) {
        size_t lo = b * job->block;
        job->kern->dequant8((const int8_t *)job->cq + lo, block_len(job, b), job->cscales[b], job->y + lo);
    }
    return 0;
}

static size_t dequant4_blocks(const quant_job *job, size_t b0, size_t b1)
{
    const uint8_t *q = job->cq;
    for (size_t b = b0; b < b1; b++) {
        size_t lo = b * job->block, len = block_len(job, b);
        float s = job->cscales[b];
        if (lo & 1) {
            job->y[lo] = (float)nibble_at(q, lo) * s;
            lo++, len--;
        }
        job->kern->dequant4(q + lo / 2, len, s, job->y + lo);
    }
    return 0;
}

static size_t dequant4_sum_blocks(const quant_job *job, size_t b0, size_t b1)
{
    for (size_t b = b0; b < b1; b++) {
        size_t lo = b * job->block, len = block_len(job, b);
        if (lo & 1) {
            job->y[lo] = sum_one(&job->sum, b, lo, job->y[lo]);
            lo++, len--;
        }
        job->kern->dequant4_sum(&job->sum, b, lo, len, job->y);
    }
    return 0;
}

/* Runs fn over all blocks, in chunks of about CHUNK_ELEMS elements on the OpenMP threads. A chunk holds an
 * even number of blocks, so it starts at an even element and no int4 byte is shared between threads. */
static size_t run_blocks(blocks_fn *fn, const quant_job *job)
{
    size_t nb = zt_quant_nblocks(job->n, job->block);
    size_t per = CHUNK_ELEMS / job->block + 1;
    per += per & 1;
    size_t chunks = nb / per + (nb % per != 0);
    if (chunks < 4 || omp_in_parallel()) return fn(job, 0, nb);
    size_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
    for (size_t c = 0; c < chunks; c++) bad += fn(job, c * per, nb - c * per < per ? nb : (c + 1) * per);
    return bad;
}

size_t zt_quant8(const float *x, size_t n, size_t block, int8_t *q, float *scales)
{
    quant_job job = {.kern = pick_kernels(), .n = n, .block = block, .x = x, .q = q, .scales = scales};
    return run_blocks(quant8_blocks, &job);
}

void zt_dequant8(const int8_t *q, const float *scales, size_t n, size_t block, float *y)
{
    quant_job job = {.kern = pick_kernels(), .n = n, .block = block, .cq = q, .cscales = scales, .y = y};
    run_blocks(dequant8_blocks, &job);
}

size_t zt_quant4(const float *x, size_t n, size_t block, uint8_t *q, float *scales)
{
    quant_job job = {.kern = pick_kernels(), .n = n, .block = block, .x = x, .q = q, .scales = scales};
    return run_blocks(quant4_blocks, &job);
}

void zt_dequant4(const uint8_t *q, const float *scales, size_t n, size_t block, float *y)
{
    quant_job job = {.kern = pick_kernels(), .n = n, .block = block, .cq = q, .cscales = scales, .y = y};
    run_blocks(dequant4_blocks, &job);
}

void zt_dequant4_sum(const uint8_t *const *q, const float *const *scales, int k, size_t n, size_t block, float *y,
                     int accumulate)
{
    ZT_ASSERT(k >= 0);
    if (k == 0) {
        if (!accumulate) memset(y, 0, n * sizeof *y);
        return;
    }
    quant_job job = {.kern = pick_kernels(),
                     .n = n,
                     .block = block,
                     .y = y,
                     .sum = {.q = q, .scales = scales, .k = k, .accumulate = accumulate}};
    run_blocks(dequant4_sum_blocks, &job);
}

/* Every entry of the CUDA backend (but alloc and free, used throughout) against the CPU backend
 * on the same random inputs. Outputs start from the same random contents on both sides, so an
 * entry that accumulates where it should write (or the reverse) shows up. Each output prints
 *
 *     op  case  nmse  tol  ok|FAIL
 *
 * with nmse = Σ(cuda - cpu)² / Σ cpu² over the finite elements; NaN and ±Inf must sit at the
 * same places. Bitwise checks print the count of differing bytes and "bitwise" instead.
 * Tolerances: fp32 element-wise ops, gemm and short sums 1e-10 (rounding and exp differences give
 * ~1e-13); gemm_bf16 and the long fp32 column sums (rmsnorm dw, bias db) 1e-8; attention 1e-9
 * (online softmax against the CPU's two passes); copies (those on the copy stream too), to_bf16 and adamw bitwise,
 * sumsq relative 1e-12. Every device buffer has 256 bytes of 0xA5 on each side, checked after
 * each case. Exits 77 (skipped) without a usable GPU.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/backend/backend.h"
#include "lib/core/dtype.h"
#include "lib/core/rng.h"
#include "tests/unit/test.h"

static zt_backend *cpu, *gpu;
static zt_rng rng;
static char case_name[128];

/* --- buffers: one allocation per side with the same contents, freed by case_end() --- */

enum { GUARD = 256, MAX_BUFS = 64 };
static unsigned char guard_pattern[GUARD];

typedef struct {
    void *cpu, *gpu;
    size_t bytes;
} buf;

static void *host_bufs[MAX_BUFS];
static int n_host;
static unsigned char *gpu_bufs[MAX_BUFS]; /* the allocation: guard, bytes, guard */
static size_t gpu_bytes[MAX_BUFS];
static int n_gpu;

static void *host_alloc(size_t bytes)
{
    ZT_ASSERT(n_host < MAX_BUFS);
    void *p = malloc(bytes ? bytes : 1);
    ZT_ASSERT(p);
    host_bufs[n_host++] = p;
    return p;
}

static buf buf_of(const void *init, size_t bytes)
{
    ZT_ASSERT(n_gpu < MAX_BUFS);
    unsigned char *base = gpu->alloc(gpu, bytes + 2 * GUARD);
    ZT_ASSERT(base);
    gpu->upload(gpu, base, guard_pattern, GUARD);
    gpu->upload(gpu, base + GUARD, init, bytes);
    gpu->upload(gpu, base + GUARD + bytes, guard_pattern, GUARD);
    gpu_bufs[n_gpu] = base, gpu_bytes[n_gpu++] = bytes;
    buf b = {host_alloc(bytes), base + GUARD, bytes};
    memcpy(b.cpu, init, bytes);
    return b;
}

static double uniform(void) { return 2 * zt_rng_uniform(&rng) - 1; }

static float *host_floats(size_t n, double scale)
{
    float *x = host_alloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * uniform());
    return x;
}

static buf buf_floats(size_t n, double scale) { return buf_of(host_floats(n, scale), n * sizeof(float)); }

static buf buf_bytes(size_t bytes)
{
    unsigned char *x = host_alloc(bytes);
    for (size_t i = 0; i < bytes; i++) x[i] = (unsigned char)zt_rng_below(&rng, 256);
    return buf_of(x, bytes);
}

static buf buf_doubles(size_t n)
{
    double *x = host_alloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = uniform();
    return buf_of(x, n * sizeof *x);
}

static int32_t *host_ids(size_t n, int below)
{
    int32_t *x = host_alloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (int32_t)zt_rng_below(&rng, (uint64_t)below);
    return x;
}

static buf buf_bf16(const float *x, size_t n)
{
    uint16_t *b = host_alloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) b[i] = zt_f32_to_bf16(x[i]);
    return buf_of(b, n * sizeof *b);
}

/* The CPU's contents copied over the GPU's (to feed both sides the same intermediate). */
static void mirror(buf b) { gpu->upload(gpu, b.gpu, b.cpu, b.bytes); }

/* Checks the guards of every GPU buffer of the case, then frees everything. */
static void case_end(void)
{
    unsigned char seen[GUARD];
    for (int i = 0; i < n_gpu; i++) {
        for (int side = 0; side < 2; side++) {
            gpu->download(gpu, seen, gpu_bufs[i] + (side ? GUARD + gpu_bytes[i] : 0), GUARD);
            CHECK_MSG(!memcmp(seen, guard_pattern, GUARD), "%s: buffer %d (%zu bytes): guard %s it overwritten",
                      case_name, i, gpu_bytes[i], side ? "after" : "before");
        }
        gpu->free(gpu, gpu_bufs[i]);
    }
    for (int i = 0; i < n_host; i++) free(host_bufs[i]);
    n_gpu = n_host = 0;
}

static void set_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_case(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(case_name, sizeof case_name, fmt, ap);
    va_end(ap);
}

/* Runs one backend entry on the CPU, then on the GPU; S(b) is buffer b on the side running. */
#define BOTH(entry, ...)                                                                                               \
    do {                                                                                                               \
        for (int side_ = 0; side_ < 2; side_++) {                                                                      \
            zt_backend *be_ = side_ ? gpu : cpu;                                                                       \
            be_->entry(be_, __VA_ARGS__);                                                                              \
        }                                                                                                              \
    } while (0)
#define S(b) (side_ ? (b).gpu : (b).cpu)
#define SF(b, offset) ((float *)S(b) + (offset))

/* --- comparison --- */

typedef enum { AS_F32, AS_F64, AS_BYTES } kind;

static int fp_class(double x) { return isnan(x) ? 1 : isinf(x) ? (x > 0 ? 2 : 3) : 0; }

static void report(const char *what, int ok)
{
    CHECK_MSG(ok, "%s %s", what, case_name);
    fflush(stdout);
}

static void expect(const char *what, buf b, kind k, double tol)
{
    unsigned char *got = host_alloc(b.bytes);
    gpu->download(gpu, got, b.gpu, b.bytes);
    if (k == AS_BYTES) {
        const unsigned char *want = b.cpu;
        size_t diff = 0, first = 0;
        for (size_t i = 0; i < b.bytes; i++)
            if (want[i] != got[i] && !diff++) first = i;
        printf("%-22s %-52s %10zu %9s %s\n", what, case_name, diff, "bitwise", diff ? "FAIL" : "ok");
        if (diff) printf("    first at byte %zu: cpu %02x cuda %02x\n", first, want[first], got[first]);
        report(what, !diff);
        return;
    }
    size_t size = k == AS_F64 ? sizeof(double) : sizeof(float), n = b.bytes / size, worst = 0, nclass = 0,
           first_class = 0;
    double err = 0, ref = 0, worst_diff = -1;
    for (size_t i = 0; i < n; i++) {
        double w = k == AS_F64 ? ((const double *)b.cpu)[i] : ((const float *)b.cpu)[i];
        double g = k == AS_F64 ? ((const double *)got)[i] : ((const float *)got)[i];
        if (fp_class(w) != fp_class(g) && !nclass++) first_class = i;
        if (fp_class(w) || fp_class(g)) continue;
        err += (g - w) * (g - w), ref += w * w;
        if (fabs(g - w) > worst_diff) worst_diff = fabs(g - w), worst = i;
    }
    double nmse = err / fmax(ref, 1e-30);
    int ok = nmse <= tol && !nclass;
    printf("%-22s %-52s %10.3e %9.1e %s\n", what, case_name, nmse, tol, ok ? "ok" : "FAIL");
    if (!ok && n) {
        size_t at = nclass ? first_class : worst;
        double w = k == AS_F64 ? ((const double *)b.cpu)[at] : ((const float *)b.cpu)[at];
        double g = k == AS_F64 ? ((const double *)got)[at] : ((const float *)got)[at];
        printf("    %zu of %zu elements differ in NaN/Inf; element %zu: cpu %.9g cuda %.9g\n", nclass, n, at, w, g);
    }
    report(what, ok);
}

/* b16, an entry's bf16 copy of its fp32 output b32: on each side the copy is that side's output
 * rounded as to_bf16 rounds, bit for bit (expect compares the outputs themselves) */
static void expect_bf16_copy(const char *what, buf b16, buf b32)
{
    size_t n = b16.bytes / sizeof(uint16_t), diff = 0;
    ZT_ASSERT(b32.bytes == n * sizeof(float));
    float *y = host_alloc(b32.bytes);
    uint16_t *y16 = host_alloc(b16.bytes);
    gpu->download(gpu, y, b32.gpu, b32.bytes);
    gpu->download(gpu, y16, b16.gpu, b16.bytes);
    for (size_t i = 0; i < n; i++) {
        diff += y16[i] != zt_f32_to_bf16(y[i]);
        diff += ((const uint16_t *)b16.cpu)[i] != zt_f32_to_bf16(((const float *)b32.cpu)[i]);
    }
    printf("%-22s %-52s %10zu %9s %s\n", what, case_name, diff, "bitwise", diff ? "FAIL" : "ok");
    report(what, !diff);
}

/* --- memory entries --- */

static void test_memory(void)
{
    const size_t bytes = 3 * 65536 + 123;
    set_case("bytes=%zu", bytes);
    buf b = buf_bytes(bytes), patch = buf_bytes(777);
    /* discard gives whole pages back on the CPU: that side must be the CPU backend's own memory */
    unsigned char *host = b.cpu;
    b.cpu = cpu->alloc(cpu, bytes);
    memcpy(b.cpu, host, bytes);
    BOTH(memset0, (char *)S(b) + 13, 1000);
    BOTH(discard, (char *)S(b) + 2001, 2 * 65536);
    BOTH(copy, (char *)S(b) + 140003, (char *)S(b) + 17, 9999);
    BOTH(upload, (char *)S(b) + 160001, patch.cpu, 777);
    cpu->sync(cpu), gpu->sync(gpu);
    expect("memset0/discard/copy", b, AS_BYTES, 0);
    cpu->free(cpu, b.cpu);
    buf fresh = {host_alloc(bytes), gpu->alloc(gpu, bytes), bytes};
    memset(fresh.cpu, 0, bytes);
    expect("alloc (zeroed)", fresh, AS_BYTES, 0);
    gpu->free(gpu, fresh.gpu);
    case_end();
}

/* upload_start, fence_use, download_start, fence_wait and discard/populate cycles over the same
 * ranges (granules released while a copy still reads them, taken back, pooled, mapped elsewhere):
 * each cycle's downloaded values and the array at the end bitwise the CPU backend's. */
static void test_copies(void)
{
    const size_t n = 7000000, len = 3000001; /* 28 MB: 14 granules of 2 MiB; ranges cut granules */
    set_case("n=%zu, 40 cycles of %zu", n, len);
    buf b = buf_floats(n, 1);
    float *src[2], *dst[2];
    for (int side = 0; side < 2; side++) {
        zt_backend *be = side ? gpu : cpu;
        src[side] = be->host_alloc(be, (len + 64) * sizeof(float));
        dst[side] = be->host_alloc(be, len * sizeof(float));
        ZT_ASSERT(src[side] && dst[side]);
    }
    for (size_t i = 0; i < len + 64; i++) src[0][i] = src[1][i] = (float)uniform();
    size_t diff = 0;
    for (int c = 0; c < 40; c++) {
        size_t lo = (size_t)(c % 3) * 1000003 + (size_t)(c % 5) * 11, from = (size_t)c;
        for (int side = 0; side < 2; side++) {
            zt_backend *be = side ? gpu : cpu;
            float *x = (float *)(side ? b.gpu : b.cpu) + lo;
            CHECK(be->populate(be, x, len * sizeof(float)) == ZT_OK);
            be->fence_use(be, be->upload_start(be, x, src[side] + from, len * sizeof(float)));
            be->scale(be, x, len, 2);
            uint64_t down = be->download_start(be, dst[side], x, len * sizeof(float));
            be->discard(be, x, len * sizeof(float)); /* the download still reads it */
            be->fence_wait(be, down);
        }
        diff += memcmp(dst[0], dst[1], len * sizeof(float)) != 0;
    }
    BOTH(populate, S(b), n * sizeof(float));
    printf("%-22s %-52s %10zu %9s %s\n", "upload/download_start", case_name, diff, "bitwise", diff ? "FAIL" : "ok");
    report("upload/download_start", !diff);
    expect("discard/populate", b, AS_BYTES, 0);
    for (int side = 0; side < 2; side++) {
        zt_backend *be = side ? gpu : cpu;
        be->host_free(be, src[side]);
        be->host_free(be, dst[side]);
    }
    case_end();
}

/* --- GEMM --- */

typedef struct {
    int ta, tb, M, N, K, pad;
    float alpha, beta;
    int poison; /* 1: a NaN in op(A) at (M/2, K/2); 2: C all NaN (with beta 0 it must not be read) */
    int shift;  /* elements between each operand and a 256-byte boundary */
} gemm_shape;

static void gemm_case(int bf16, gemm_shape g)
{
    int lda = (g.ta ? g.M : g.K) + g.pad, ldb = (g.tb ? g.K : g.N) + g.pad, ldc = g.N + g.pad, s = g.shift;
    size_t na = (size_t)(g.ta ? g.K : g.M) * lda, nb = (size_t)(g.tb ? g.N : g.K) * ldb, nc = (size_t)g.M * ldc;
    set_case("ta=%d tb=%d M=%d N=%d K=%d pad=%d a=%g b=%g%s%s", g.ta, g.tb, g.M, g.N, g.K, g.pad, g.alpha, g.beta,
             g.poison == 1   ? " nan(A)"
             : g.poison == 2 ? " nan(C)"
                             : "",
             s ? " unaligned" : "");
    float *A = host_floats(na + s, 1), *B = host_floats(nb + s, 1), *C = host_floats(nc + s, 1);
    if (g.poison == 1 && g.M && g.K)
        A[s + (g.ta ? (size_t)(g.K / 2) * lda + g.M / 2 : (size_t)(g.M / 2) * lda + g.K / 2)] = NAN;
    if (g.poison == 2)
        for (size_t i = 0; i < nc + s; i++) C[i] = NAN;
    buf c = buf_of(C, (nc + s) * sizeof(float));
    if (bf16) {
        buf a = buf_bf16(A, na + s), b = buf_bf16(B, nb + s);
        BOTH(gemm_bf16, g.ta, g.tb, g.M, g.N, g.K, g.alpha, (uint16_t *)S(a) + s, lda, (uint16_t *)S(b) + s, ldb,
             g.beta, SF(c, s), ldc);
    } else {
        buf a = buf_of(A, (na + s) * sizeof(float)), b = buf_of(B, (nb + s) * sizeof(float));
        BOTH(gemm, g.ta, g.tb, g.M, g.N, g.K, g.alpha, SF(a, s), lda, SF(b, s), ldb, g.beta, SF(c, s), ldc);
    }
    expect(bf16 ? "gemm_bf16" : "gemm", c, AS_F32, bf16 ? 1e-8 : 1e-10);
    case_end();
}

static void gemm_all(int bf16)
{
    static const int shapes[][4] = {{1, 1, 1, 0},       {7, 5, 3, 1},    {17, 33, 65, 3},    {64, 64, 64, 0},
                                    {129, 257, 511, 5}, {300, 70, 1, 2}, {256, 768, 1024, 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int t = 0; t < 4; t++)
            for (int beta = 0; beta < 2; beta++)
                gemm_case(bf16, (gemm_shape){t >> 1, t & 1, shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3],
                                             beta ? 0.75f : 1.0f, (float)beta, 0, 0});
    /* BLAS corners: K = 0 and alpha = 0 only scale C; M = 0 does nothing; NaN in A, in C with beta 0 */
    gemm_shape corners[] = {{0, 0, 9, 11, 0, 2, 1, 0, 0, 0},     {1, 0, 9, 11, 0, 2, 1, 0.5f, 0, 0},
                            {0, 1, 9, 11, 13, 2, 0, 0.5f, 0, 0}, {0, 0, 0, 11, 13, 2, 1, 1, 0, 0},
                            {0, 1, 33, 17, 40, 1, 1, 0, 1, 0},   {1, 0, 33, 17, 40, 1, 1, 1, 1, 0},
                            {1, 1, 33, 17, 40, 1, 1, 0, 2, 0}};
    for (size_t i = 0; i < sizeof corners / sizeof corners[0]; i++) gemm_case(bf16, corners[i]);
}

static void test_gemm(void) { gemm_all(0); }
static void test_gemm_bf16(void) { gemm_all(1); }

/* Operands one element off a 256-byte boundary (views into larger buffers). Last: if cuBLASLt
 * has no algorithm for such pointers the run aborts here, after everything else has printed. */
static void test_gemm_unaligned(void)
{
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (int t = 0; t < 4; t++) gemm_case(bf16, (gemm_shape){t >> 1, t & 1, 67, 129, 96, 0, 1, 1, 0, 1});
}

static void test_to_bf16(void)
{
    static const uint32_t special[] = {0x7fc00000, 0xffc00001, 0x7f800001, 0x7fbfffff, 0x7f800000, 0xff800000,
                                       0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x7f7fffff, 0xff7fffff,
                                       0x3f808000, 0x3f818000, 0x3f80ffff, 0x3f807fff, 0x7f7f8000, 0x00008000};
    static const size_t sizes[] = {1, 7, 100003};
    for (size_t c = 0; c < 3; c++) {
        size_t n = sizes[c];
        set_case("n=%zu", n);
        float *x = host_floats(n, 1);
        for (size_t i = 0; i < n; i++) {
            uint32_t u = i < sizeof special / sizeof special[0] ? special[i] : (uint32_t)zt_rng_next_u64(&rng);
            if (i % 2 || i < sizeof special / sizeof special[0]) memcpy(&x[i], &u, 4); /* half random bit patterns */
        }
        buf src = buf_of(x, n * sizeof(float)), dst = buf_bytes(n * sizeof(uint16_t));
        BOTH(to_bf16, S(dst), S(src), n);
        expect("to_bf16", dst, AS_BYTES, 0);
        if (n > 1) { /* views one element in: not aligned for the four-at-a-time kernel */
            BOTH(to_bf16, (uint16_t *)S(dst) + 1, SF(src, 1), n - 1);
            expect("to_bf16 (view)", dst, AS_BYTES, 0);
        }
        case_end();
    }
}

/* --- row ops --- */

static void test_embedding(void)
{
    /* N, C, V: ids repeat; the table holds rows [v0, v0 + nv) (a tile of the vocabulary) */
    static const int cases[][5] = {{1, 1, 1, 0, 1}, {300, 193, 50, 0, 50}, {64, 4096, 7, 0, 7}, {300, 193, 50, 10, 17}};
    for (size_t c = 0; c < 4; c++) {
        int N = cases[c][0], C = cases[c][1], V = cases[c][2], v0 = cases[c][3], nv = cases[c][4];
        set_case("N=%d C=%d V=%d rows [%d, %d)", N, C, V, v0, v0 + nv);
        buf ids = buf_of(host_ids(N, V), N * sizeof(int32_t)), table = buf_floats((size_t)nv * C, 1);
        buf out = buf_floats((size_t)N * C, 1), dtable = buf_floats((size_t)nv * C, 1);
        buf dout = buf_floats((size_t)N * C, 1);
        BOTH(embedding_forward, S(out), S(ids), S(table), v0, nv, N, C);
        expect("embedding_fwd", out, AS_BYTES, 0);
        BOTH(embedding_backward, S(dtable), S(dout), S(ids), v0, nv, N, C);
        expect("embedding_bwd", dtable, AS_F32, 1e-10);
        case_end();
    }
}

/* with16: y's bf16 copy too */
static void rmsnorm_case(int N, int C, int poison, float w_offset, int with16)
{
    set_case("N=%d C=%d w_offset=%g%s%s", N, C, w_offset, poison ? " nan(x)" : "", with16 ? " y16" : "");
    float *xs = host_floats((size_t)N * C, 2);
    if (poison) xs[(size_t)(N / 2) * C + C / 3] = NAN;
    buf x = buf_of(xs, (size_t)N * C * sizeof(float)), w = buf_floats(C, 1.5);
    buf y = buf_floats((size_t)N * C, 1), rstd = buf_floats(N, 1), y16 = buf_bytes((size_t)N * C * sizeof(uint16_t));
    BOTH(rmsnorm_forward, S(y), with16 ? S(y16) : NULL, S(rstd), S(x), S(w), w_offset, N, C, 1e-5);
    expect("rmsnorm_fwd.y", y, AS_F32, 1e-10);
    if (with16) expect_bf16_copy("rmsnorm_fwd.y16", y16, y);
    else expect("rmsnorm_fwd.y16 kept", y16, AS_BYTES, 0);
    expect("rmsnorm_fwd.rstd", rstd, AS_F32, 1e-10);
    mirror(rstd);
    buf dy = buf_floats((size_t)N * C, 1), dx = buf_floats((size_t)N * C, 1), dw = buf_floats(C, 1);
    BOTH(rmsnorm_backward, S(dx), S(dw), S(dy), S(x), S(w), w_offset, S(rstd), N, C);
    expect("rmsnorm_bwd.dx", dx, AS_F32, 1e-10);
    expect("rmsnorm_bwd.dw", dw, AS_F32, 1e-8);
    case_end();
}

static void test_rmsnorm(void)
{
    static const int cases[][2] = {{1, 1}, {37, 64}, {257, 1001}, {64, 4096}};
    for (size_t c = 0; c < 4; c++) rmsnorm_case(cases[c][0], cases[c][1], 0, 0, c % 2);
    rmsnorm_case(37, 1001, 1, 0, 1);
    rmsnorm_case(257, 1001, 0, 1, 1); /* Gemma's scale 1 + w */
}

/* The q and k norms on qkv rows: the q rows, then the k rows (an offset into the rows), each
 * with its own weight; the v heads must stay as they were. dw sums N·heads rows: 1e-8. Qwen3's
 * heads of 64 and 128, Gemma 3's of 256 with the scale 1 + w, OLMo 2's one row over the whole
 * q (8 heads of 64) and the whole k (4 heads of 64). */
static void test_head_rmsnorm(void)
{
    static const struct {
        int qh, qd, kh, kd;
        float off;
    } cases[] = {{4, 64, 2, 64, 0}, {4, 128, 2, 128, 0}, {4, 256, 2, 256, 1}, {1, 512, 1, 256, 0}};
    const int N = 50;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int qh = cases[c].qh, qd = cases[c].qd, kh = cases[c].kh, kd = cases[c].kd, q = qh * qd, k = kh * kd;
        int stride = q + 2 * k;
        float off = cases[c].off;
        set_case("N=%d q %d×%d k %d×%d w_offset=%g", N, qh, qd, kh, kd, off);
        buf x = buf_floats((size_t)N * stride, 2), w = buf_floats((size_t)qd + kd, 1.5);
        buf xin = buf_floats((size_t)N * (q + k), 1), rstd = buf_floats((size_t)N * (qh + kh), 1);
        BOTH(head_rmsnorm_forward, S(x), S(xin), S(rstd), S(w), off, N, stride, qh, qd, 1e-6);
        BOTH(head_rmsnorm_forward, SF(x, q), SF(xin, (size_t)N * q), SF(rstd, N * qh), SF(w, qd), off, N, stride, kh,
             kd, 1e-6);
        expect("head_rmsnorm_fwd.x", x, AS_F32, 1e-10);
        expect("head_rmsnorm_fwd.xin", xin, AS_BYTES, 0);
        expect("head_rmsnorm_fwd.rstd", rstd, AS_F32, 1e-10);
        mirror(rstd);
        buf dx = buf_floats((size_t)N * stride, 1), dw = buf_floats((size_t)qd + kd, 1);
        BOTH(head_rmsnorm_backward, S(dx), S(dw), S(xin), S(w), off, S(rstd), N, stride, qh, qd);
        BOTH(head_rmsnorm_backward, SF(dx, q), SF(dw, qd), SF(xin, (size_t)N * q), SF(w, qd), off, SF(rstd, N * qh), N,
             stride, kh, kd);
        expect("head_rmsnorm_bwd.dx", dx, AS_F32, 1e-10);
        expect("head_rmsnorm_bwd.dw", dw, AS_F32, 1e-8);
        case_end();
    }
}

/* whole heads, and Phi-3's partial rotary (the first R of D elements: 3/4 of 128, 3/4 of 96);
 * GLM's interleaved pairs on half of 128 and 64 */
static void test_rope(void)
{
    static const int Ds[][3] = {{16, 16, 0}, {64, 64, 0},  {128, 128, 0}, {128, 96, 0},
                                {96, 72, 0}, {128, 64, 1}, {64, 32, 1}};
    const int N = 50, H = 4, KV = 2, max_pos = 64;
    for (size_t c = 0; c < sizeof Ds / sizeof Ds[0]; c++)
        for (int inverse = 0; inverse < 2; inverse++) {
            int D = Ds[c][0], R = Ds[c][1], il = Ds[c][2], half = R / 2, stride = (H + 2 * KV) * D;
            set_case("N=%d heads=%d of %d D=%d R=%d%s", N, H + KV, H + 2 * KV, D, R, il ? " interleaved" : "");
            size_t table_bytes = (size_t)max_pos * half * sizeof(float);
            float *cs = host_alloc(table_bytes), *sn = host_alloc(table_bytes);
            for (int p = 0; p < max_pos; p++)
                for (int j = 0; j < half; j++) {
                    double theta = p * pow(10000.0, -2.0 * j / R);
                    cs[p * half + j] = (float)cos(theta), sn[p * half + j] = (float)sin(theta);
                }
            buf x = buf_floats((size_t)N * stride, 1), pos = buf_of(host_ids(N, max_pos), N * sizeof(int32_t));
            buf cos_t = buf_of(cs, table_bytes), sin_t = buf_of(sn, table_bytes);
            BOTH(rope, S(x), N, stride, H + KV, D, R, il, S(pos), S(cos_t), S(sin_t), inverse);
            expect(inverse ? "rope_inverse" : "rope", x, AS_F32, 1e-10);
            case_end();
        }
}

/* SwiGLU, or Gemma's GeGLU (gelu's tanh form, or its exact erf form: exact 1); the bf16 copies of
 * h and dgateup in all but the first case */
static void check_glu(int geglu, int exact)
{
    static const int cases[][2] = {{1, 1}, {77, 1001}, {16, 4096}};
    for (size_t c = 0; c < 3; c++) {
        int N = cases[c][0], F = cases[c][1], with16 = c > 0;
        set_case("N=%d F=%d%s%s", N, F, exact ? " exact" : "", with16 ? " h16 dgateup16" : "");
        buf gateup = buf_floats((size_t)N * 2 * F, 4), h = buf_floats((size_t)N * F, 1);
        buf dh = buf_floats((size_t)N * F, 1), dgateup = buf_floats((size_t)N * 2 * F, 1);
        buf h16 = buf_bytes((size_t)N * F * sizeof(uint16_t)), dgateup16 = buf_bytes((size_t)N * 2 * F * sizeof(uint16_t));
        if (geglu) BOTH(geglu_forward, S(h), with16 ? S(h16) : NULL, S(gateup), N, F, exact);
        else BOTH(swiglu_forward, S(h), with16 ? S(h16) : NULL, S(gateup), N, F);
        expect(geglu ? "geglu_fwd" : "swiglu_fwd", h, AS_F32, 1e-10);
        if (geglu) BOTH(geglu_backward, S(dgateup), with16 ? S(dgateup16) : NULL, S(dh), S(gateup), N, F, exact);
        else BOTH(swiglu_backward, S(dgateup), with16 ? S(dgateup16) : NULL, S(dh), S(gateup), N, F);
        expect(geglu ? "geglu_bwd" : "swiglu_bwd", dgateup, AS_F32, 1e-10);
        if (with16) {
            expect_bf16_copy(geglu ? "geglu_fwd.h16" : "swiglu_fwd.h16", h16, h);
            expect_bf16_copy(geglu ? "geglu_bwd.dgateup16" : "swiglu_bwd.dgateup16", dgateup16, dgateup);
        } else {
            expect("glu h16, dgateup16 kept", h16, AS_BYTES, 0);
            expect("glu dgateup16 kept", dgateup16, AS_BYTES, 0);
        }
        case_end();
    }
}

static void test_swiglu(void) { check_glu(0, 0); }
static void test_geglu(void) { check_glu(1, 0); }
static void test_geglu_exact(void) { check_glu(1, 1); } /* Gemma 1's hidden_act "gelu" */

/* soft-capping (values up to 40 against a cap of 30), scaling, adding and adding noise:
 * elementwise, the same fp32 operations but for tanhf's last bit */
static void test_elementwise(void)
{
    const size_t n = 100003;
    set_case("n=%zu", n);
    buf x = buf_floats(n, 40), y = buf_floats(n, 1), dx = buf_floats(n, 1);
    BOTH(softcap_forward, S(x), n, 30.0);
    expect("softcap_fwd", x, AS_F32, 1e-12);
    mirror(x);
    BOTH(softcap_backward, S(dx), S(x), n, 30.0);
    expect("softcap_bwd", dx, AS_F32, 1e-12);
    BOTH(scale, S(y), n, 48.0f);
    expect("scale", y, AS_BYTES, 0);
    BOTH(add, S(y), S(dx), n);
    expect("add", y, AS_BYTES, 0);
    BOTH(add_uniform_noise, S(y), n, 0x9e3779b97f4a7c15ull, 0.0123f); /* NEFTune's noise: the same draws */
    expect("add_uniform_noise", y, AS_BYTES, 0);
    uint64_t drop_below = (uint64_t)(0.1 * 9007199254740992.0); /* LoRA's dropout: the same masks */
    BOTH(dropout, S(dx), S(y), n, 0x5bd1e995ull, drop_below, 1 / 0.9f, 0);
    expect("dropout", dx, AS_BYTES, 0);
    BOTH(dropout, S(dx), S(y), n, 0x5bd1e996ull, drop_below, 1 / 0.9f, 1);
    expect("dropout (accumulated)", dx, AS_BYTES, 0);
    case_end();
}

static void test_bias(void)
{
    static const int cases[][2] = {{1, 1}, {333, 517}, {64, 4096}};
    for (size_t c = 0; c < 3; c++) {
        int N = cases[c][0], M = cases[c][1];
        set_case("N=%d M=%d", N, M);
        buf y = buf_floats((size_t)N * M, 1), b = buf_floats(M, 1), dy = buf_floats((size_t)N * M, 1);
        buf db = buf_floats(M, 1);
        BOTH(bias_forward, S(y), S(b), N, M);
        expect("bias_fwd", y, AS_F32, 1e-10);
        BOTH(bias_backward, S(db), S(dy), N, M);
        expect("bias_bwd", db, AS_F32, 1e-8);
        case_end();
    }
}

/* --- attention --- */

/* Positions of B rows of T tokens, each row packed with several documents (pos restarts at 0). */
static int32_t *doc_positions(int B, int T)
{
    int32_t *pos = host_alloc((size_t)B * T * sizeof *pos);
    for (int b = 0; b < B; b++)
        for (int t = 0, start = 0; t < T; t++) {
            if (t && zt_rng_below(&rng, (uint64_t)T / 4 + 1) == 0) start = t;
            pos[b * T + t] = t - start;
        }
    return pos;
}

static void attention_case(int T, int KV, int D, int window, double scale, double softcap)
{
    const int B = 2, H = 4, stride = (H + 2 * KV) * D;
    size_t nqkv = (size_t)B * T * stride, nout = (size_t)B * T * H * D, nlse = (size_t)B * H * T;
    set_case("B=%d T=%d H=%d KV=%d D=%d window=%d scale=%.3g softcap=%g", B, T, H, KV, D, window, scale, softcap);
    buf qkv = buf_floats(nqkv, 1.5), pos = buf_of(doc_positions(B, T), (size_t)B * T * sizeof(int32_t));
    buf out = buf_floats(nout, 1), lse = buf_floats(nlse, 1);
    BOTH(attention_forward, S(out), S(lse), S(qkv), S(pos), B, T, H, KV, D, window, scale, softcap);
    expect("attention_fwd.out", out, AS_F32, 1e-9);
    expect("attention_fwd.lse", lse, AS_F32, 1e-9);
    mirror(out), mirror(lse); /* backward checked on its own: the same forward results on both sides */
    buf dout = buf_floats(nout, 1), dqkv = buf_floats(nqkv, 1);
    BOTH(attention_backward, S(dqkv), S(dout), S(qkv), S(out), S(lse), S(pos), B, T, H, KV, D, window, scale, softcap);
    expect("attention_bwd.dqkv", dqkv, AS_F32, 1e-9);
    case_end();
}

static void test_attention(void)
{
    static const int Ts[] = {1, 7, 64, 200}, KVs[] = {1, 2, 4}, Ds[] = {16, 32, 64, 128};
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < 3; k++)
            for (int d = 0; d < 4; d++)
                for (int window = 0; window <= 5; window += 5)
                    attention_case(Ts[t], KVs[k], Ds[d], window, 1 / sqrt(Ds[d]), 0);
    /* Gemma 2: a scale other than head_dim's and scores soft-capped (a cap of 2 bends them) */
    for (int t = 0; t < 4; t++) attention_case(Ts[t], 2, 64, 5, 0.2, 2.0);
    attention_case(200, 4, 256, 0, 1 / sqrt(224.0), 2.0);
}

/* n new queries at positions p0.. over a cache holding p0 + n rows, laid out like qkv rows. */
static void test_attention_decode(void)
{
    static const int shapes[][2] = {{1, 16}, {2, 64}, {4, 128}}; /* KV, D */
    const int H = 4, p0 = 37;
    for (int n = 1; n <= 5; n += 4)
        for (int s = 0; s < 3; s++)
            for (int window = 0; window <= 5; window += 5) {
                int KV = shapes[s][0], D = shapes[s][1], stride = (H + 2 * KV) * D;
                double softcap = window ? 2.0 : 0; /* Gemma 2's soft-capping with the window */
                set_case("n=%d p0=%d H=%d KV=%d D=%d window=%d softcap=%g", n, p0, H, KV, D, window, softcap);
                buf qkv = buf_floats((size_t)(p0 + n) * stride, 1.5), out = buf_floats((size_t)n * H * D, 1);
                BOTH(attention_decode, S(out), SF(qkv, (size_t)p0 * stride), stride, SF(qkv, H * D),
                     SF(qkv, (H + KV) * D), stride, n, p0, H, KV, D, window, 1 / sqrt(D), softcap);
                expect("attention_decode", out, AS_F32, 1e-9);
                case_end();
            }
}

/* --- loss and optimizer --- */

/* with16: cross_entropy_bf16, the gradient's bf16 copy too */
static void cross_entropy_case(int V, float grad_scale, int poison, int with16)
{
    const int n = 37;
    set_case("n=%d V=%d grad_scale=%g%s%s", n, V, grad_scale, poison ? " nan(logit)" : "", with16 ? " bf16" : "");
    int32_t *t = host_ids(n, V);
    for (int i = 0; i < n; i++)
        if (i == 1 || zt_rng_below(&rng, 4) == 0) t[i] = -100;
    float *l = host_floats((size_t)n * V, 4);
    if (poison) t[2] = 5, l[2 * (size_t)V + V / 2] = NAN;
    buf logits = buf_of(l, (size_t)n * V * sizeof(float)), targets = buf_of(t, n * sizeof(int32_t));
    buf loss = buf_doubles(n), g16 = buf_bytes((size_t)n * V * sizeof(uint16_t));
    if (with16) BOTH(cross_entropy_bf16, S(logits), S(loss), S(targets), n, V, grad_scale, S(g16));
    else BOTH(cross_entropy, S(logits), S(loss), S(targets), n, V, grad_scale);
    expect("cross_entropy.loss", loss, AS_F64, 1e-10);
    expect(grad_scale ? "cross_entropy.dlogits" : "cross_entropy.logits", logits, AS_F32, 1e-10);
    if (with16) expect_bf16_copy("cross_entropy.grad16", g16, logits);
    case_end();
}

static void test_cross_entropy(void)
{
    for (int v = 0; v < 2; v++)
        for (int g = 0; g < 2; g++) cross_entropy_case(v ? 32003 : 1000, g ? 0.5f : 0.0f, 0, 0);
    cross_entropy_case(1000, 0.5f, 1, 0);
    cross_entropy_case(1000, 0.0f, 1, 0);
    cross_entropy_case(32003, 0.5f, 0, 1); /* the bf16 model's head: ignored rows' copies zero too */
    cross_entropy_case(1000, 0.5f, 1, 1);
}

/* the per-row weights of preference and RL losses: a product per element, bitwise */
static void test_scale_rows(void)
{
    const int n = 37, V = 32003;
    set_case("n=%d V=%d", n, V);
    buf x = buf_floats((size_t)n * V, 4), scale = buf_floats(n, 2);
    BOTH(scale_rows, S(x), S(scale), n, V);
    expect("scale_rows", x, AS_BYTES, 0);
    case_end();
}

static void test_adamw(void)
{
    const size_t n = 100003;
    zt_adamw h = {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = 7};
    for (int decay = 0; decay < 2; decay++)
        for (int copy = 0; copy < 2; copy++) {
            set_case("n=%zu step=%ld decay=%d bf16=%d", n, h.step, decay, copy);
            float *vs = host_floats(n, 1e-4);
            for (size_t i = 0; i < n; i++) vs[i] = fabsf(vs[i]);
            buf param = buf_floats(n, 1), grad = buf_floats(n, 0.1), m = buf_floats(n, 1e-2);
            buf v = buf_of(vs, n * sizeof(float)), pb = buf_bytes(n * sizeof(uint16_t));
            BOTH(adamw, &h, S(param), S(grad), S(m), S(v), n, 0.37f, decay, copy ? S(pb) : NULL);
            expect("adamw.param", param, AS_BYTES, 0);
            expect("adamw.m", m, AS_BYTES, 0);
            expect("adamw.v", v, AS_BYTES, 0);
            expect("adamw.param_bf16", pb, AS_BYTES, 0);
            case_end();
        }
}

/* AdamW with 8-bit moments over the tables of blocks: whole ones, a tensor's short last one, the
 * two parts of blocks cut at a piece's start and end (held, their maxima in slots; the second
 * piece's bf16 copy elsewhere in the flat array), both pieces' constants; then the held blocks
 * finished from summed slots: bitwise */
static void test_adamw8(void)
{
    const size_t n = 868;
    set_case("n=%zu", n);
    zt_adamw h = {.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .step = 7};
    const zt_adamw8_piece piece[2] = {
        {.local = 0, .flat = 0, .n = 612, .lead = 0, .absmax = 0, .c = zt_adamw_consts_of(&h, 0.37f, 1)},
        {.local = 612, .flat = 619, .n = 256, .lead = 56, .absmax = 3, .c = zt_adamw_consts_of(&h, 0.37f, 0)}};
    const zt_adamw8_block whole[] = {{0, 0}, {0, 1}, {0, 2}};
    const zt_adamw8_cut cut[] = {{1, 0, {0, -1}}, {1, 1, {-1, 4}}};
    float *absmax = host_floats(10, 1e-2);
    for (int i = 0; i < 10; i++) absmax[i] = fabsf(absmax[i]) + 1e-3f;
    buf pieces = buf_of(piece, sizeof piece), blocks = buf_of(whole, sizeof whole), cuts = buf_of(cut, sizeof cut);
    buf param = buf_floats(n, 1), grad = buf_floats(n, 0.1), q1 = buf_bytes(n), q2 = buf_bytes(n);
    buf a1 = buf_of(absmax, 5 * sizeof(float)), a2 = buf_of(absmax + 5, 5 * sizeof(float));
    buf pb = buf_bytes((n + 7) * sizeof(uint16_t)), held = buf_floats(2 * 2 * ZT_ADAMW8_BLOCK, 0);
    buf slots = buf_floats(8, 0);
    BOTH(adamw8, S(pieces), S(blocks), 3, S(cuts), 2, S(param), S(grad), S(q1), S(q2), S(a1), S(a2), S(pb), S(held),
         S(slots));
    expect("adamw8.param", param, AS_BYTES, 0);
    expect("adamw8.param_bf16", pb, AS_BYTES, 0);
    expect("adamw8.q1", q1, AS_BYTES, 0);
    expect("adamw8.q2", q2, AS_BYTES, 0);
    expect("adamw8.a1", a1, AS_BYTES, 0);
    expect("adamw8.a2", a2, AS_BYTES, 0);
    expect("adamw8.held", held, AS_BYTES, 0);
    expect("adamw8.slots", slots, AS_BYTES, 0);
    /* the other ranks' parts' maxima summed in: larger or smaller than this rank's */
    float *sums = host_floats(8, 2e-2);
    for (int i = 0; i < 8; i++) sums[i] = fabsf(sums[i]);
    const zt_adamw8_release rel[] = {{612, 200, 3, 0, 0, 4}, {812, 56, 4, 1, 4, 2}};
    buf r = buf_of(rel, sizeof rel), summed = buf_of(sums, 8 * sizeof(float));
    BOTH(adamw8_finish, S(r), 2, S(q1), S(q2), S(a1), S(a2), S(held), S(summed));
    expect("adamw8_finish.q1", q1, AS_BYTES, 0);
    expect("adamw8_finish.q2", q2, AS_BYTES, 0);
    expect("adamw8_finish.a1", a1, AS_BYTES, 0);
    expect("adamw8_finish.a2", a2, AS_BYTES, 0);
    case_end();
}

/* DoRA: the row norms of W + s·B·A (double sums in another order: 1e-12), then on the CPU's
 * norms the outputs' scaling and the backward pass's parts, the same fp32 operations in the same
 * order (the magnitude gradient's sum over the rows too): bitwise */
static void test_dora(void)
{
    static const int cases[][3] = {{1, 1, 1}, {33, 517, 300}, {128, 1408, 512}}; /* N, out, in */
    for (size_t c = 0; c < 3; c++) {
        int N = cases[c][0], out = cases[c][1], in = cases[c][2], ldy = out + 3;
        set_case("N=%d out=%d in=%d", N, out, in);
        buf w = buf_floats((size_t)out * in, 1), norm = buf_floats(out, 1), M = buf_floats(out, 1);
        BOTH(row_norms, S(norm), S(w), out, in);
        expect("row_norms", norm, AS_F32, 1e-12);
        mirror(norm);
        buf y = buf_floats((size_t)N * ldy, 1), v = buf_floats((size_t)N * out, 1), bu = buf_floats((size_t)N * out, 1);
        BOTH(dora_forward, S(y), ldy, S(v), S(bu), S(M), S(norm), N, out);
        expect("dora_fwd", y, AS_BYTES, 0);
        buf gM = buf_floats(out, 1), de = buf_floats((size_t)N * out, 1), dy = buf_floats((size_t)N * ldy, 1);
        buf t = buf_floats((size_t)N * out, 1);
        BOTH(dora_backward, S(gM), S(de), S(t), S(dy), ldy, S(t), S(M), S(norm), N, out); /* dv over t, as lora.c */
        expect("dora_bwd.gM", gM, AS_BYTES, 0);
        expect("dora_bwd.de", de, AS_BYTES, 0);
        expect("dora_bwd.dv", t, AS_BYTES, 0);
        case_end();
    }
}

static void test_sumsq(void)
{
    static const size_t sizes[] = {0, 1, 4097, 1000003};
    for (size_t c = 0; c < 4; c++) {
        size_t n = sizes[c];
        set_case("n=%zu", n);
        buf x = buf_floats(n, 3);
        double want = cpu->sumsq(cpu, x.cpu, n), got = gpu->sumsq(gpu, x.gpu, n);
        double rel = fabs(got - want) / fmax(fabs(want), 1e-300);
        int ok = rel <= 1e-12;
        printf("%-22s %-52s %10.3e %9.1e %s\n", "sumsq (relative)", case_name, rel, 1e-12, ok ? "ok" : "FAIL");
        report("sumsq", ok);
        case_end();
    }
}

int main(void)
{
    zt_status st = zt_backend_cuda(&gpu);
    if (st) {
        printf("skipped: %s\n", zt_errmsg());
        return 77;
    }
    cpu = zt_backend_cpu();
    zt_rng_seed(&rng, 20240601, 0);
    memset(guard_pattern, 0xA5, sizeof guard_pattern);
    printf("%-22s %-52s %10s %9s %s\n", "op", "case", "nmse", "tol", "result");
    RUN(test_memory);
    RUN(test_copies);
    RUN(test_gemm);
    RUN(test_gemm_bf16);
    RUN(test_to_bf16);
    RUN(test_embedding);
    RUN(test_rmsnorm);
    RUN(test_head_rmsnorm);
    RUN(test_rope);
    RUN(test_swiglu);
    RUN(test_geglu);
    RUN(test_geglu_exact);
    RUN(test_elementwise);
    RUN(test_bias);
    RUN(test_attention);
    RUN(test_attention_decode);
    RUN(test_cross_entropy);
    RUN(test_scale_rows);
    RUN(test_adamw);
    RUN(test_adamw8);
    RUN(test_sumsq);
    RUN(test_dora);
    RUN(test_gemm_unaligned);
    return test_summary();
}

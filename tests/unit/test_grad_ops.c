/* Per-op checks in double precision: each backward kernel against central finite
 * differences of its forward kernel (loss = Σ r·output for a fixed random r), and
 * the forward kernels with index tricks (attention, rope) against naive loops. */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops.h"
#include "lib/core/rng.h"
#include "test.h"

static zt_rng rng;

static void fill(double *x, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) x[i] = scale * (2 * zt_rng_uniform(&rng) - 1);
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* forward(ctx) must compute ctx's output from its inputs; loss = r·out */
typedef void (*forward_fn)(void *ctx);

/* Worst |fd - analytic| / max(1e-2, |analytic|) over every element of x. Central differences
 * in double with a step of 1e-6: truncation h²/6·|f'''| ≈ 2e-13·|f'''|, rounding about
 * 2⁻⁵³·|loss|/h ≈ 1e-10·|loss|; against the floor 1e-2 both stay below 1e-7 for losses and
 * third derivatives up to 10 (these ops' inputs are of order 1), so a check at 1e-6 has a
 * margin of 10 and still catches any wrong term. The naive twins below (CHECK_NEAR 1e-12)
 * are the same double arithmetic in another order: a few dozen terms of order 1, within
 * 50·2⁻⁵³ ≈ 6e-15. */
static double fd_check(forward_fn f, void *ctx, double *x, size_t n, const double *grad, const double *out,
                       const double *r, size_t nout)
{
    double worst = 0, eps = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + eps;
        f(ctx);
        double lp = dot(r, out, nout);
        x[i] = keep - eps;
        f(ctx);
        double lm = dot(r, out, nout);
        x[i] = keep;
        double fd = (lp - lm) / (2 * eps), e = fabs(fd - grad[i]) / fmax(1e-2, fabs(grad[i]));
        worst = e > worst ? e : worst;
    }
    f(ctx);
    return worst;
}

enum { N = 6, C = 8 };

struct rms_ctx {
    double x[N * C], w[C], y[N * C], rstd[N], w_offset;
};
static void rms_fwd(void *p)
{
    struct rms_ctx *c = p;
    zt_cpu_rmsnorm_forward(c->y, NULL, c->rstd, c->x, c->w, c->w_offset, N, C, 1e-5);
}

/* w_offset 0, and 1 (Gemma's scale 1 + w) */
static void check_rmsnorm(double w_offset)
{
    struct rms_ctx c = {.w_offset = w_offset};
    double r[N * C], dx[N * C] = {0}, dw[C] = {0};
    fill(c.x, N * C, 2), fill(c.w, C, 1.5), fill(r, N * C, 1);
    rms_fwd(&c);
    zt_cpu_rmsnorm_backward(dx, dw, r, c.x, c.w, w_offset, c.rstd, N, C);
    CHECK(fd_check(rms_fwd, &c, c.x, N * C, dx, c.y, r, N * C) < 1e-6);
    CHECK(fd_check(rms_fwd, &c, c.w, C, dw, c.y, r, N * C) < 1e-6);
    /* backward accumulates */
    double dx2[N * C];
    for (int i = 0; i < N * C; i++) dx2[i] = 1;
    double dw2[C] = {0};
    zt_cpu_rmsnorm_backward(dx2, dw2, r, c.x, c.w, w_offset, c.rstd, N, C);
    CHECK_NEAR(dx2[5], dx[5] + 1, 1e-12);
    /* the offset is the weight's: the same products as a weight of w + w_offset */
    struct rms_ctx shifted = c;
    shifted.w_offset = 0;
    for (int j = 0; j < C; j++) shifted.w[j] = c.w[j] + w_offset;
    rms_fwd(&shifted);
    CHECK(!memcmp(shifted.y, c.y, sizeof c.y));
}

static void test_rmsnorm(void) { check_rmsnorm(0); }
static void test_rmsnorm_offset(void) { check_rmsnorm(1); }

/* the per-head norm on heads 0 and 1 of rows of 3 heads (the third one left alone, like the v
 * heads of qkv rows), against the row norm of each head on its own */
struct head_rms_ctx {
    double x[N * 3 * C], y[N * 3 * C], xin[N * 2 * C], rstd[N * 2], w[C], w_offset;
};
static void head_rms_fwd(void *p)
{
    struct head_rms_ctx *c = p;
    memcpy(c->y, c->x, sizeof c->y);
    zt_cpu_head_rmsnorm_forward(c->y, c->xin, c->rstd, c->w, c->w_offset, N, 3 * C, 2, C, 1e-5);
}

static void check_head_rmsnorm(double w_offset)
{
    struct head_rms_ctx c = {.w_offset = w_offset};
    double r[N * 3 * C], d[N * 3 * C], dw[C] = {0}, want[C], rstd;
    fill(c.x, N * 3 * C, 2), fill(c.w, C, 1.5), fill(r, N * 3 * C, 1);
    head_rms_fwd(&c);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < 3; h++) {
            const double *x = c.x + (n * 3 + h) * C, *y = c.y + (n * 3 + h) * C;
            if (h < 2) zt_cpu_rmsnorm_forward(want, NULL, &rstd, x, c.w, w_offset, 1, C, 1e-5);
            for (int j = 0; j < C; j++) CHECK(y[j] == (h < 2 ? want[j] : x[j]));
            if (h < 2) CHECK(!memcmp(c.xin + (n * 2 + h) * C, x, sizeof want) && c.rstd[n * 2 + h] == rstd);
        }
    memcpy(d, r, sizeof d);
    zt_cpu_head_rmsnorm_backward(d, dw, c.xin, c.w, w_offset, c.rstd, N, 3 * C, 2, C);
    for (int n = 0; n < N; n++) /* the third head's gradient passes through */
        CHECK(!memcmp(d + (n * 3 + 2) * C, r + (n * 3 + 2) * C, sizeof want));
    CHECK(fd_check(head_rms_fwd, &c, c.x, N * 3 * C, d, c.y, r, N * 3 * C) < 1e-6);
    CHECK(fd_check(head_rms_fwd, &c, c.w, C, dw, c.y, r, N * 3 * C) < 1e-6);
}

static void test_head_rmsnorm(void) { check_head_rmsnorm(0); }
static void test_head_rmsnorm_offset(void) { check_head_rmsnorm(1); } /* Gemma 3's q/k norms */

/* gated activations on rows [gate | up]: SwiGLU, or Gemma's GeGLU (gelu's tanh form, or with
 * exact its erf form) */
struct glu_ctx {
    double gu[N * 2 * C], h[N * C];
    int geglu, exact;
};
static void glu_fwd(void *p)
{
    struct glu_ctx *c = p;
    if (c->geglu) zt_cpu_geglu_forward(c->h, NULL, c->gu, N, C, c->exact);
    else zt_cpu_swiglu_forward(c->h, NULL, c->gu, N, C);
}

/* the backward pass against finite differences; returns the forward's context */
static struct glu_ctx *check_glu(int geglu, int exact)
{
    static struct glu_ctx c;
    double r[N * C], d[N * 2 * C];
    c.geglu = geglu, c.exact = exact;
    fill(c.gu, N * 2 * C, 4), fill(r, N * C, 1);
    glu_fwd(&c);
    if (geglu) zt_cpu_geglu_backward(d, NULL, r, c.gu, N, C, exact);
    else zt_cpu_swiglu_backward(d, NULL, r, c.gu, N, C);
    CHECK(fd_check(glu_fwd, &c, c.gu, N * 2 * C, d, c.h, r, N * C) < 1e-6);
    return &c;
}

static void test_swiglu(void) { check_glu(0, 0); }

/* and against torch's gelu written out: approximate="tanh", or "none" (the normal CDF) */
static void check_geglu(int exact)
{
    const struct glu_ctx *c = check_glu(1, exact);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < C; i++) {
            double g = c->gu[n * 2 * C + i], u = c->gu[n * 2 * C + C + i];
            double gelu = exact ? 0.5 * g * erfc(-g / sqrt(2))
                                : 0.5 * g * (1 + tanh(sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
            CHECK_NEAR(c->h[n * C + i], gelu * u, 1e-12);
        }
}

static void test_geglu(void) { check_geglu(0); }
static void test_geglu_exact(void) { check_geglu(1); }

struct softcap_ctx {
    double x[N * C], y[N * C];
};
static void softcap_fwd(void *p)
{
    struct softcap_ctx *c = p;
    memcpy(c->y, c->x, sizeof c->y);
    zt_cpu_softcap_forward(c->y, N * C, 1.5);
}

/* values up to 4 against a cap of 1.5: well into the bend */
static void test_softcap(void)
{
    struct softcap_ctx c;
    double r[N * C], d[N * C];
    fill(c.x, N * C, 4), fill(r, N * C, 1);
    softcap_fwd(&c);
    for (int i = 0; i < N * C; i++) CHECK_NEAR(c.y[i], 1.5 * tanh(c.x[i] / 1.5), 1e-12);
    memcpy(d, r, sizeof d);
    zt_cpu_softcap_backward(d, c.y, N * C, 1.5);
    CHECK(fd_check(softcap_fwd, &c, c.x, N * C, d, c.y, r, N * C) < 1e-6);
}

struct bias_ctx {
    double x[N * C], b[C], y[N * C];
};
static void bias_fwd(void *p)
{
    struct bias_ctx *c = p;
    memcpy(c->y, c->x, sizeof c->y);
    zt_cpu_bias_forward(c->y, c->b, N, C);
}

static void test_bias(void)
{
    struct bias_ctx c;
    double r[N * C], db[C] = {0};
    fill(c.x, N * C, 1), fill(c.b, C, 1), fill(r, N * C, 1);
    bias_fwd(&c);
    zt_cpu_bias_backward(db, r, N, C);
    CHECK(fd_check(bias_fwd, &c, c.b, C, db, c.y, r, N * C) < 1e-6);
}

enum { V = 5 };
struct emb_ctx {
    double table[V * C], out[N * C];
    int32_t ids[N];
};
static void emb_fwd(void *p)
{
    struct emb_ctx *c = p;
    zt_cpu_embedding_forward(c->out, c->ids, c->table, 0, V, N, C);
}

static void test_embedding(void)
{
    struct emb_ctx c = {.ids = {1, 3, 1, 0, 4, 1}};
    double r[N * C], d[V * C] = {0};
    fill(c.table, V * C, 1), fill(r, N * C, 1);
    emb_fwd(&c);
    zt_cpu_embedding_backward(d, r, c.ids, 0, V, N, C);
    CHECK(fd_check(emb_fwd, &c, c.table, V * C, d, c.out, r, N * C) < 1e-6);
}

/* Tiles of the vocabulary, each with its own table: together they give the whole lookup
 * and the whole gradient, and a tile leaves the rows of other tiles' tokens alone. */
static void test_embedding_tiles(void)
{
    struct emb_ctx c = {.ids = {1, 3, 1, 0, 4, 1}};
    double r[N * C], d[V * C] = {0}, out[N * C], dt[V * C] = {0};
    fill(c.table, V * C, 1), fill(r, N * C, 1);
    emb_fwd(&c);
    zt_cpu_embedding_backward(d, r, c.ids, 0, V, N, C);
    for (int i = 0; i < N * C; i++) out[i] = -7;
    static const int cut[] = {0, 2, 3, V};
    for (int j = 0; j < 3; j++) {
        int v0 = cut[j], nv = cut[j + 1] - cut[j];
        zt_cpu_embedding_forward(out, c.ids, c.table + v0 * C, v0, nv, N, C);
        zt_cpu_embedding_backward(dt + v0 * C, r, c.ids, v0, nv, N, C);
        for (int n = 0; n < N; n++) /* rows of tokens not seen yet still hold their old value */
            if (c.ids[n] >= v0 + nv) CHECK(out[n * C] == -7);
    }
    CHECK(!memcmp(out, c.out, sizeof out));
    CHECK(!memcmp(dt, d, sizeof d));
}

struct ce_ctx {
    double logits[N * V], work[N * V], loss[N];
    int32_t target[N];
};
static void ce_fwd(void *p)
{
    struct ce_ctx *c = p;
    memcpy(c->work, c->logits, sizeof c->work);
    memset(c->loss, 0, sizeof c->loss);
    zt_cpu_cross_entropy(c->work, c->loss, c->target, N, V, 0);
}

static void test_cross_entropy(void)
{
    struct ce_ctx c = {.target = {2, -100, 0, 4, -100, 1}};
    double one[N], d[N * V];
    for (int i = 0; i < N; i++) one[i] = 1;
    fill(c.logits, N * V, 3);
    ce_fwd(&c);
    /* a naive log-softmax */
    for (int i = 0; i < N; i++) {
        double s = 0;
        for (int v = 0; v < V; v++) s += exp(c.logits[i * V + v]);
        double want = c.target[i] < 0 ? 0 : log(s) - c.logits[i * V + c.target[i]];
        CHECK_NEAR(c.loss[i], want, 1e-12);
    }
    memcpy(d, c.logits, sizeof d);
    double loss[N] = {0};
    zt_cpu_cross_entropy(d, loss, c.target, N, V, 1);
    CHECK(fd_check(ce_fwd, &c, c.logits, N * V, d, c.loss, one, N) < 1e-6);
}

/* attention on B=2 rows of T=9, H=4 query heads sharing KV=2 heads, D=4 */
enum { AB = 2, AT = 9, AH = 4, AKV = 2, AD = 4, S3 = (AH + 2 * AKV) * AD };
struct att_ctx {
    double qkv[AB * AT * S3], out[AB * AT * AH * AD], lse[AB * AH * AT];
    int32_t pos[AB * AT];
    int window;
    double scale, softcap;
};
static void att_fwd(void *p)
{
    struct att_ctx *c = p;
    zt_cpu_attention_forward(c->out, c->lse, c->qkv, c->pos, AB, AT, AH, AKV, AD, c->window, c->scale, c->softcap);
}

static void naive_attention(const struct att_ctx *c, double *out)
{
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AH; h++)
            for (int t = 0; t < AT; t++) {
                const double *q = c->qkv + (size_t)(b * AT + t) * S3 + h * AD;
                double s[AT], mx = -1e300, sum = 0;
                int g = h / (AH / AKV);
                for (int u = 0; u < AT; u++) {
                    int visible = u <= t && u >= t - c->pos[b * AT + t] && (!c->window || t - u < c->window);
                    const double *k = c->qkv + (size_t)(b * AT + u) * S3 + (AH + g) * AD;
                    double score = dot(q, k, AD) * c->scale;
                    if (c->softcap > 0) score = c->softcap * tanh(score / c->softcap);
                    s[u] = visible ? score : -INFINITY;
                    mx = s[u] > mx ? s[u] : mx;
                }
                for (int u = 0; u < AT; u++) sum += s[u] == -INFINITY ? 0 : exp(s[u] - mx);
                for (int d = 0; d < AD; d++) {
                    double o = 0;
                    for (int u = 0; u < AT; u++)
                        if (s[u] != -INFINITY)
                            o += exp(s[u] - mx) / sum * c->qkv[(size_t)(b * AT + u) * S3 + (AH + AKV + g) * AD + d];
                    out[(size_t)(b * AT + t) * AH * AD + h * AD + d] = o;
                }
            }
}

static void check_attention(int window, double scale, double softcap)
{
    static struct att_ctx c;
    int32_t pos[AB * AT] = {0, 1, 2, 0, 1, 2, 3, 4, 5, /* docs of 3 and 6 */ 0, 1, 2, 3, 4, 5, 6, 0, 1};
    memcpy(c.pos, pos, sizeof pos);
    c.window = window, c.scale = scale, c.softcap = softcap;
    static double r[AB * AT * AH * AD], d[AB * AT * S3], ref[AB * AT * AH * AD];
    fill(c.qkv, AB * AT * S3, 1.5), fill(r, AB * AT * AH * AD, 1);
    att_fwd(&c);
    naive_attention(&c, ref);
    double worst = 0;
    for (int i = 0; i < AB * AT * AH * AD; i++) worst = fmax(worst, fabs(ref[i] - c.out[i]));
    CHECK_MSG(worst < 1e-12, "forward differs from naive by %g (window %d)", worst, window);
    zt_cpu_attention_backward(d, r, c.qkv, c.out, c.lse, c.pos, AB, AT, AH, AKV, AD, window, scale, softcap);
    double e = fd_check(att_fwd, &c, c.qkv, AB * AT * S3, d, c.out, r, AB * AT * AH * AD);
    CHECK_MSG(e < 1e-6, "backward error %g (window %d)", e, window);
}

static void test_attention(void) { check_attention(0, 1 / sqrt(AD), 0); }
static void test_attention_window(void) { check_attention(2, 1 / sqrt(AD), 0); }
/* Gemma 2: query_pre_attn_scalar's scale, and a cap of 0.8 against scores up to about 1.5·1.5·4·0.9 */
static void test_attention_softcap(void) { check_attention(2, 0.9, 0.8); }

/* rope with the rotate-half pairing (or GLM's interleaved one) over a head's first R of C
 * elements, against the formula written out; tables scaled by `scale` with each pair's frequency
 * divided by a factor of its own (longrope), so that the rotation is no longer orthogonal and the
 * backward's transpose shows */
struct rope_ctx {
    double x[N * 2 * C], y[N * 2 * C], cs[N * C / 2], sn[N * C / 2];
    int32_t pos[N];
    int R, interleaved;
};
static void rope_fwd(void *p)
{
    struct rope_ctx *c = p;
    memcpy(c->y, c->x, sizeof c->y);
    zt_cpu_rope(c->y, N, 2 * C, 2, C, c->R, c->interleaved, c->pos, c->cs, c->sn, 0);
}

static void check_rope_pairs(int R, double scale, const double *factor, int interleaved)
{
    struct rope_ctx c = {.pos = {0, 1, 2, 0, 1, 5}, .R = R, .interleaved = interleaved};
    int half = R / 2;
    for (int p = 0; p < N; p++)
        for (int j = 0; j < half; j++) {
            double th = p * pow(100.0, -2.0 * j / R) / factor[j];
            c.cs[p * half + j] = scale * cos(th), c.sn[p * half + j] = scale * sin(th);
        }
    double r[N * 2 * C], d[N * 2 * C];
    fill(c.x, N * 2 * C, 1), fill(r, N * 2 * C, 1);
    rope_fwd(&c);
    for (int n = 0; n < N; n++)
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < C; j++) {
                const double *x = c.x + n * 2 * C + h * C;
                int pair = interleaved ? j / 2 : j % half; /* GLM's rotate_half: (-x[2i+1], x[2i]) */
                double th = c.pos[n] * pow(100.0, -2.0 * pair / R) / factor[pair];
                double rot = interleaved ? (j % 2 ? x[j - 1] : -x[j + 1]) : j < half ? -x[j + half] : x[j - half];
                double want = j < R ? scale * (x[j] * cos(th) + rot * sin(th)) : x[j]; /* the rest pass through */
                CHECK_NEAR(c.y[n * 2 * C + h * C + j], want, 1e-12);
            }
    memcpy(d, r, sizeof d);
    zt_cpu_rope(d, N, 2 * C, 2, C, R, interleaved, c.pos, c.cs, c.sn, 1);
    CHECK(fd_check(rope_fwd, &c, c.x, N * 2 * C, d, c.y, r, N * 2 * C) < 1e-6);
}

static void check_rope(int R, double scale, const double *factor) { check_rope_pairs(R, scale, factor, 0); }

static const double unit_factors[C / 2] = {1, 1, 1, 1};

static void test_rope(void) { check_rope(C, 1, unit_factors); }
/* Phi-3: partial_rotary_factor 0.75 (6 of 8) and 0.5, with longrope's factors and attention factor */
static void test_rope_partial(void)
{
    check_rope(6, 1, unit_factors);
    check_rope(4, 1, unit_factors);
}
/* GLM: interleaved pairs on half of a head (partial_rotary_factor 0.5), and on all of it */
static void test_rope_interleaved(void)
{
    check_rope_pairs(4, 1, unit_factors, 1);
    check_rope_pairs(C, 1.3, (const double[C / 2]){1.5, 2.5, 4, 9}, 1);
}
static void test_rope_longrope(void)
{
    static const double factors[C / 2] = {1.5, 2.5, 4, 9};
    check_rope(C, 1.3, factors);
    check_rope(6, 1.3, factors);
}

int main(void)
{
    zt_rng_seed(&rng, 7, 0);
    RUN(test_rmsnorm);
    RUN(test_rmsnorm_offset);
    RUN(test_head_rmsnorm);
    RUN(test_head_rmsnorm_offset);
    RUN(test_swiglu);
    RUN(test_geglu);
    RUN(test_geglu_exact);
    RUN(test_softcap);
    RUN(test_bias);
    RUN(test_embedding);
    RUN(test_embedding_tiles);
    RUN(test_cross_entropy);
    RUN(test_attention);
    RUN(test_attention_window);
    RUN(test_attention_softcap);
    RUN(test_rope);
    RUN(test_rope_partial);
    RUN(test_rope_longrope);
    RUN(test_rope_interleaved);
    return test_summary();
}

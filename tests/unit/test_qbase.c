/* A quantized frozen base (lib/model/qbase.h, qbase_read.h) on the tiny GQA Llama of
 * tests/fixtures/lora with its PEFT adapter: the tiled products compute what the dequantized
 * weights compute, the loss moves from the fp32 base's by what the quantization error predicts,
 * the weights quantized as they are read in small pieces are the bytes the whole loaded weights
 * quantize to, the cache gives back what it was given and rebuilds what is corrupt. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/fileio.h"
#include "lib/model/lora.h"
#include "lib/model/open.h"
#include "lib/model/qbase.h"
#include "lib/model/qbase_decode.h"
#include "lib/model/qbase_read.h"
#include "test.h"

#define FIXTURE "tests/fixtures/lora"
/* mixtures of experts with PEFT adapters on every expert and the router (hidden 32, 4 experts of 16) */
#define QWEN3_MOE FIXTURE "/moe/qwen3_moe"
#define MIXTRAL FIXTURE "/moe/mixtral"
enum { ROWS = 2, T = 32, N = ROWS * T };

static int32_t input[N], target[N], pos[N];
static int n_targets;

/* A fixed batch: token ids from a small generator, each row's next token its target. */
static void make_batch(void)
{
    unsigned s = 7;
    for (int i = 0; i < N; i++) s = s * 1103515245u + 12345u, input[i] = (int32_t)((s >> 16) % 64), pos[i] = i % T;
    n_targets = 0;
    for (int i = 0; i < N; i++) target[i] = i % T < T - 1 ? input[i + 1] : -100, n_targets += target[i] >= 0;
}

enum { PATH = 256 };

/* Fixture fx's base or adapter directory, in path. */
static const char *path_of(char *path, const char *fx, const char *what)
{
    snprintf(path, PATH, "%s/%s", fx, what);
    return path;
}

/* Fixture fx's adapter on m (with adapter), and its activations. */
static zt_status finish_open(zt_llama *m, const char *fx, int adapter)
{
    zt_lora_config c;
    zt_status st = ZT_OK;
    char path[PATH];
    if (adapter) st = zt_lora_read_config(path_of(path, fx, "adapter"), &c);
    if (!st && adapter) st = zt_lora_attach(m, &c);
    if (!st && adapter) st = zt_lora_load(m, path);
    if (!st) st = zt_llama_alloc_acts(m, ROWS, T, 0);
    return st;
}

/* Fixture fx's base, optionally quantized and dequantized again, with its adapter. */
static zt_status open_model(zt_llama *m, const char *fx, zt_qbase_kind round_trip, int dq, int adapter)
{
    char path[PATH];
    zt_status st = zt_model_open(m, path_of(path, fx, "base"), ZT_F32, ZT_DEVICE_CPU);
    if (!st && round_trip != ZT_QBASE_NONE) st = zt_qbase_round_trip(m, round_trip, dq);
    return st ? st : finish_open(m, fx, adapter);
}

/* Fixture fx's base quantized in memory (through the cache in dir, or none), with its adapter. */
static zt_status open_quantized(zt_llama *m, const char *fx, zt_qbase_kind kind, int dq, zt_dtype dtype,
                                const char *dir, int *hit)
{
    zt_qbase_reader *r;
    char path[PATH];
    zt_status st = zt_model_open_quantized(m, path_of(path, fx, "base"), dtype, ZT_DEVICE_CPU, 0, kind, dq, &r);
    if (st) return st;
    st = zt_qbase_load(m, r, dir, hit);
    zt_qbase_reader_close(r);
    return st ? st : finish_open(m, fx, 1);
}

/* The mean loss, and with grad the gradients (of the adapters, or of the whole model without them). */
static double loss_of(zt_llama *m, int grad)
{
    double sum = 0;
    zt_llama_forward_backward(m, input, target, pos, grad ? (zt_real)(1.0 / n_targets) : 0, &sum);
    return sum / n_targets;
}

/* Tiles of 300 elements: nine rows of 32 (288, 4.5 NF4 blocks) or four of 64, so that tiles start
 * inside NF4 blocks, cross from q to k and from gate to up, and every product takes several. The
 * tiled forward computes each output element as the dequantized model's product does (the same
 * dot product, though the GEMM may take another kernel for a narrower output); the input gradient
 * sums the tiles' products one after the other, which reorders sums of at most 128 terms (2F =
 * 128 rows): each within 128·2⁻²⁴ ≈ 8e-6 of its terms' magnitudes, through two layers: 1e-5
 * relative for the adapters' gradients (against the largest), 1e-6 for the loss (measured: 1.4e-6
 * and 3e-8). The mixtures' experts (32 rows of gate and up, 32 of 16 columns down) and their
 * routers (4 rows) are tiled alike; their routing assumes no token's two experts' probabilities
 * within rounding of each other in these fixed weights (else the test fails rather than passes). */
static void check_product(const char *fx, zt_qbase_kind kind, int dq)
{
    zt_llama q, d;
    zt_qbase_set_tile_elems(300);
    int hit;
    CHECK_MSG(open_quantized(&q, fx, kind, dq, ZT_F32, NULL, &hit) == ZT_OK && !hit, "%s", zt_errmsg());
    CHECK_MSG(open_model(&d, fx, kind, dq, 1) == ZT_OK, "%s", zt_errmsg());
    double lq = loss_of(&q, 1), ld = loss_of(&d, 1);
    CHECK_MSG(fabs(lq - ld) <= 1e-6 * ld, "%s %s%s: quantized %.9g, dequantized %.9g", fx, zt_qbase_kind_names[kind],
              dq ? " dq" : "", lq, ld);
    double gmax = 0, diff = 0;
    for (size_t i = 0; i < d.lora->view.numel; i++) {
        gmax = fmax(gmax, fabs(d.lora->view.grads[i]));
        diff = fmax(diff, fabs(d.lora->view.grads[i] - q.lora->view.grads[i]));
    }
    fprintf(stderr, "  %s %s%s: loss %.3g relative, gradients %.3g of the largest\n", fx, zt_qbase_kind_names[kind],
            dq ? " dq" : "", fabs(lq - ld) / ld, diff / gmax);
    CHECK_MSG(gmax > 0 && diff <= 1e-5 * gmax, "%s %s: gradients differ by %g of %g", fx, zt_qbase_kind_names[kind],
              diff, gmax);
    /* the layers hold the encodings (at most 8 bits a weight, with headers) in place of fp32 weights, and the
       base has no gradient */
    CHECK(q.norm_off - q.layer0_off < (d.norm_off - d.layer0_off) / 2 && q.grads == NULL &&
          q.params[q.embed_off] == d.params[d.embed_off]);
    zt_llama_free(&q);
    zt_llama_free(&d);
    zt_qbase_set_tile_elems((size_t)1 << 20);
}

static void test_products_are_the_dequantized_models(void)
{
    static const char *const fixtures[] = {FIXTURE, QWEN3_MOE, MIXTRAL};
    for (int i = 0; i < 3; i++) {
        check_product(fixtures[i], ZT_QBASE_NF4, 0);
        check_product(fixtures[i], ZT_QBASE_NF4, 1);
        check_product(fixtures[i], ZT_QBASE_INT8, 0);
    }
}

/* The quantized base's loss L_q against the fp32 base's L (no adapter): to first order
 * L_q - L = Σ g·ΔW over the quantized weights W, g = ∂L/∂W and ΔW the quantization error, and
 * |L_q - L| <= Σ |g|·|ΔW| =: E, the error's worst case. The remainder is of second order in ΔW,
 * whose elements are at most 0.152·absmax (NF4) and absmax/254 (int8), against E's first: it must
 * stay a small part of E, 2% (measured: 0.6% for NF4, whose large weights here, std 0.2, make it a
 * third of Σ g·ΔW; 0.01% for int8); and the quantization must move the loss. (Not for a mixture of
 * experts: a token whose router's choice the quantization flips moves the loss by a step.) */
static void check_loss_bound(const char *fx, zt_qbase_kind kind, int dq)
{
    zt_llama f, q;
    CHECK_MSG(open_model(&f, fx, ZT_QBASE_NONE, 0, 0) == ZT_OK, "%s", zt_errmsg());
    CHECK_MSG(open_model(&q, fx, kind, dq, 0) == ZT_OK, "%s", zt_errmsg());
    double l = loss_of(&f, 1), lq = loss_of(&q, 0), first = 0, e = 0;
    for (int k = 0; k < f.n_tensors; k++) {
        const zt_llama_tensor *t = &f.tensors[k];
        if (!zt_qbase_is_linear(t->name)) continue;
        for (size_t i = t->offset; i < t->offset + (size_t)t->shape[0] * (size_t)t->shape[1]; i++) {
            double g = f.grads[i], dw = q.params[i] - f.params[i];
            first += g * dw, e += fabs(g) * fabs(dw);
        }
    }
    fprintf(stderr, "  %s %s%s: L = %.6f, L_q - L = %.3g, first order %.3g, E = %.3g\n", fx, zt_qbase_kind_names[kind],
            dq ? " dq" : "", l, lq - l, first, e);
    CHECK(e > 0 && fabs(lq - l) > 0);
    CHECK_MSG(fabs(lq - l - first) <= 0.02 * e, "remainder %g of E = %g", lq - l - first, e);
    CHECK(fabs(lq - l) <= 1.02 * e);
    zt_llama_free(&f);
    zt_llama_free(&q);
}

static void test_loss_within_quantization_error(void)
{
    check_loss_bound(FIXTURE, ZT_QBASE_NF4, 0);
    check_loss_bound(FIXTURE, ZT_QBASE_NF4, 1);
    check_loss_bound(FIXTURE, ZT_QBASE_INT8, 0);
}

/* Read in pieces of 64 elements (NF4; one row for int8) while the source is read tensor by
 * tensor, each linear weight's encoding is the bytes of the whole loaded weight quantized at once;
 * the rest of the array is the fp32 model's. */
static void check_read_in_pieces(const char *fx, zt_qbase_kind kind, int dq, int linear_a_layer)
{
    zt_llama f, q;
    zt_qbase_reader *r;
    char path[PATH];
    zt_qbase_set_tile_elems(100);
    CHECK(zt_model_open(&f, path_of(path, fx, "base"), ZT_F32, ZT_DEVICE_CPU) == ZT_OK);
    CHECK_MSG(zt_model_open_quantized(&q, path, ZT_F32, ZT_DEVICE_CPU, 0, kind, dq, &r) == ZT_OK, "%s", zt_errmsg());
    size_t half = q.layer0_off + q.lay.numel; /* two reads: the embedding and layer 0, then the rest */
    CHECK(zt_qbase_read(r, 0, half, q.params) == ZT_OK && zt_qbase_read(r, half, q.numel - half, q.params + half) == 0);
    zt_qbase_reader_close(r);
    CHECK(f.n_tensors == q.n_tensors);
    int linear = 0, same = 1;
    for (int i = 0; i < f.n_tensors; i++) {
        const zt_llama_tensor *a = &f.tensors[i], *b = &q.tensors[i];
        size_t rows = (size_t)a->shape[0], cols = a->ndim == 2 ? (size_t)a->shape[1] : 1;
        if (!zt_qbase_is_linear(a->name)) {
            same &= !memcmp(f.params + a->offset, q.params + b->offset, rows * cols * sizeof(zt_real));
            continue;
        }
        size_t elems = zt_qbase_tensor_elems(q.qbase, rows, cols);
        zt_real *part = malloc(elems * sizeof *part);
        float *w = malloc(rows * cols * sizeof *w);
        for (size_t j = 0; j < rows * cols; j++) w[j] = (float)f.params[a->offset + j];
        zt_qbase_encoder e;
        CHECK(zt_qbase_encode_begin(&e, q.qbase, rows, cols, part) == ZT_OK);
        zt_qbase_encode_piece(&e, w, rows * cols);
        CHECK(zt_qbase_encode_end(&e, a->name) == ZT_OK);
        CHECK_MSG(b->shape[0] == (int64_t)elems && !memcmp(part, q.params + b->offset, elems * sizeof *part),
                  "%s: %s encodes differently in pieces", zt_qbase_kind_names[kind], a->name);
        CHECK(zt_qbase_check_part(q.qbase, part, rows, cols) == ZT_OK);
        linear++;
        free(part);
        free(w);
    }
    CHECK(linear == linear_a_layer * f.L && same);
    zt_llama_free(&f);
    zt_llama_free(&q);
    zt_qbase_set_tile_elems((size_t)1 << 20);
}

static void test_read_in_pieces_is_quantizing_the_loaded_model(void)
{
    check_read_in_pieces(FIXTURE, ZT_QBASE_NF4, 0, 7);
    check_read_in_pieces(FIXTURE, ZT_QBASE_NF4, 1, 7);
    check_read_in_pieces(FIXTURE, ZT_QBASE_INT8, 0, 7);
    check_read_in_pieces(QWEN3_MOE, ZT_QBASE_NF4, 1, 4 + 1 + 3 * 4); /* q, k, v, o, the router, 4 experts' 3 */
    check_read_in_pieces(MIXTRAL, ZT_QBASE_INT8, 0, 4 + 1 + 3 * 4);
}

/* The one cache file in dir (its path into path), or 0 when there is not exactly one. */
static int cache_file(const char *dir, char *path, size_t cap)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/base-*.bin 2>/dev/null", dir);
    FILE *p = popen(cmd, "r");
    int n = 0;
    char line[512];
    while (p && fgets(line, sizeof line, p)) n++, line[strcspn(line, "\n")] = 0, snprintf(path, cap, "%s", line);
    if (p) pclose(p);
    return n == 1;
}

/* Opens the adapted base on the cache in dir: whether it was a hit, and the loss. */
static int open_cached(const char *dir, double *loss)
{
    zt_llama m;
    int hit = -1;
    CHECK_MSG(open_quantized(&m, FIXTURE, ZT_QBASE_NF4, 1, ZT_F32, dir, &hit) == ZT_OK, "%s", zt_errmsg());
    *loss = loss_of(&m, 0);
    zt_llama_free(&m);
    return hit;
}

static void test_cache_reads_and_rebuilds(void)
{
    char dir[] = "/tmp/zt_test_qbase_XXXXXX", path[512], cmd[600];
    double l1, l2, l3;
    CHECK(mkdtemp(dir) != NULL);
    CHECK(open_cached(dir, &l1) == 0);
    CHECK(cache_file(dir, path, sizeof path));
    CHECK(open_cached(dir, &l2) == 1 && l2 == l1);
    FILE *f = fopen(path, "r+b"); /* one byte of the data flipped */
    CHECK(f && fseek(f, 4000, SEEK_SET) == 0);
    int c = f ? fgetc(f) : 0;
    if (f) fseek(f, 4000, SEEK_SET), fputc(c ^ 0x10, f), fclose(f);
    CHECK(open_cached(dir, &l3) == 0 && l3 == l1); /* detected, quantized again, written again */
    CHECK(open_cached(dir, &l3) == 1 && l3 == l1);
    CHECK(truncate(path, 1000) == 0); /* a short file */
    CHECK(open_cached(dir, &l3) == 0 && l3 == l1);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* A bf16 model: the products stay fp32; against the fp32 model only the LM head's product
 * differs, its operands rounded to bf16 (2⁻⁹ relative each, over 32 terms, into logits of
 * magnitude about 1 around a loss of 4.7): 1e-2 relative (measured 1.7e-4). */
static void test_bf16_model(void)
{
    zt_llama f, b;
    int hit;
    CHECK_MSG(open_quantized(&f, FIXTURE, ZT_QBASE_NF4, 0, ZT_F32, NULL, &hit) == ZT_OK, "%s", zt_errmsg());
    CHECK_MSG(open_quantized(&b, FIXTURE, ZT_QBASE_NF4, 0, ZT_BF16, NULL, &hit) == ZT_OK && b.params16, "%s",
              zt_errmsg());
    double lf = loss_of(&f, 0), lb = loss_of(&b, 0);
    fprintf(stderr, "  fp32 %.9g, bf16 %.9g\n", lf, lb);
    CHECK_MSG(fabs(lf - lb) <= 1e-2 * lf && lf != lb, "fp32 %.9g, bf16 %.9g", lf, lb);
    zt_llama_free(&f);
    zt_llama_free(&b);
}

static void test_refusals(void)
{
    zt_llama m;
    zt_qbase_reader *r;
    zt_llama_config c;
    CHECK(zt_llama_config_load(&c, FIXTURE "/base/config.json") == ZT_OK);
    CHECK_MSG(open_model(&m, FIXTURE, ZT_QBASE_NONE, 0, 0) == ZT_OK, "%s", zt_errmsg());
    m.params[m.layer0_off + m.lay.numel + m.lay.wd + 3] = NAN;
    CHECK(zt_qbase_round_trip(&m, ZT_QBASE_NF4, 0) == ZT_EUSER &&
          strstr(zt_errmsg(), "model.layers.1.mlp.down_proj.weight: 1 weights are NaN"));
    zt_llama_free(&m);
    /* a bitsandbytes checkpoint read with another quantization */
    CHECK(zt_model_open_quantized(&m, "tests/fixtures/bnb/nf4", ZT_F32, ZT_DEVICE_CPU, 0, ZT_QBASE_INT8, 0, &r) ==
              ZT_EUSER &&
          strstr(zt_errmsg(), "set lora.quantize_base = \"nf4\" and lora.double_quant = true"));
}

/* A bitsandbytes checkpoint opened unloaded (offload.param = "nvme" outside LoRA) comes with a
 * decoder, whose reads in pieces of every size are the model opened whole, bit for bit. */
static void test_bnb_streamed_as_opened_whole(void)
{
    zt_llama whole, m;
    zt_st_reader *w = (zt_st_reader *)&m; /* set to NULL by the open */
    zt_qbase_decoder *d = NULL;
    CHECK_MSG(zt_model_open(&whole, "tests/fixtures/bnb/nf4", ZT_F32, ZT_DEVICE_CPU) == ZT_OK, "%s", zt_errmsg());
    CHECK_MSG(zt_model_open_unloaded(&m, "tests/fixtures/bnb/nf4", ZT_F32, ZT_DEVICE_CPU, 0, &w, &d) == ZT_OK, "%s",
              zt_errmsg());
    CHECK(!w && d && m.numel == whole.numel);
    zt_real *got = malloc(m.numel * sizeof *got);
    size_t pieces[] = {m.numel, 4096, 1000, 63};
    for (int k = 0; k < 4 && d; k++) {
        memset(got, 0xff, m.numel * sizeof *got);
        for (size_t off = 0; off < m.numel; off += pieces[k]) {
            size_t n = m.numel - off < pieces[k] ? m.numel - off : pieces[k];
            CHECK_MSG(zt_qbase_decoder_read(d, off, n, got + off) == ZT_OK, "%s", zt_errmsg());
        }
        CHECK_MSG(!memcmp(got, whole.params, m.numel * sizeof *got), "pieces of %zu elements", pieces[k]);
    }
    free(got);
    zt_qbase_decoder_close(d);
    zt_llama_free(&m);
    zt_llama_free(&whole);
}

int main(void)
{
    make_batch();
    RUN(test_products_are_the_dequantized_models);
    RUN(test_loss_within_quantization_error);
    RUN(test_read_in_pieces_is_quantizing_the_loaded_model);
    RUN(test_cache_reads_and_rebuilds);
    RUN(test_bf16_model);
    RUN(test_refusals);
    RUN(test_bnb_streamed_as_opened_whole);
    return test_summary();
}

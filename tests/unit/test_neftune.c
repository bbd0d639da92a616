/* NEFTune (train.neftune_noise_alpha): the counter-based uniform noise kernel, and the model's
 * use of it: noise of magnitude alpha / sqrt(T·C) on the embedding's output of gradient passes
 * only (before Gemma's scale, as transformers' hook on embed_tokens), the same noise for the
 * same (draw_seed, pass), new noise for the next pass. The gradient through it is checked
 * against finite differences in test_grad_model. */
#include <float.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ops.h"
#include "lib/core/rng.h"
#include "lib/model/llama.h"
#include "test.h"

/* The draws are k·2⁻²³ - 1 for k in [0, 2²⁴), each the value its index hashes to whatever the
 * thread count. Over n = 2²⁰ draws the mean of u (σ = 1/sqrt(3n) = 5.6e-4) and of u² (mean 1/3,
 * σ = sqrt(4/45 / n) = 2.9e-4) lie within 5σ of theirs. */
static void test_kernel(void)
{
    enum { N = 1 << 20 };
    const uint64_t key = 0x1234567890abcdefull;
    float *x = calloc(N, sizeof *x), *y = calloc(N, sizeof *y);
    ZT_ASSERT(x && y);
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    zt_cpu_add_uniform_noise(x, N, key, 1);
    omp_set_num_threads(threads > 1 ? threads : 2);
    zt_cpu_add_uniform_noise(y, N, key, 1);
    omp_set_num_threads(threads);
    CHECK(!memcmp(x, y, N * sizeof *x));
    double sum = 0, sq = 0;
    int off_grid = 0, out = 0, mismatched = 0;
    for (int i = 0; i < N; i++) {
        double k = ((double)x[i] + 1) * 0x1p23;
        off_grid += k != floor(k);
        out += !(x[i] >= -1 && x[i] < 1);
        mismatched += x[i] != zt_hash_uniform_pm1(key + (uint64_t)i);
        sum += x[i], sq += (double)x[i] * x[i];
    }
    CHECK_MSG(!off_grid && !out && !mismatched, "off the grid %d, outside [-1, 1) %d, not the hash's %d", off_grid, out,
              mismatched);
    CHECK_MSG(fabs(sum / N) < 5 * 5.6e-4, "mean %g", sum / N);
    CHECK_MSG(fabs(sq / N - 1.0 / 3) < 5 * 2.9e-4, "mean square %g", sq / N);
    /* added with its magnitude: x + m·u, each rounded once */
    for (int i = 0; i < N; i++) y[i] = 0.37f * (float)(i % 7);
    zt_cpu_add_uniform_noise(y, N, key, 0.01f);
    mismatched = 0;
    for (int i = 0; i < N; i++) {
        float d = 0.01f * x[i];
        mismatched += y[i] != 0.37f * (float)(i % 7) + d;
    }
    CHECK_MSG(!mismatched, "%d sums differ from x + m·u", mismatched);
    free(x);
    free(y);
}

enum { B = 2, T = 10, V = 11, C = 8 };
static int32_t input[B * T], target[B * T], pos[B * T];

static void open_model(zt_llama *m, const char *model_type, double alpha, int checkpointing)
{
    zt_llama_config c;
    zt_llama_config_default(&c);
    ZT_ASSERT(zt_llama_config_set(&c, "model_type", model_type) == ZT_OK);
    c.vocab_size = V, c.hidden_size = C, c.intermediate_size = 12, c.num_hidden_layers = 2;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 4, c.rms_norm_eps = 1e-5;
    c.pad_token_id = -1;
    ZT_ASSERT(zt_llama_init(m, &c, zt_backend_cpu(), ZT_F32) == ZT_OK);
    ZT_ASSERT(zt_llama_alloc_acts(m, B, T, checkpointing) == ZT_OK);
    zt_llama_init_weights(m, 3, 0.5);
    m->neftune_alpha = alpha, m->draw_seed = 77;
    for (int i = 0; i < B * T; i++) input[i] = (i * 7 + 3) % V, target[i] = (i * 5 + 1) % V, pos[i] = i % T;
}

/* loss of a pass drawing for pass p: a gradient pass (grad 1) or an evaluation pass */
static double pass_loss(zt_llama *m, uint64_t p, int grad)
{
    double loss = 0;
    if (m->grads) memset(m->grads, 0, m->numel * sizeof(zt_real));
    m->pass = p;
    zt_llama_forward_backward(m, input, target, pos, grad ? 1.0f / (B * T) : 0, &loss);
    return loss;
}

/* the noise the last pass added: x[0] / scale - the embedding's rows, largest |·| and mean */
static void noise_of(const zt_llama *m, double scale, double *largest, double *mean)
{
    *largest = *mean = 0;
    for (int n = 0; n < B * T; n++)
        for (int j = 0; j < C; j++) {
            double d = m->x[0][n * C + j] / scale - m->params[m->embed_off + (size_t)input[n] * C + j];
            *largest = fmax(*largest, fabs(d)), *mean += d / (B * T * C);
        }
}

static void test_passes(void)
{
    zt_llama plain, noisy;
    open_model(&plain, "llama", 0, 0);
    open_model(&noisy, "llama", 5, 0);
    double a = 5 / sqrt((double)T * C); /* 0.56 */
    /* evaluation passes draw nothing */
    CHECK(pass_loss(&noisy, 0, 0) == pass_loss(&plain, 0, 0));
    double largest, mean;
    noise_of(&noisy, 1, &largest, &mean);
    CHECK_MSG(largest == 0, "an evaluation pass moved an embedding by %g", largest);
    /* gradient passes: |noise| < a, its largest of 160 draws above 0.9·a (all below: 0.9¹⁶⁰),
     * its mean within 4σ = 4·a/sqrt(3·160) of 0 */
    double l0 = pass_loss(&noisy, 0, 1), l1 = pass_loss(&noisy, 1, 1), l0_again = pass_loss(&noisy, 0, 1);
    noise_of(&noisy, 1, &largest, &mean);
    CHECK_MSG(largest <= a * (1 + FLT_EPSILON) + 1e-6 && largest > 0.9 * a, "largest noise %g, a = %g", largest, a);
    CHECK_MSG(fabs(mean) < 4 * a / sqrt(3.0 * B * T * C), "mean noise %g", mean);
    CHECK_MSG(l0 == l0_again, "pass 0 drew other noise the second time: %.9g, %.9g", l0, l0_again);
    CHECK_MSG(l0 != l1, "passes 0 and 1 drew the same noise");
    CHECK(l0 != pass_loss(&plain, 0, 1));
    /* the pass counts itself: a gradient pass moves it on, an evaluation pass does not */
    noisy.pass = 9;
    double loss = 0;
    zt_llama_forward_backward(&noisy, input, target, pos, 1.0f, &loss);
    CHECK(noisy.pass == 10);
    zt_llama_forward_backward(&noisy, input, target, pos, 0, &loss);
    CHECK(noisy.pass == 10);
    zt_llama_free(&plain);
    zt_llama_free(&noisy);
}

/* With activation checkpointing the noised layer-0 input is kept, not drawn again: the same
 * loss and gradients, bit for bit */
static void test_checkpointing(void)
{
    zt_llama whole, ck;
    open_model(&whole, "llama", 5, 0);
    open_model(&ck, "llama", 5, 1);
    CHECK(pass_loss(&whole, 4, 1) == pass_loss(&ck, 4, 1));
    CHECK(!memcmp(whole.grads, ck.grads, whole.numel * sizeof(zt_real)));
    zt_llama_free(&whole);
    zt_llama_free(&ck);
}

/* Gemma scales the embeddings by sqrt(C) after the lookup; the noise comes before the scale, at
 * its full magnitude (after it, it would be a·sqrt(C) here, or at most a / sqrt(C) below) */
static void test_gemma_scale(void)
{
    zt_llama m;
    open_model(&m, "gemma2", 5, 0);
    double a = 5 / sqrt((double)T * C), largest, mean;
    pass_loss(&m, 0, 1);
    noise_of(&m, sqrt((double)C), &largest, &mean);
    CHECK_MSG(largest <= a * (1 + 1e-6) + 1e-6 && largest > 0.9 * a, "largest noise %g, a = %g", largest, a);
    zt_llama_free(&m);
}

int main(void)
{
    RUN(test_kernel);
    RUN(test_passes);
    RUN(test_checkpointing);
    RUN(test_gemma_scale);
    return test_summary();
}

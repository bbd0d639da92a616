/* The rotary embedding's cos/sin tables, with rope scaling (linear, llama3, Phi-3's longrope). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

/* longrope's scale of cos and sin: sqrt(1 + ln s / ln original) for the context's growth
 * s = max_position_embeddings / original_max_position_embeddings, 1 when it does not grow */
static double longrope_attention_factor(const zt_llama_config *c)
{
    double orig = c->rope_scaling.original_max_position_embeddings, s = c->max_position_embeddings / orig;
    return s > 1 ? sqrt(1 + log(s) / log(orig)) : 1;
}

void zt_llama_rope_tables(const zt_llama *m, int T, int local, zt_real *cos_t, zt_real *sin_t)
{
    const zt_llama_config *c = &m->cfg;
    const char *scaling = local ? "" : c->rope_scaling.type;
    int half = m->R / 2, lr = !strcmp(scaling, "longrope");
    /* longrope's long factors: for tables of more positions than original_max_position_embeddings */
    int lr_long = lr && T > c->rope_scaling.original_max_position_embeddings;
    double scale = lr ? longrope_attention_factor(c) : 1;
    for (int j = 0; j < half; j++) {
        double inv = pow(local ? c->rope_local_theta : c->rope_theta, -2.0 * j / m->R);
        if (!strcmp(scaling, "linear")) {
            inv /= c->rope_scaling.factor;
        } else if (!strcmp(scaling, "llama3")) {
            double f = c->rope_scaling.factor, old = c->rope_scaling.original_max_position_embeddings;
            double lo = c->rope_scaling.low_freq_factor, hi = c->rope_scaling.high_freq_factor;
            double wavelen = 2 * M_PI / inv;
            if (wavelen > old / lo) {
                inv /= f;
            } else if (wavelen >= old / hi) {
                double smooth = (old / wavelen - lo) / (hi - lo);
                inv = (1 - smooth) * inv / f + smooth * inv;
            }
        } else if (lr) {
            inv /= lr_long ? c->rope_scaling.long_factor[j] : c->rope_scaling.short_factor[j];
        }
        for (int p = 0; p < T; p++) {
            cos_t[(size_t)p * half + j] = (zt_real)(scale * cos(p * inv));
            sin_t[(size_t)p * half + j] = (zt_real)(scale * sin(p * inv));
        }
    }
}

zt_status zt_llama_rope_tables_upload(const zt_llama *m, int T, int local, zt_real *cos_t, zt_real *sin_t)
{
    size_t bytes = (size_t)T * (m->R / 2) * sizeof(zt_real);
    zt_real *host = malloc(2 * bytes + 1);
    if (!host) return zt_fail(ZT_ENOMEM, "out of memory for the rotary tables");
    zt_llama_rope_tables(m, T, local, host, (zt_real *)((char *)host + bytes));
    m->be->upload(m->be, cos_t, host, bytes);
    m->be->upload(m->be, sin_t, (char *)host + bytes, bytes);
    free(host);
    return ZT_OK;
}

#define _GNU_SOURCE /* qsort_r */
#include "sample.h"

#include <math.h>
#include <stdlib.h>

size_t zt_sample_scratch_bytes(int V) { return (size_t)V * (sizeof(float) + sizeof(int32_t)); }

static int argmax(const zt_real *x, int V)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[best]) best = v;
    return best;
}

static int by_prob_desc(const void *a, const void *b, void *probs)
{
    const float *pr = probs;
    float pa = pr[*(const int32_t *)a], pb = pr[*(const int32_t *)b];
    if (pa != pb) return pa < pb ? 1 : -1;
    return *(const int32_t *)a - *(const int32_t *)b; /* ties by id: deterministic */
}

int32_t zt_sample(zt_sampler *s, const zt_real *logits, int V, void *scratch)
{
    if (s->temperature <= 0) return argmax(logits, V);
    float *p = scratch;
    int32_t *idx = (int32_t *)(p + V);
    zt_real mx = logits[argmax(logits, V)];
    double sum = 0;
    for (int v = 0; v < V; v++) {
        p[v] = (float)exp((logits[v] - mx) / s->temperature);
        sum += p[v];
        idx[v] = v;
    }
    for (int v = 0; v < V; v++) p[v] = (float)(p[v] / sum);
    int n = V;
    if (s->top_k > 0 || s->top_p < 1) {
        qsort_r(idx, (size_t)V, sizeof *idx, by_prob_desc, p);
        if (s->top_k > 0 && s->top_k < n) n = s->top_k;
        if (s->top_p < 1) {
            double acc = 0;
            for (int i = 0; i < n; i++) {
                acc += p[idx[i]];
                if (acc >= s->top_p) {
                    n = i + 1;
                    break;
                }
            }
        }
    }
    double mass = 0;
    for (int i = 0; i < n; i++) mass += p[idx[i]];
    double r = zt_rng_uniform(&s->rng) * mass, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += p[idx[i]];
        if (r < acc) return idx[i];
    }
    return idx[n - 1];
}

/* model/sample: choosing the next token from logits: greedy, or sampling with a
 * temperature, top-k and top-p (nucleus), from a seeded generator.
 *
 *     zt_sampler s = {.temperature = 0.7, .top_k = 50, .top_p = 0.9};
 *     zt_rng_seed(&s.rng, seed, 0);
 *     int32_t next = zt_sample(&s, logits, V, scratch);   // scratch: V floats + V ints
 */
#ifndef ZT_MODEL_SAMPLE_H
#define ZT_MODEL_SAMPLE_H

#include <stdint.h>

#include "lib/core/real.h"
#include "lib/core/rng.h"

typedef struct zt_sampler {
    double temperature; /* 0: greedy (argmax) */
    int top_k;          /* 0: all tokens */
    double top_p;       /* 1: all tokens */
    zt_rng rng;
} zt_sampler;

/* scratch holds V floats and V int32s (zt_sample_scratch_bytes). */
size_t zt_sample_scratch_bytes(int V);
int32_t zt_sample(zt_sampler *s, const zt_real *logits, int V, void *scratch);

#endif

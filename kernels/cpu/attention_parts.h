/* kernels/cpu/attention_parts: what the fp32 attention (attention.c) and the bf16 one
 * (attention_bf16.c) share: the first key a block of queries sees, and the softmax of a block
 * of scores and its backward, at this run's CPU level (levels.h). */
#ifndef ZT_KERNELS_CPU_ATTENTION_PARTS_H
#define ZT_KERNELS_CPU_ATTENTION_PARTS_H

#include <stdint.h>

#include "lib/core/real.h"

/* The first key any query in [t0, t1) of a row may see (pos: each token's position in its
 * document; window 0: none). */
int zt_attn_block_key_lo(const int32_t *pos, int t0, int t1, int window);

/* Scores S[qb, nk] of queries t0.. over keys klo.. into probabilities, entries a query may not
 * see set to 0. With lse NULL the softmax, each row's log-sum-exp into lse_out[t]; else
 * exp(s - lse[t]) (the backward pass's recompute). */
typedef void zt_attn_probs_fn(zt_real *S, int qb, int nk, int t0, int klo, const int32_t *pos, int window,
                              const zt_real *lse, zt_real *lse_out);
zt_attn_probs_fn *zt_attn_probs_for_cpu(void);

/* dS = P ∘ (dP - rowsum(dO ∘ O)) in place in dP [qb, nk]; dO and O rows HD apart. */
typedef void zt_attn_dsoftmax_fn(zt_real *dP, const zt_real *P, const zt_real *dO, const zt_real *O, int qb, int nk,
                                 int D, int HD);
zt_attn_dsoftmax_fn *zt_attn_dsoftmax_for_cpu(void);

#endif

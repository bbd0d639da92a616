/* model/llama_internal: what llama.c, llama_decode.c and llama_moe.c share: the layers' linear
 * products, and a mixture of experts' MLP (llama_moe.c). Internal to lib/model. */
#ifndef ZT_MODEL_LLAMA_INTERNAL_H
#define ZT_MODEL_LLAMA_INTERNAL_H

#include "llama.h"

/* y[N,O] (rows ldy apart) = x[N,I]·Wᵀ + beta·y, W [O,I] at offset w in the parameter array, in
 * the model's dtype; x16: x's bf16 copy, or NULL (a bf16 model then converts x here) */
void zt_llama_linear_forward(zt_llama *m, zt_real *y, int ldy, const zt_real *x, const uint16_t *x16, size_t w, int N,
                             int O, int I, zt_real beta);
/* dx[N,I] = dy[N,O]·W + dx_beta·dx (skipped when dx is NULL), dy's rows ldy apart; dW += dyᵀ·x
 * (skipped when the base is frozen). dy16 and x16: bf16 copies already made, or NULL. */
void zt_llama_linear_backward(zt_llama *m, zt_real *dx, zt_real dx_beta, const zt_real *dy, const uint16_t *dy16,
                              int ldy, const zt_real *x, const uint16_t *x16, size_t w, int N, int O, int I);

/* A mixture of experts' routing and scratch for up to n rows in each of nsets activation sets
 * (backward: with what the backward pass needs, and the load-balancing loss's statistics), in
 * the model's backend memory and host memory; what it takes of the backend's, in bytes. */
struct zt_llama_moe;
size_t zt_llama_moe_bytes(const zt_llama *m, int n, int nsets, int backward);
zt_status zt_llama_moe_alloc(const zt_llama *m, int n, int nsets, int backward, struct zt_llama_moe **out);
void zt_llama_moe_release(const zt_llama *m, struct zt_llama_moe *moe);
/* Layer l's experts on its n rows `in` (in16: their bf16 copy, or NULL) into out [n, C]: added
 * (beta 1) or written (beta 0). The routing and the experts' activations stay in set `set` for
 * the backward pass. decode: the products in fp32 on the master weights (generation), and no
 * statistics kept for the load-balancing loss. */
void zt_llama_moe_forward(zt_llama *m, struct zt_llama_moe *moe, int set, int l, const zt_real *in,
                          const uint16_t *in16, int n, zt_real *out, zt_real beta, int decode);
/* ∂loss/∂out in dout → ∂loss/∂in in m->dln (written), the router's and the experts' weight
 * gradients added, the load-balancing loss's included (zt_llama_moe_aux). */
void zt_llama_moe_backward(zt_llama *m, int set, int l, const zt_real *in, const uint16_t *in16, const zt_real *dout);
/* After a forward pass over every layer: m->router_aux, and its gradient's coefficients. */
void zt_llama_moe_aux(zt_llama *m);

#endif

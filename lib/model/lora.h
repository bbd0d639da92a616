/* model/lora: low-rank adapters (LoRA, DoRA) on the linear layers of a frozen model.
 *
 * A targeted linear layer computes y = W·x + s·B·(A·dropout(x)), A [r, in] and B [out, r],
 * s = alpha / r (alpha / sqrt(r) with rsLoRA). DoRA adds a magnitude M [out] per layer and
 * computes y = W·x + (g - 1)·W·xd + g·s·B·A·xd, xd = dropout(x), g = M / ||W + s·B·A|| (each
 * output's row norm, taken as a constant in the backward pass): without dropout
 * g·(W + s·B·A)·x. The base weights stay as they were loaded:
 * no gradient, no optimizer state; m->grads is NULL while adapters are attached. The
 * adapters have a flat parameter array of their own, per layer the targeted modules in the
 * order of zt_lora_module, each A then B (then DoRA's M), named as PEFT names them
 * (base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight, ...q_proj.lora_magnitude_vector). `view` presents that
 * array as a model's flat parameters (params, grads, numel, tensors), which is what ZeRO
 * stages 0-2, AdamW and the checkpoints take. On a reward model (a score head) the head is
 * trained fully, as PEFT's modules_to_save trains it: a copy of it follows the adapters in the
 * flat array (base_model.model.score.weight), and the passes use the copy; so do the embedding
 * and the LM head with modules_to_save = ["embed_tokens", "lm_head"]
 * (base_model.model.model.embed_tokens.weight, base_model.model.lm_head.weight), and the rows of
 * trainable_token_indices (base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta,
 * [tokens, C]: the rows themselves, not a difference). `disabled` switches every
 * adapter (and the copy) off: the passes compute the frozen base model alone, bit for bit as a
 * model without adapters does (DPO's reference, as PEFT's disable_adapter()).
 *
 *     zt_lora_attach(&m, &(zt_lora_config){.r = 8, .alpha = 16, .targets = ZT_LORA_ALL});
 *     zt_lora_init_weights(&m, seed);          // or zt_lora_load(&m, "adapter_dir")
 *     zt_zero_init(&z, comm, &opts, &m.lora->view);
 *     ... zt_llama_forward_backward(&m, ...) fills m.lora->view.grads
 *     zt_lora_save(&m, "final", "base/model");
 *
 * Dropout (training passes only) keeps each element of a module's input with probability
 * 1 - p from a hash of (m->draw_seed, m->pass, layer, module, element): the recompute of a checkpointed
 * layer draws the same mask, and a resumed run the same masks as an uninterrupted one.
 */
#ifndef ZT_MODEL_LORA_H
#define ZT_MODEL_LORA_H

#include <stdint.h>

#include "llama.h"
#include "qbase.h"

/* The linear layers an adapter can sit on, with their Hugging Face module names. A family has
 * either q, k, v, gate and up, or (Phi-3) the fused qkv_proj and gate_up_proj, which PEFT adapts
 * as one module each: one A [r, hidden] and one B [q + k + v outputs, r] over the fused output.
 * In a mixture of experts gate, up and down are every expert's (Mixtral's w1, w3, w2: adapters of
 * their own, expert by expert, as PEFT puts them on each expert's nn.Linear) and the router is
 * "gate" (its [experts, hidden] weight); Qwen2-MoE's shared expert has gate, up and down of its
 * own (mlp.shared_expert.gate_proj, ...: the names gate_proj, up_proj and down_proj mean both, as
 * PEFT matches them) and its gate "shared_expert_gate" ([1, hidden]). */
typedef enum zt_lora_module {
    ZT_LORA_Q,
    ZT_LORA_K,
    ZT_LORA_V,
    ZT_LORA_O,
    ZT_LORA_GATE,
    ZT_LORA_UP,
    ZT_LORA_DOWN,
    ZT_LORA_QKV,
    ZT_LORA_GATE_UP,
    ZT_LORA_ROUTER,
    ZT_LORA_SHARED_GATE,
    ZT_LORA_SHARED_UP,
    ZT_LORA_SHARED_DOWN,
    ZT_LORA_SHARED_ROUTER,
    ZT_LORA_NMODULES
} zt_lora_module;
/* q_proj, ..., qkv_proj, gate_up_proj, gate, gate_proj, up_proj, down_proj (the shared expert's),
 * shared_expert_gate */
extern const char *const zt_lora_module_names[ZT_LORA_NMODULES];
/* "all-linear": every linear module the model's family has (zt_lora_attach picks them) */
#define ZT_LORA_ALL ((1u << ZT_LORA_NMODULES) - 1)

/* How A starts (B starts at zero either way): Kaiming-uniform with a = sqrt(5), that is
 * U(-1/sqrt(in), 1/sqrt(in)), as PEFT's default; or N(0, 1/r²), PEFT's "gaussian". */
typedef enum zt_lora_init { ZT_LORA_INIT_KAIMING, ZT_LORA_INIT_GAUSSIAN } zt_lora_init;
extern const char *const zt_lora_init_names[2]; /* "default", "gaussian" */

/* What the adapter is: LoRA, or DoRA (PEFT's use_dora). */
typedef enum zt_lora_method { ZT_LORA_METHOD_LORA, ZT_LORA_METHOD_DORA } zt_lora_method;
extern const char *const zt_lora_method_names[2]; /* "lora", "dora" */

/* The most rows trainable_token_indices may name, and the most new rows of a vocabulary their ids
 * may grow an adapter's base by (a chat template's tokens: a few) */
#define ZT_LORA_MAX_TOKENS 1024
#define ZT_LORA_MAX_NEW_ROWS 1024
/* The most layers layers_to_transform may name */
#define ZT_LORA_MAX_LAYERS 1024

typedef struct zt_lora_config {
    int r;
    double alpha, dropout;
    unsigned targets; /* bit i: module i; ZT_LORA_ALL: all-linear */
    /* adapter_config.json's target_modules as PEFT's layer paths: module i in layers 0 to
     * layers_named[i] - 1 (0: named alone, in every layer) */
    int layers_named[ZT_LORA_NMODULES];
    /* or adapter_config.json's target_modules as one regular expression (zt_lora_pattern_targets;
     * targets: what it names in layer 0), "" none */
    char target_pattern[2048];
    /* the first target_modules name that is none of zt's modules nor a path under model., "" none:
       allowed on an image-text model, whose vision tower PEFT adapts too ("fc1", "attn.proj"),
       refused elsewhere */
    char other_target[64];
    int rslora;
    double loraplus_lr_ratio; /* LoRA+: B (and DoRA's magnitudes) at the learning rate times this; 0: off */
    zt_lora_init init;
    zt_lora_method method;
    int score;     /* the score head trained too (PEFT's SEQ_CLS task: modules_to_save = ["classifier", "score"]) */
    unsigned save; /* ZT_LORA_SAVE_* bits: the embedding and the LM head trained whole (modules_to_save) */
    /* PEFT's trainable_token_indices: these rows of the embedding (and so of a tied LM head)
       trained, the rest frozen (lora_tokens.c); n_tokens 0: none */
    int n_tokens;
    int32_t tokens[ZT_LORA_MAX_TOKENS];
    /* PEFT's layers_to_transform: the adapters on these layers alone; n_layers 0: on every layer */
    int n_layers;
    int32_t layers[ZT_LORA_MAX_LAYERS];
} zt_lora_config;
enum { ZT_LORA_SAVE_EMBED = 1, ZT_LORA_SAVE_HEAD = 2 }; /* modules_to_save "embed_tokens", "lm_head" */

/* The module named name (q_proj, ...; Mixtral's w1, w3, w2 are gate_proj, up_proj, down_proj; gate_proj,
 * up_proj and down_proj the experts', zt_lora_named_targets adds the shared expert's), or -1. */
int zt_lora_module_of(const char *name);
/* Whether mod is a projection of the attention (self_attn), not of the MLP */
int zt_lora_in_attention(zt_lora_module mod);
/* targets given by module names in a model of config c: a shared expert's gate, up and down too
 * where gate_proj, up_proj and down_proj are named, as PEFT matches names */
unsigned zt_lora_named_targets(const zt_llama_config *c, unsigned targets);
/* The Hugging Face path of module mod in layer l after "model." ("layers.3.mlp.down_proj") */
void zt_lora_module_path(char *buf, size_t cap, int l, zt_lora_module mod);
/* The same in a model of config c (NULL: a dense one's names): a mixture of experts' gate, up and
 * down are expert e's ("layers.3.mlp.experts.5.down_proj", Mixtral's
 * "layers.3.block_sparse_moe.experts.5.w2"), its router "layers.3.mlp.gate". */
void zt_lora_model_path(const zt_llama_config *c, char *buf, size_t cap, int l, int e, zt_lora_module mod);
/* What PEFT puts before a module's path in the model ("model.layers.3..." or "lm_head") in an
 * adapter's tensor names: "base_model.model.", an image-text checkpoint's
 * "base_model.model.language_model." */
const char *zt_lora_peft_prefix(const zt_llama_config *c);
/* mod's name in c's checkpoints and PEFT's target_modules (Mixtral's experts: w1, w3, w2) */
const char *zt_lora_model_module_name(const zt_llama_config *c, zt_lora_module mod);
/* Whether c has an adapter of mod per expert (a mixture of experts' gate, up and down) */
int zt_lora_per_expert(const zt_llama_config *c, zt_lora_module mod);
/* target_modules as a regular expression that each module's whole name must match, as PEFT
 * reads a string (lora_pattern.c): the modules it names in layer 0 of a model of config c (NULL:
 * a dense one's names; a mixture of experts' experts by their own paths) into *targets. ZT_EUSER,
 * naming `where`, for a pattern PCRE2 cannot read, one that names none of layer 0's linear
 * modules, other ones in another of `layers` layers (adapters on part of the layers) or some of
 * a module's experts, or the LM head or the embedding. */
zt_status zt_lora_pattern_targets(const char *where, const char *pattern, const zt_llama_config *c, int layers,
                                  unsigned *targets);

typedef struct zt_lora {
    zt_lora_config cfg;
    double scale;                          /* s */
    size_t off[ZT_LORA_NMODULES];          /* A's offset in a layer's adapter block (B follows A) */
    size_t layer_numel;                    /* elements of one layer's adapters */
    int *layer_slot;                       /* [L]: each layer's place among the adapted ones, -1 none */
    /* a mixture of experts: each expert's gate, up and down adapters (their off[] in expert 0's)
       take expert_numel elements, one expert after the other, after the layer's other adapters */
    size_t expert_numel;
    zt_llama view;                         /* the adapters as flat parameters (never zt_llama_free'd) */
    int training;                          /* this pass drops (forward and backward of a gradient pass) */
    int disabled;                          /* the adapters are switched off: the passes are the base's */
    size_t score_off, embed_off, head_off; /* the copies of the score head, embedding and LM head */
    size_t tokens_off;                     /* the trainable tokens' rows [n_tokens, C] */
    int32_t *slot_of;                      /* host [V]: each token's row among the trainable tokens', -1 none */
    int32_t *slot_host;  /* host [scratch_tokens]: a pass's positions' rows (slot_of of their tokens) */
    int32_t *token_slot; /* the same where the backend computes */
    zt_real *scratch;                      /* xd [N, widest input], dxd likewise, u and du [N, r] */
    uint16_t *scratch16; /* bf16 products: A and B of a module, u and du, and xd ([N, widest], dropout) */
    uint16_t *w16, *u16, *du16, *xd16;
    zt_real *xd, *dxd, *u, *du, *norm_sink; /* norm_sink: [max(C, q/k norms)] where the frozen norms' gradients go */
    zt_real *dv, *de;                       /* DoRA: [N, widest output] each */
    size_t scratch_tokens;
    /* DoRA: ||W + s·B·A|| of every output of every targeted layer, as the last forward pass of
     * the layer computed them (the backward pass takes them from there), at weight_norm +
     * layer_outputs·l + norm_off[mod]. keep_norms: forward passes leave them as they are (the
     * finite-difference check of the gradient, which treats them as constants). */
    zt_real *weight_norm;
    size_t norm_off[ZT_LORA_NMODULES], layer_outputs;
    int keep_norms;
    int decode_norms; /* zt_lora_prepare_decode has computed them */
    /* tensors of the adapter file on the tensors an image-text model carries through (its vision
       tower, which PEFT's "all-linear" and lists naming q_proj adapt too): no pass reads them (text
       does not reach the tower); zt export --merge merges them into the carried weights */
    int carried;
} zt_lora;

/* Attaches zeroed adapters to m (weights loaded, vocabulary final; with c->score and c->save the
 * copies of the score head, the embedding and the LM head start as the base's): frees the base's
 * gradient array. As PEFT, targets that name no module of
 * the model's family are left out (with a warning), and m->lora->cfg.targets holds those
 * adapted. ZT_EUSER for a bad configuration (r < 1, no targets or none the model has, alpha <= 0,
 * DoRA off the CPU, a score head the model lacks). */
zt_status zt_lora_attach(zt_llama *m, const zt_lora_config *c);
/* What zt_lora_attach(m, c) allocates, without attaching (zt validate): the flat array's
 * elements (the adapters and the copies of modules_to_save), and the bytes of the rest (DoRA's
 * norms, the norms' gradient sink, the scratch for micro-batches of `tokens` positions). */
size_t zt_lora_numel(const zt_llama *m, const zt_lora_config *c);
size_t zt_lora_buffer_bytes(const zt_llama *m, const zt_lora_config *c, size_t tokens);
/* Frees the adapters (zt_llama_free calls it). */
void zt_lora_free(zt_llama *m);
/* A as zt_lora_init says from streams (seed, tensor), B zero; DoRA's M = ||W + s·B·A|| = ||W||. */
zt_status zt_lora_init_weights(zt_llama *m, uint64_t seed);
/* The scratch for micro-batches of `tokens` positions (zt_llama_alloc_acts calls it). */
zt_status zt_lora_alloc_scratch(zt_llama *m, size_t tokens);

/* adapter_config.json of a PEFT adapter directory: r, lora_alpha, lora_dropout,
 * target_modules, use_rslora, use_dora, modules_to_save ("embed_tokens", "lm_head", and "score",
 * with "classifier" or not: a reward model's head); anything zt cannot train exactly (biases,
 * other modules) is ZT_EUSER naming the file and key. */
zt_status zt_lora_read_config(const char *dir, zt_lora_config *c);
/* adapter_model.safetensors of dir into the attached adapters (names and shapes checked). PEFT's
 * further copies of a grown vocabulary's embedding and LM head (original_module, modules_to_save)
 * are not read: the trained copy is the one without either in its name. */
zt_status zt_lora_load(zt_llama *m, const char *dir);
/* A PEFT adapter directory: adapter_config.json (base_model_name_or_path = base) and
 * adapter_model.safetensors in fp32. */
zt_status zt_lora_save(const zt_llama *m, const char *dir, const char *base);

/* Whether dir is a PEFT adapter directory (it has adapter_config.json). */
int zt_lora_is_adapter_dir(const char *dir);
/* base_model_name_or_path of dir's adapter_config.json into base (cap bytes): the base model the
 * adapter names, as PEFT's AutoPeftModel takes it. */
zt_status zt_lora_read_base(const char *dir, char *base, size_t cap);
/* The adapters of the PEFT adapter directory dir attached to m (weights loaded, vocabulary
 * final) and loaded, on the base they were trained on: m's linear weights quantized and
 * dequantized as dir's zt_quantization.json notes, or without the note as kind and double_quant
 * say (ZT_QBASE_NONE: left as they are). Base + adapter without merging (zt eval, zt generate). */
zt_status zt_lora_attach_dir(zt_llama *m, const char *dir, zt_qbase_kind kind, int double_quant);
/* m's vocabulary grown (zt_llama_resize_vocab) to the rows of dir's trained embedding or LM head
 * (modules_to_save: a vocabulary grown in training, which PEFT saves there), or past its largest
 * trainable token (up to ZT_LORA_MAX_NEW_ROWS new rows; one further is refused as outside the
 * vocabulary); nothing without them. */
zt_status zt_lora_fit_vocab(zt_llama *m, const char *dir);
/* m's vocabulary grew from V (tokens a chat template adds): ZT_EUSER unless c trains the new rows,
 * its modules_to_save holding the embedding and (a causal LM) the LM head, or its trainable tokens
 * the new ids (and, an untied LM head, modules_to_save the head). */
zt_status zt_lora_check_vocab(const zt_llama *m, const zt_lora_config *c, int V);

/* CRC-32C of the base model's weights as they are in memory (and its shape): what a
 * checkpoint records so that a resume onto another base is refused. */
uint32_t zt_lora_base_hash(const zt_llama *m);
/* The same hash fed in pieces, for a base streamed from its files: start, then every weight of
 * the flat array in order, in pieces of any size. */
uint32_t zt_lora_base_hash_start(const zt_llama *m);
uint32_t zt_lora_base_hash_add(uint32_t h, const zt_real *w, size_t n);

/* W += s·B·A for every adapter (DoRA: W = g·(W + s·B·A)), and the trained copies (modules_to_save,
 * the score head) for the model's: the merged model, in m->params (adapters left as they are). A
 * model whose LM head is its embedding is untied first (zt_llama_untie) when the adapters train
 * either: PEFT's copies of them train apart. */
zt_status zt_lora_merge(zt_llama *m);
/* The adapters of an adapter file on the tensors an image-text model carries through, merged into
 * them as a save copies them (lora_carried.c): zt_llama_save_carrying takes it. open reads m's
 * attached adapters' configuration (r, alpha, rsLoRA; DoRA on those tensors is refused) and dir's
 * adapter_model.safetensors, left open until close. */
struct zt_st_reader;
struct zt_st_writer;
struct zt_st_tensor;
typedef struct zt_lora_carried {
    struct zt_st_reader *rd;
    double scale;
    struct carried_merge *merges; /* one per merged tensor, alive until close (the writer's fills) */
    int n, cap;
} zt_lora_carried;
zt_status zt_lora_carried_open(zt_lora_carried *lc, const zt_llama *m, const char *dir);
void zt_lora_carried_close(zt_lora_carried *lc);
/* Base tensor t (carried through) merged with its adapter, W + s·B·A in fp32, into w in t's
 * dtype (*added 1); *added 0 where the adapter has none for t. */
zt_status zt_lora_carried_add(zt_lora_carried *lc, struct zt_st_writer *w, const struct zt_st_tensor *t, int *added);

/* The forward and backward of module mod's adapter in layer l (llama.c): y[N, O] (rows ldy
 * apart) += s·B·A·drop(x[N, I]) (DoRA: its part of y above, W·x being in y already); and from
 * dy, dx[N, I] += the adapter's part of ∂/∂x, and the adapter's gradients. x16 and dy16: the
 * bf16 copies of x and dy (dy16 with dy's row stride) a bf16 model made for its base's products;
 * given both ways (NULL in neither pass, or in both), the adapter's products take bf16 operands
 * too, as PEFT's under bf16 autocast (LoRA, not DoRA); NULL: fp32 products. */
void zt_lora_forward(zt_llama *m, int l, zt_lora_module mod, const zt_real *x, const uint16_t *x16, zt_real *y,
                     int ldy);
void zt_lora_backward(zt_llama *m, int l, zt_lora_module mod, const zt_real *x, const uint16_t *x16, const zt_real *dy,
                      const uint16_t *dy16, int ldy, zt_real *dx);
/* The same on n rows (at most the micro-batch's), for expert e's gate, up or down adapter (e 0
 * otherwise): a mixture of experts' rows routed to the expert, or its router's (llama_moe.c). */
void zt_lora_forward_rows(zt_llama *m, int l, int e, zt_lora_module mod, const zt_real *x, const uint16_t *x16,
                          zt_real *y, int ldy, int n);
void zt_lora_backward_rows(zt_llama *m, int l, int e, zt_lora_module mod, const zt_real *x, const uint16_t *x16,
                           const zt_real *dy, const uint16_t *dy16, int ldy, zt_real *dx, int n);
/* The decoder's (llama_decode.c, llama_moe.c: e the expert, as above): y[n, O] += s·B·A·x[n, I]
 * (DoRA: its part of y, as in the forward pass), no dropout; n at most the scratch's tokens. */
void zt_lora_decode(zt_llama *m, int l, int e, zt_lora_module mod, const zt_real *x, zt_real *y, int ldy, int n);
/* DoRA: the norms ||W + s·B·A|| the decoder uses, from the weights as they are now (the decoder
 * refuses a DoRA model without them; again after the weights change). Nothing to do for LoRA. */
zt_status zt_lora_prepare_decode(zt_llama *m);
/* The score head's trained copy and its gradient (config.score, adapters on), else NULL. */
zt_real *zt_lora_score(const zt_llama *m, int grad);
/* A base streamed into its stage-3 slices, elements [off, off + n) of it just read into src (host
 * memory): the copies of modules_to_save and the score head take their part of them (attached
 * before the base is read, they start as its tensors). */
void zt_lora_copies_load(zt_llama *m, size_t off, size_t n, const zt_real *src);
/* The trained copies of the embedding and of the LM head, [V, C] each, and their gradients
 * (config.save, adapters on), else NULL. On a model whose LM head is its embedding each copy
 * starts as that matrix and trains apart, as PEFT's. */
zt_real *zt_lora_embed(const zt_llama *m, int grad);
zt_real *zt_lora_head(const zt_llama *m, int grad);

/* Trainable tokens (lora_tokens.c), nothing without them or with the adapters off. lookup: the
 * trained rows of the positions ids[N] (host memory) holds them at, written over out [N, C] (the
 * base's lookup); embed_backward: their gradient from dout [N, C], the positions of the last
 * lookup. logits: a tied LM head's logits of the vocabulary tile [v0, v0 + nv) (logits[n][ld]
 * at v0's column) for the trained tokens in it, from x [n, C]; head_backward: from the tile's
 * gradient dlogits (rows V apart), the trained rows' gradient and their part of dx (the base's
 * rows' already in it). on_head: whether the LM head's logits are patched so. */
void zt_lora_tokens_lookup(zt_llama *m, zt_real *out, const int32_t *ids, int N);
void zt_lora_tokens_embed_backward(zt_llama *m, const zt_real *dout, int N);
void zt_lora_tokens_logits(zt_llama *m, zt_real *logits, int ld, const zt_real *x, int v0, int n, int nv);
void zt_lora_tokens_head_backward(zt_llama *m, zt_real *dx, const zt_real *dlogits, const zt_real *x, int v0, int n,
                                  int nv);
int zt_lora_tokens_on_head(const zt_llama *m);

#endif

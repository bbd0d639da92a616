/* model/llama: Llama-family decoder models (llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, olmo2,
 * phi3, smollm3, and the mixtures of experts mixtral, qwen2_moe, qwen3_moe, olmoe): config, parameter layout, and explicit forward/backward per layer (no autograd graph).
 *
 * Parameters live in one flat array: [embedding | layer 0 | ... | layer L-1 |
 * final norm (+ LM head when untied)], each layer one contiguous block whose
 * q/k/v weights sit together (one GEMM makes q, k and v) and so do gate/up.
 * ZeRO shards and offload files are offsets into these blocks.
 *
 *     zt_llama_config cfg;  zt_llama m;
 *     zt_llama_config_load(&cfg, "model/config.json");
 *     zt_llama_init(&m, &cfg, zt_backend_cpu(), ZT_F32);
 *     zt_llama_load_weights(&m, "model");
 *     zt_llama_alloc_acts(&m, B, T, checkpointing);
 *     double loss_sum;
 *     zt_llama_forward_backward(&m, input, target, pos, 1.0 / n_targets, &loss_sum); // grads += ...
 */
#ifndef ZT_MODEL_LLAMA_H
#define ZT_MODEL_LLAMA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/backend/backend.h"
#include "lib/core/rng.h"
#include "lib/core/status.h"

enum { ZT_QK_NORM_HEADS = 1, ZT_QK_NORM_WHOLE = 2 };
enum { ZT_ROPE_MAX_FACTORS = 256 };         /* longrope's factors: one per rotary pair */
enum { ZT_LLAMA_MAX_LISTED_LAYERS = 1024 }; /* per-layer lists in config.json (no_rope_layers) */

typedef struct zt_llama_config {
    /* llama | mistral | qwen2 | qwen3 | gemma | gemma2 | gemma3_text | glm | glm4 | qwen2_moe | olmo2 | phi3 | smollm3 | granite | mixtral |
       qwen3_moe | olmoe */
    char model_type[16];
    int vocab_size, hidden_size, intermediate_size, num_hidden_layers;
    int num_attention_heads, num_key_value_heads, head_dim, max_position_embeddings;
    double rms_norm_eps, rope_theta;
    double partial_rotary_factor; /* the rotary embedding on the first head_dim·factor elements of a head */
    int rope_interleaved;         /* GLM: its pairs are a head's elements (2j, 2j+1), not (j, j + rotary/2) */
    struct {
        char type[16]; /* "" (none) | linear | llama3 | longrope (Phi-3) */
        double factor, low_freq_factor, high_freq_factor;
        /* llama3; Phi-3's top-level key, past which longrope takes its long factors */
        int original_max_position_embeddings;
        int n_short, n_long; /* longrope: a factor per rotary pair, dividing its frequency */
        double short_factor[ZT_ROPE_MAX_FACTORS], long_factor[ZT_ROPE_MAX_FACTORS];
    } rope_scaling;
    int tie_word_embeddings;
    int qkv_bias, o_bias; /* Qwen2, GLM: q/k/v only; Llama attention_bias: q/k/v/o */
    /* q_norm, k_norm before the rotary embedding: ZT_QK_NORM_HEADS (Qwen3, Gemma 3) an RMSNorm over
       each q and k head, ZT_QK_NORM_WHOLE (OLMo 2) one over the whole q and the whole k projection */
    int qk_norm;
    int sliding_window; /* keys per query, 0 = unlimited */
    /* Gemma: norm scales 1 + weight, embeddings times sqrt(hidden_size), GeGLU in place of SwiGLU:
       gelu's tanh form, or its exact (erf) form with gelu_exact (Gemma 1's hidden_act "gelu") */
    int gemma, gelu_exact;
    /* Gemma, OLMo 2, GLM-4: a norm on each block's output inside the residual (post_attention /
       post_feedforward, GLM-4's post_self_attn / post_mlp); OLMo 2 has no norm on the blocks'
       inputs (no_pre_norms) */
    int post_norms, no_pre_norms;
    int sliding_window_pattern;         /* 0: the window on every layer; p: on layers l with (l + 1) % p != 0 only */
    double query_pre_attn_scalar;       /* attention scores scaled by its -1/2 power; 0: head_dim's */
    double attn_softcap, final_softcap; /* attention-logit and final-logit soft-capping, 0 = none */
    double rope_local_theta;            /* Gemma 3: the windowed layers' rope theta (no rope_scaling); 0: rope_theta */
    /* Granite: embeddings times embedding_multiplier, attention scores times attention_multiplier
       (in place of head_dim^-1/2), each block's output times residual_multiplier before it joins the
       residual, logits divided by logits_scaling; 1 elsewhere (attention_multiplier 0: unset) */
    double embedding_multiplier, attention_multiplier, residual_multiplier, logits_scaling;
    /* SmolLM3: layers without the rotary embedding: those whose no_rope_layers entry is 0 (a list of
       n_no_rope_layers, one per layer), else, without the list, those with (l + 1) % interval == 0;
       interval 0: every layer has it */
    int no_rope_layer_interval, n_no_rope_layers;
    unsigned char no_rope_layers[ZT_LLAMA_MAX_LISTED_LAYERS];
    int bos_token_id, eos_token_id; /* -1 = unset */
    int pad_token_id; /* -1 = unset; else its embedding row gets no gradient from the lookup (padding_idx) */
    /* A mixture of experts (mixtral, qwen2_moe, qwen3_moe, olmoe) where n_experts > 0: every layer's
       MLP is n_experts SwiGLU experts of moe_intermediate_size and a router, which takes the softmax
       of its logits over all experts and sends each token to the experts_per_tok most likely, their
       outputs weighted by those probabilities (norm_topk_prob: divided by their sum); Qwen2-MoE adds
       a shared expert every token passes through, a SwiGLU of shared_expert_size (0: none) whose
       output is weighted by the sigmoid of its gate's one logit. output_router_logits: the
       training loss adds router_aux_loss_coef times the load-balancing loss (llama_moe.c). */
    int n_experts, experts_per_tok, moe_intermediate_size, norm_topk_prob, output_router_logits, shared_expert_size;
    double router_aux_loss_coef;
    int num_labels;   /* 0: a causal LM (lm_head); 1: a value / reward model (score head, *ForSequenceClassification) */
    /* The language model of an image-text checkpoint (model_type gemma3, mistral3 or llava, whose
       text_config it is, model_type here its own; qwen2_vl or qwen2_5_vl, a qwen2 at the top): its
       tensors are named as a causal LM's under text_prefix ("language_model.", or "" for Qwen2-VL's),
       every other tensor (the vision tower's) is carried from the source through every save */
    int image_text;
    char text_prefix[16];
    char path[4096];  /* the config.json it was read from ("" when made up): saving keeps its other keys */
} zt_llama_config;

/* name past "language_model." (an image-text checkpoint's language model: language_model.model.layers.0...),
 * the name itself when it has none */
const char *zt_llama_text_name(const char *name);
/* A tensor of c's checkpoints that zt does not train but carries through a save: in an image-text
 * checkpoint every tensor outside its language model's text_prefix + model. and lm_head. (the
 * vision tower, its projector). */
int zt_llama_passes_through(const zt_llama_config *c, const char *name);

/* Defaults of a small Llama (what `zt init --arch llama` starts from). */
void zt_llama_config_default(zt_llama_config *c);
/* Reads Hugging Face config.json; every problem names the file and the key (ZT_EUSER). */
zt_status zt_llama_config_load(zt_llama_config *c, const char *path);
/* Writes config.json: the source's (c->path) with the keys zt changed, else one made from c. */
zt_status zt_llama_config_save(const zt_llama_config *c, const char *path, const char *torch_dtype);
/* Sets one config.json key from text ("hidden_size", "512"); for `zt init key=value`. */
zt_status zt_llama_config_set(zt_llama_config *c, const char *key, const char *value);
/* Checks sizes and divisibility; names the key at fault. */
zt_status zt_llama_config_check(const zt_llama_config *c, const char *where);
/* Whether layer l is a local one (sliding_window_pattern), and its window (keys per query,
 * 0 = unlimited). */
int zt_llama_layer_local(const zt_llama_config *c, int l);
int zt_llama_layer_window(const zt_llama_config *c, int l);
/* Whether layer l has the rotary embedding (all but SmolLM3's no-rope layers). */
int zt_llama_layer_rope(const zt_llama_config *c, int l);
/* An expert's intermediate size: Qwen2-MoE's and Qwen3-MoE's moe_intermediate_size, else intermediate_size. */
int zt_llama_expert_size(const zt_llama_config *c);
/* Whether c's checkpoints name q, k, v as one qkv_proj (Phi-3), and gate, up as one gate_up_proj
 * (Phi-3, GLM, GLM-4). */
int zt_llama_fused_qkv(const zt_llama_config *c);
int zt_llama_fused_gate_up(const zt_llama_config *c);
/* The rotary elements of a head: int(head_dim · partial_rotary_factor), as transformers. */
int zt_llama_rotary_dim(const zt_llama_config *c);

/* One named tensor inside the flat parameter array. */
typedef struct zt_llama_tensor {
    char name[128]; /* Hugging Face name, e.g. model.layers.3.self_attn.q_proj.weight */
    size_t offset; /* elements from the start of the parameter array */
    int ndim;
    int64_t shape[2];
    int decay;       /* weight decay applies (matrices yes; norm weights and biases no) */
    double lr_scale; /* its learning rate is the schedule's times this (LoRA+: the B matrices') */
} zt_llama_tensor;

/* Offsets of one layer's pieces, in elements from the layer block's start. */
typedef struct zt_llama_layer_layout {
    /* qkn: q_norm then k_norm (head_dim each, or the q and the k projection's widths with
       ZT_QK_NORM_WHOLE); post_attn, post_mlp: the norms of the attention's and the MLP's outputs;
       ln1, ln2 take no room without pre norms */
    size_t ln1, wqkv, bqkv, qkn, wo, bo, post_attn, ln2, post_mlp, wgu, wd, numel;
    /* a mixture of experts: the router's weight [n_experts, C] at router, wgu and wd expert 0's
       gate/up and down weights, expert e's `expert` elements further on (0 in a dense layer); a
       shared expert's gate/up [2·shared_expert_size, C], down [C, shared_expert_size] and gate [1, C] */
    size_t router, expert, shared_gu, shared_d, shared_gate;
} zt_llama_layer_layout;

typedef struct zt_llama_layer_acts {
    zt_real *ln1, *rstd1, *qkv, *att, *lse, *xmid, *ln2, *rstd2, *gateup, *h;
    zt_real *qkin, *rstdqk; /* qk_norm: the q and k heads before their norm [N, H + KV, D], 1/rms [N, H + KV] */
    zt_real *attn_out, *rstd3, *mlp_out, *rstd4; /* post norms: the outputs they take, and their 1/rms */
    /* a bf16 model's bf16 copies of the products' inputs (the attention's input, att, ln2, h),
     * made once in the forward pass and read again by the weight gradients' products; NULL
     * unless bf16_inputs and the base is unquantized (a quantized base's products take fp32) */
    uint16_t *in16, *att16, *ln2_16, *h16;
} zt_llama_layer_acts;

/* How a unit's memory is about to be used, or was: its weights read in the forward pass,
 * weights read and gradient accumulated in the backward pass, (the embedding's backward)
 * the gradient only, or weights read again in the backward pass to recompute a
 * checkpointed layer's forward (a tiled MLP's tiles, each acquired twice in backward). */
typedef enum { ZT_LLAMA_FORWARD, ZT_LLAMA_BACKWARD, ZT_LLAMA_GRADS, ZT_LLAMA_RECOMPUTE } zt_llama_use;

/* Hooks around every use of a unit in zt_llama_forward_backward (ZeRO stage 3 gathers
 * the weights in acquire and frees them in release). finish ends the micro-batch. With a
 * tied LM head the embedding is used again by the head: acquired there as well. */
typedef struct zt_llama_hooks {
    void *ctx;
    void (*acquire)(void *ctx, int unit, zt_llama_use use);
    void (*release)(void *ctx, int unit, zt_llama_use use);
    void (*finish)(void *ctx, int backward);
} zt_llama_hooks;

/* Activation offload (lib/offload/actstore.h): with checkpointing and a gradient, put takes
 * layer l's input x[l] once the layer's forward is done, and get brings it back just before
 * the layer's backward. */
typedef struct zt_llama_act_hooks {
    void *ctx;
    void (*put)(void *ctx, int layer, zt_real *x, size_t bytes);
    void (*get)(void *ctx, int layer, zt_real *x, size_t bytes);
} zt_llama_act_hooks;

/* Elements allocated past numel in params and grads (zeros): ZeRO pads the flat
 * buffers to a multiple of the world size, which is at most this. */
#define ZT_LLAMA_PAD 65536

typedef struct zt_llama {
    zt_llama_config cfg;
    zt_backend *be;
    int dtype_bf16;  /* matmuls use the bf16 copy of the weights */
    int bf16_inputs; /* bf16: bf16 copies of the products' inputs kept (zt_llama_layer_acts) */
    int decoded;     /* the linear weights decoded from a quantized (bitsandbytes) checkpoint */
    int C, F, H, KV, D, L, V, S3, HD;
    int R; /* rotary elements of a head (D, or fewer with partial_rotary_factor) */

    zt_llama_layer_layout lay;
    size_t embed_off, layer0_off, norm_off, head_off, numel; /* elements */
    /* memory-centric tiling (0 or 1: one unit): an untied embedding and an untied LM head in this
       many vocabulary tiles, each layer's MLP in this many row tiles of its gate/up and of its
       down product; each tile a unit of its own, gathered, used and reduced on its own */
    int embed_tiles, mlp_tiles, head_tiles;
    zt_llama_tensor *tensors;
    int n_tensors;

    zt_real *params, *grads; /* fp32 master (double in the check build) and gradients */
    uint16_t *params16;      /* bf16 copy when dtype_bf16 */

    /* activations for micro-batches of B×T (zt_llama_alloc_acts; zt_llama_set_length lowers T
       below T_alloc, what they were allocated for) */
    int B, T, T_alloc, checkpointing, chunk;
    void *acts_mem;
    zt_real **x;             /* L+1 residual-stream tensors [N, C]: the input of each layer, x[L] the last output */
    zt_llama_layer_acts *la; /* L sets, or 1 with checkpointing */
    zt_real *lnf, *rstdf, *logits, *dres, *dln, *datt, *dqkv, *dgateup, *dh, *cos_t, *sin_t;
    zt_real *dpost;                /* ∂loss/∂ a post norm's input (Granite: a block's output) */
    zt_real *capped;               /* final-logit soft-capping: a chunk's capped logits */
    zt_real *pad_mask;             /* [N]: 0 where the input is pad_token_id, else 1 */
    zt_real *cos_l, *sin_l;        /* Gemma 3: the windowed layers' rotary tables (else cos_t, sin_t) */
    zt_real attn_scale;            /* scores q·k times this: query_pre_attn_scalar^-1/2 or head_dim^-1/2 */
    double *loss_rows, *loss_host; /* each row's loss, and its copy in host memory */
    zt_real *head_out, *coef;      /* objectives: the score head's values, and ∂loss/∂output per position */
    double *out_host, *coef_host;  /* their host copies (zt_llama_forward_objective) */
    zt_real *real_host;
    uint16_t *a16, *b16; /* bf16 staging for matmul operands */
    uint16_t *lnf16;     /* lnf's bf16 copy (zt_llama_layer_acts: in16), or NULL */
    int32_t *input, *target, *pos;
    const zt_llama_hooks *hooks;         /* NULL: every weight is always in params */
    struct zt_lora *lora;                /* NULL, or LoRA adapters (lora.h): the base is frozen and grads is NULL */
    struct zt_qbase *qbase;              /* NULL, or the frozen base's linear weights quantized (qbase.h) */
    const zt_llama_act_hooks *act_store; /* NULL: the layer inputs stay */
    /* What gradient passes draw (LoRA dropout, NEFTune's noise) is a function of (draw_seed,
     * pass) and the element, so a recomputed layer draws it again; pass counts gradient passes. */
    uint64_t draw_seed, pass;
    /* NEFTune: > 0 adds uniform noise in [-a, a), a = neftune_alpha / sqrt(T·C), to the embedding
     * output of every gradient pass (not to evaluation or generation) */
    double neftune_alpha;
    /* A mixture of experts (cfg.n_experts > 0): the routing of every activation set and its
     * scratch (llama_moe.c); the load-balancing loss of the last pass over all layers, and its
     * weight in the gradient (zt_llama_init: router_aux_loss_coef with output_router_logits, else
     * 0; a trainer divides it by the passes of a step); row_lens, when set, the tokens of each of
     * the B rows before their padding, which the loss leaves out (NULL: every position counts). */
    struct zt_llama_moe *moe;
    double router_aux, router_aux_weight;
    const int32_t *row_lens;
} zt_llama;

/* Rows of the head's weight: the vocabulary, or num_labels for a score head. */
static inline int zt_llama_head_rows(const zt_llama *m) { return m->cfg.num_labels ? m->cfg.num_labels : m->V; }

/* Units: the pieces of the flat array that ZeRO stage 3 gathers one at a time, in the
 * order the forward pass uses them.
 * - Units 0 .. E-1: the embedding's vocabulary tiles (E = 1: the whole embedding).
 * - From zt_llama_layer_unit(l), layer l: one unit, or with K MLP tiles 1 + 2K units: the
 *   layer up to its MLP, then the K row tiles of the gate/up product's [2F, C] weight, then
 *   the K row tiles of the down product's [C, F] weight.
 * - zt_llama_head_unit: the final norm and (untied, untiled) LM head; with a tiled head the
 *   norm alone, followed by the head's vocabulary tiles. */
int zt_llama_units(const zt_llama *m);
int zt_llama_layer_unit(const zt_llama *m, int l);
int zt_llama_head_unit(const zt_llama *m);
/* How many tiles each part is computed in (1: not tiled; only untied vocabulary matrices tile). */
int zt_llama_embed_tiles(const zt_llama *m);
int zt_llama_mlp_tiles(const zt_llama *m);
int zt_llama_head_tiles(const zt_llama *m);
/* Tile j of k over rows rows: rows [*r0, *r0 + *nr), sizes differing by at most one. */
void zt_llama_tile(int rows, int k, int j, int *r0, int *nr);
void zt_llama_unit_range(const zt_llama *m, int unit, size_t *offset, size_t *count);
/* The hooks' acquire and release of a unit (nothing without hooks); the _tile forms only for a
 * part computed in tiles > 1, whose tiles are units of their own. */
void zt_llama_acquire(zt_llama *m, int unit, zt_llama_use use);
void zt_llama_release(zt_llama *m, int unit, zt_llama_use use);
void zt_llama_acquire_tile(zt_llama *m, int tiles, int unit, zt_llama_use use);
void zt_llama_release_tile(zt_llama *m, int tiles, int unit, zt_llama_use use);

zt_status zt_llama_init(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype);
/* A frozen base whose linear weights are encoded as q says (qbase.h: zt_qbase_init calls it; m
 * owns q from here, also when this fails): their encodings take their place in the flat array,
 * and there is no gradient array. */
struct zt_qbase;
zt_status zt_llama_init_quantized(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype,
                                  struct zt_qbase *q);
/* Sizes and layout only, nothing allocated (for memory estimates); zt_llama_free is not needed. */
zt_status zt_llama_shape(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype);
/* The same for the quantized base q describes (its kind and double_quant set; m points at q, which
 * it does not own here). */
zt_status zt_llama_shape_quantized(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype,
                                   struct zt_qbase *q);
void zt_llama_free(zt_llama *m);
/* The named tensors of config c (what zt_llama_init puts in m->tensors) without the
 * parameter arrays, for reading a checkpoint layer by layer; free(*tensors). */
zt_status zt_llama_tensors(const zt_llama_config *c, zt_llama_tensor **tensors, int *n);
const zt_llama_tensor *zt_llama_find_tensor(const zt_llama *m, const char *name);
/* Parameters used in a token's matrix products (LM head included, embedding lookup excluded; of a
 * mixture of experts the router and the experts_per_tok experts a token passes through). */
size_t zt_llama_matmul_params(const zt_llama *m);
/* Training FLOPs per token as docs/architecture.md defines them, at sequence length T. */
double zt_llama_flops_per_token(const zt_llama *m, int T);

/* Grows the vocabulary to V (embedding and untied LM head): new rows are the mean
 * of the existing rows. Activations must be allocated again afterwards. */
zt_status zt_llama_resize_vocab(zt_llama *m, int V);
/* A model whose LM head is its embedding (tie_word_embeddings) given an LM head of its own, a copy
 * of the embedding (config tie_word_embeddings false); nothing for an untied one. Attached
 * adapters stay attached; activations must be allocated again afterwards. */
zt_status zt_llama_untie(zt_llama *m);

/* Weights N(0, std) for matrices, 1 for norm weights (0 for Gemma's: a scale of 1), 0 for biases. */
zt_status zt_llama_init_weights(zt_llama *m, uint64_t seed, double std);
/* The same values tensor by tensor, in order (a model written without ever being whole in memory):
 * start at tensor i of m->tensors, then next gives its following n values. With ziggurat set after
 * start, the normal values come from zt_rng_normal_ziggurat: the same distribution, other values,
 * 6 times faster (zt init --quantize). */
typedef struct zt_llama_init_stream {
    zt_rng rng;
    double std;
    int random; /* a matrix: N(0, std) values, else `fixed` */
    int ziggurat;
    zt_real fixed;
} zt_llama_init_stream;
void zt_llama_init_stream_start(zt_llama_init_stream *s, const zt_llama *m, int i, uint64_t seed, double std);
void zt_llama_init_stream_next(zt_llama_init_stream *s, zt_real *dst, size_t n);
zt_status zt_llama_load_weights(zt_llama *m, const char *dir);
/* The same in pieces, for a model larger than memory: open checks the tensor names, read
 * fills elements [off, off + n) of the flat array into dst (dst[0] is element off), whole
 * tensors or parts of them, dropping their pages of the file's mapping afterwards. */
struct zt_st_reader;
zt_status zt_llama_weights_open(const zt_llama *m, const char *dir, struct zt_st_reader **out);
/* The same, also accepting the tensors `also` names (a quantized checkpoint's state: qbase_bnb.h). */
zt_status zt_llama_weights_open_with(const zt_llama *m, const char *dir, int (*also)(const char *name),
                                     struct zt_st_reader **out);
zt_status zt_llama_weights_read(const zt_llama *m, struct zt_st_reader *r, size_t off, size_t n, zt_real *dst);
zt_status zt_llama_save(const zt_llama *m, const char *dir, zt_dtype dtype, size_t max_shard_bytes);
/* The same, the carried tensors merged with the adapters merge has for them (zt export --merge). */
struct zt_lora_carried;
zt_status zt_llama_save_carrying(const zt_llama *m, const char *dir, zt_dtype dtype, size_t max_shard_bytes,
                                 struct zt_lora_carried *merge);
/* The tensors an image-text checkpoint carries through (zt_llama_passes_through) into a writer, as
 * the source beside c->path stores them (its float data checked finite), or merged with their
 * adapters where merge (NULL: none) has some (lora.h: zt_lora_carried); *src is left open for the
 * writer to read them (NULL for any other model), to be closed with zt_st_close after it finished. */
struct zt_st_writer;
zt_status zt_llama_add_passed_through(const zt_llama_config *c, struct zt_st_writer *w, struct zt_st_reader **src,
                                      struct zt_lora_carried *merge);
/* Records m's tensors in w to be written as dtype, their data params (zt_llama_params_map's),
 * which must stay mapped until the writer finished. */
zt_status zt_llama_writer_add(const zt_llama *m, struct zt_st_writer *w, zt_dtype dtype, const zt_real *params);
/* config.json of c in dir, its torch_dtype the weights' dtype (what zt_llama_save writes beside them). */
zt_status zt_llama_save_config(const zt_llama_config *c, const char *dir, zt_dtype dtype);
/* Saves like zt_llama_save, the weights read on demand, tensor by tensor: read fills elements
 * [first, first + n) of the flat array (the whole model never in memory). */
typedef zt_status (*zt_llama_read_fn)(void *ctx, float *dst, size_t first, size_t n);
zt_status zt_llama_save_with(const zt_llama *m, const char *dir, zt_dtype dtype, size_t max_shard_bytes,
                             zt_llama_read_fn read, void *ctx);
/* Refreshes the bf16 copy from the master weights (after loading or init). */
void zt_llama_sync_params16(zt_llama *m);
/* The weights in host memory, to read or write them: m->params itself on a host-memory
 * backend, else a copy from the device (NULL when out of memory). zt_llama_params_unmap
 * ends the access; with `changed` the device and the bf16 copy take the new values. */
zt_real *zt_llama_params_map(const zt_llama *m);
void zt_llama_params_unmap(zt_llama *m, zt_real *host, int changed);

zt_status zt_llama_alloc_acts(zt_llama *m, int B, int T, int checkpointing);
/* Micro-batches of B×T tokens from now on, T at most what the activations were allocated for:
 * a position's results do not depend on T, so shorter rows only save the work. */
void zt_llama_set_length(zt_llama *m, int T);
/* The bytes n of the flat array's weights take: fp32 and, with dtype_bf16, their bf16 copy. */
size_t zt_llama_weight_bytes(const zt_llama *m, size_t n);
/* What zt_llama_alloc_acts allocates, in bytes. */
size_t zt_llama_acts_bytes(const zt_llama *m, int B, int T, int checkpointing);
/* cos/sin of the rotary angles for positions [0, T), [T, R/2] each, with rope_scaling;
 * local: Gemma 3's windowed layers' (rope_local_base_freq, no rope_scaling). longrope takes its
 * long factors when T passes original_max_position_embeddings, its short ones otherwise, and
 * scales cos and sin by its attention factor (docs/architecture.md: why T decides). */
void zt_llama_rope_tables(const zt_llama *m, int T, int local, zt_real *cos_t, zt_real *sin_t);
/* The same tables into arrays of the model's backend (device memory on a device) */
zt_status zt_llama_rope_tables_upload(const zt_llama *m, int T, int local, zt_real *cos_t, zt_real *sin_t);
/* Gemma: norm scales are 1 + weight; the embeddings are multiplied by sqrt(hidden_size), rounded
 * to the compute type first (as transformers does), Granite's by embedding_multiplier */
static inline zt_real zt_llama_norm_offset(const zt_llama *m) { return m->cfg.gemma ? 1 : 0; }
static inline int zt_llama_embed_scaled(const zt_llama *m) { return m->cfg.gemma || m->cfg.embedding_multiplier != 1; }
static inline zt_real zt_llama_embed_scale(const zt_llama *m)
{
    return (zt_real)(m->cfg.gemma ? sqrt((double)m->C) : m->cfg.embedding_multiplier);
}
/* Granite: a block's output times residual_multiplier joins the residual (written apart first) */
static inline int zt_llama_scaled_residual(const zt_llama *m) { return m->cfg.residual_multiplier != 1; }
/* h = act(gate)·up on n gateup rows [gate (F) | up (F)]: SwiGLU, or Gemma's GeGLU */
void zt_llama_mlp_act_forward(const zt_llama *m, zt_real *h, uint16_t *h16, const zt_real *gateup, int n, int F);

/* One micro-batch of B×T tokens: input ids, targets (already shifted, -100 =
 * none) and positions within documents. Adds Σ cross-entropy over targets to
 * *loss_sum. With grad_scale != 0 also runs backward and accumulates
 * grad_scale·∂(Σ loss)/∂params into m->grads. */
void zt_llama_forward_backward(zt_llama *m, const int32_t *input, const int32_t *target, const int32_t *pos,
                               zt_real grad_scale, double *loss_sum);

/* A loss defined on the head's per-position outputs (preference and RL training). fn gets
 * out[N]: the log-probability of each position's target token (LM head; 0 where the
 * target is -100), or the value (score head, num_labels = 1). It returns the loss and,
 * when coef is not NULL, writes ∂loss/∂out[i] into coef[i]. */
typedef struct zt_llama_objective {
    void *ctx;
    double (*fn)(void *ctx, const double *out, double *coef, int N);
} zt_llama_objective;

/* zt_llama_forward_backward with obj's loss in place of the summed cross-entropy; with
 * grad, accumulates ∂loss/∂params into m->grads. Returns obj's loss. On the LM head a
 * gradient costs a second pass of the head's product per chunk (no extra layer pass). */
double zt_llama_forward_objective(zt_llama *m, const int32_t *input, const int32_t *target, const int32_t *pos,
                                  const zt_llama_objective *obj, int grad);

/* Generation with a KV cache, in fp32 on the master weights (also for bf16 models), on the
 * model's backend: on a device the cache is there, and each call uploads its tokens and
 * downloads the logits. The cache holds `slots` sequences: zt_llama_decode appends tokens to
 * slot 0 (a prompt, then one token at a time), zt_llama_decode_slot to another;
 * zt_llama_decode_slots one token to each of several slots at once, side by side in every
 * product (GRPO's completions of a prompt):
 *
 *     zt_llama_cache c;
 *     zt_llama_cache_init(&c, &m, max_len, 512, 8);
 *     zt_llama_decode(&m, &c, prompt, n_prompt, logits);   // prefill slot 0: the last token's logits
 *     zt_llama_cache_fork(&c, &m, 0, 8);                     // slots 1..7 start from slot 0's prompt
 *     zt_llama_decode_slots(&m, &c, slots, next, n, logits); // a token each for slots[0..n): n × V logits
 *     zt_llama_cache_reset(&c);                              // every slot empty
 *
 * A model whose units ZeRO stage 3 gathers as they are used (m->hooks) is acquired unit by unit
 * in every call, as in a training forward pass, and each call ends the pass (the hooks' finish):
 * a model streamed from memory or NVMe never needs to be whole. With c.group set to k the slots
 * share products in groups of k (slots s and t when s / k = t / k): a BLAS result depends on the
 * rows multiplied with it (another kernel for one or two rows), so that several prompts'
 * completions decoded in one call come out as when each prompt's are decoded alone. */
typedef struct zt_llama_cache {
    int capacity, chunk, slots; /* positions a slot holds, tokens per call at most (≥ slots), sequences */
    int group;                  /* slots sharing products (zt_llama_cache_init: all of them) */
    int *lens;                  /* [slots] positions filled (host memory) */
    void *mem;                  /* the arrays below, in the model's backend memory */
    zt_real *k, *v;             /* [L][slots][capacity][KV*D], rotary embedding applied to k */
    zt_real *x, *ln, *qkv, *att, *gateup, *h, *rstd, *qkin, *rstdqk, *cos_t, *sin_t;
    zt_real *post, *cos_l, *sin_l; /* a block's output before its post norm; Gemma 3's local rotary tables */
    int32_t *pos;
    /* on a device: the tokens and the logits there (NULL in host memory, where the caller's serve) */
    int32_t *tokens;
    zt_real *logits;
    int32_t *row_slot, *row_pos; /* [chunk] each, host memory: a call's rows, slot and position */
    struct zt_llama_moe *moe;    /* a mixture of experts' routing of a call's rows, else NULL */
} zt_llama_cache;

zt_status zt_llama_cache_init(zt_llama_cache *c, const zt_llama *m, int capacity, int chunk, int slots);
/* What zt_llama_cache_init allocates in the model's backend memory, in bytes. */
size_t zt_llama_cache_bytes(const zt_llama *m, int capacity, int chunk, int slots);
void zt_llama_cache_free(zt_llama_cache *c, const zt_llama *m);
void zt_llama_cache_reset(zt_llama_cache *c);
/* Slot from's positions copied into slots (from, from + count), each then as long as slot from. */
void zt_llama_cache_fork(zt_llama_cache *c, const zt_llama *m, int from, int count);
/* Appends n tokens to slot 0 (in pieces of at most chunk) and writes the logits of the last one
 * into logits [V]. ZT_EUSER when the sequence would pass the cache's capacity. */
zt_status zt_llama_decode(zt_llama *m, zt_llama_cache *c, const int32_t *tokens, int n, zt_real *logits);
/* The same for slot `slot`. */
zt_status zt_llama_decode_slot(zt_llama *m, zt_llama_cache *c, int slot, const int32_t *tokens, int n, zt_real *logits);
/* Appends tokens[i] to slot slots[i] (ascending) for i < n and writes each one's logits into
 * row i of logits [n][V]. */
/* The rows the decoder takes in one pass over the model: a call with more makes several. */
int zt_llama_decode_rows(const zt_llama *m, const zt_llama_cache *c);
zt_status zt_llama_decode_slots(zt_llama *m, zt_llama_cache *c, const int *slots, const int32_t *tokens, int n,
                                zt_real *logits);

/* qk_norm: the norms of the q and k heads (or projections) in the qkv rows of n tokens, in
 * place, their inputs kept in qkin and their 1/rms in rstd (sizes zt_llama_qk_norm_elems), w the
 * layer's q_norm and k_norm weights (zt_llama_qk_norm_weights of them); backward in place on
 * dqkv, gradients added to dw. */
size_t zt_llama_qk_norm_elems(const zt_llama *m, int n);
size_t zt_llama_qk_norm_weights(const zt_llama *m);
void zt_llama_qk_norm_forward(const zt_llama *m, zt_real *qkv, zt_real *qkin, zt_real *rstd, const zt_real *w, int n);
void zt_llama_qk_norm_backward(const zt_llama *m, zt_real *dqkv, zt_real *dw, const zt_real *qkin, const zt_real *w,
                               const zt_real *rstd, int n);

#endif

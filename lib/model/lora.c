/* LoRA and DoRA adapters (lora.h): layout, initialisation, forward and backward, PEFT files. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "lib/ckpt/safetensors.h"
#include "lib/core/crc32c.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/core/rng.h"
#include "lora.h"

/* Module mod's input and output widths. */
static void dims(const zt_llama *m, zt_lora_module mod, int *in, int *out)
{
    switch (mod) {
    case ZT_LORA_Q: *in = m->C, *out = m->HD; return;
    case ZT_LORA_K:
    case ZT_LORA_V: *in = m->C, *out = m->KV * m->D; return;
    case ZT_LORA_QKV: *in = m->C, *out = m->S3; return;
    case ZT_LORA_O: *in = m->HD, *out = m->C; return;
    case ZT_LORA_GATE:
    case ZT_LORA_UP: *in = m->C, *out = m->F; return;
    case ZT_LORA_GATE_UP: *in = m->C, *out = 2 * m->F; return;
    case ZT_LORA_ROUTER: *in = m->C, *out = m->cfg.n_experts; return;
    case ZT_LORA_SHARED_GATE:
    case ZT_LORA_SHARED_UP: *in = m->C, *out = m->cfg.shared_expert_size; return;
    case ZT_LORA_SHARED_DOWN: *in = m->cfg.shared_expert_size, *out = m->C; return;
    case ZT_LORA_SHARED_ROUTER: *in = m->C, *out = 1; return;
    default: *in = m->F, *out = m->C; /* down */
    }
}

static int per_expert(const zt_llama *m, zt_lora_module mod) { return zt_lora_per_expert(&m->cfg, mod); }

/* The experts a module has adapters for: the model's with per_expert, else one */
static int experts_of(const zt_llama *m, zt_lora_module mod) { return per_expert(m, mod) ? m->cfg.n_experts : 1; }

static int targeted(const zt_lora *a, zt_lora_module mod) { return (a->cfg.targets >> mod) & 1; }

/* Whether layer l has module mod's adapter (layers_to_transform names it, or names none) */
static int adapted(const zt_lora *a, int l, zt_lora_module mod) { return targeted(a, mod) && a->layer_slot[l] >= 0; }

/* Where A of module mod (of expert e: 0 but for per_expert modules) in layer l is in the adapters'
 * array */
static size_t adapter_off(const zt_lora *a, int l, int e, zt_lora_module mod)
{
    return a->layer_numel * (size_t)a->layer_slot[l] + a->off[mod] + a->expert_numel * e;
}

static int is_dora(const zt_lora *a) { return a->cfg.method == ZT_LORA_METHOD_DORA; }

/* The widest input or output of a layer in targets. */
static size_t widest_of(const zt_llama *m, unsigned targets)
{
    int w = 0, in, out;
    for (int mod = 0; mod < ZT_LORA_NMODULES; mod++) {
        if (!((targets >> mod) & 1)) continue;
        dims(m, mod, &in, &out);
        w = w > in ? w : in;
        w = w > out ? w : out;
    }
    return (size_t)w;
}

static size_t widest(const zt_llama *m) { return widest_of(m, m->lora->cfg.targets); }

static size_t base_weight(const zt_llama *m, int l, int e, zt_lora_module mod);

/* A shared expert's modules */
static const unsigned shared_modules =
    1u << ZT_LORA_SHARED_GATE | 1u << ZT_LORA_SHARED_UP | 1u << ZT_LORA_SHARED_DOWN | 1u << ZT_LORA_SHARED_ROUTER;

/* The linear modules of m's family: Phi-3's fused qkv_proj and gate_up_proj (GLM's gate_up_proj),
 * else each projection (and a mixture of experts' router, a shared expert's) */
static unsigned model_modules(const zt_llama *m)
{
    unsigned mods = 1u << ZT_LORA_O | 1u << ZT_LORA_DOWN | (m->cfg.n_experts ? 1u << ZT_LORA_ROUTER : 0);
    mods |= m->cfg.shared_expert_size ? shared_modules : 0;
    mods |= zt_llama_fused_qkv(&m->cfg) ? 1u << ZT_LORA_QKV : 1u << ZT_LORA_Q | 1u << ZT_LORA_K | 1u << ZT_LORA_V;
    return mods | (zt_llama_fused_gate_up(&m->cfg) ? 1u << ZT_LORA_GATE_UP : 1u << ZT_LORA_GATE | 1u << ZT_LORA_UP);
}

/* Whether mod's name is an earlier module's too (a shared expert's gate_proj, up_proj, down_proj) */
static int named_before(zt_lora_module mod) { return mod >= ZT_LORA_SHARED_GATE && mod <= ZT_LORA_SHARED_DOWN; }

/* The names of the modules in mask, comma-separated, each once, into buf */
static const char *module_list(unsigned mask, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int mod = 0; mod < ZT_LORA_NMODULES; mod++)
        if (((mask >> mod) & 1) && n < cap &&
            !(named_before(mod) && ((mask >> (mod - ZT_LORA_SHARED_GATE + ZT_LORA_GATE)) & 1)))
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", zt_lora_module_names[mod]);
    return buf;
}

/* The targets of c that m has: all-linear its family's modules, else those named */
static unsigned model_targets(const zt_llama *m, unsigned targets)
{
    return targets == ZT_LORA_ALL ? model_modules(m) : targets & model_modules(m);
}

/* The targets m has: all-linear its family's modules; named ones it lacks left out, as PEFT
 * leaves them (a Llama adapter's list names no module of Phi-3's but o_proj and down_proj),
 * unless none is left; a module given by layer paths must be in every layer */
static zt_status resolve_targets(const zt_llama *m, const zt_lora_config *c, unsigned *out)
{
    unsigned has = model_modules(m), targets = c->targets;
    const int *layers_named = c->layers_named;
    char names[128], known[128];
    if (c->other_target[0] && !m->cfg.image_text) /* an image-text model's vision tower has it */
        return zt_fail(ZT_EUSER,
                       "lora: target_modules '%s' is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
                       "down_proj, qkv_proj, gate_up_proj, gate, shared_expert_gate, w1, w2, w3",
                       c->other_target);
    zt_status st =
        c->target_pattern[0] ? zt_lora_pattern_targets("lora", c->target_pattern, &m->cfg, m->L, &targets) : ZT_OK;
    if (st) return st;
    if (targets != ZT_LORA_ALL && !c->target_pattern[0]) { /* names: the shared expert's too; paths: theirs */
        unsigned named = 0;
        for (int mod = ZT_LORA_GATE; mod <= ZT_LORA_DOWN; mod++)
            if (((targets >> mod) & 1) && !layers_named[mod]) named |= 1u << mod;
        targets |= zt_lora_named_targets(&m->cfg, named);
    }
    for (int i = 0; m->cfg.shared_expert_size && i < 3 && targets != ZT_LORA_ALL; i++)
        if (((targets >> (ZT_LORA_GATE + i)) & 1) != ((targets >> (ZT_LORA_SHARED_GATE + i)) & 1))
            return zt_fail(ZT_EUSER,
                           "lora: target_modules adapt %s of the experts or of the shared expert alone: zt saves "
                           "target_modules as names, which PEFT matches in both",
                           zt_lora_module_names[ZT_LORA_GATE + i]);
    unsigned moe = 1u << ZT_LORA_GATE | 1u << ZT_LORA_UP | 1u << ZT_LORA_DOWN | 1u << ZT_LORA_ROUTER | shared_modules;
    if (m->cfg.n_experts && c->method == ZT_LORA_METHOD_DORA && (targets == ZT_LORA_ALL || (targets & moe)))
        return zt_fail(ZT_EUSER,
                       "lora: DoRA (use_dora) on the experts and the router of a mixture of experts (%s) is not "
                       "supported yet: target the attention's modules (q_proj, k_proj, v_proj, o_proj)",
                       m->cfg.model_type);
    *out = model_targets(m, targets);
    if (!*out)
        return zt_fail(ZT_EUSER, "lora: target_modules (%s) name no module of a %s model (it has %s)",
                       module_list(targets, names, sizeof names), m->cfg.model_type,
                       module_list(has, known, sizeof known));
    if (targets != ZT_LORA_ALL && (targets & ~has))
        zt_log_warn("lora: target_modules %s name no module of a %s model (it has %s): not adapted",
                    module_list(targets & ~has, names, sizeof names), m->cfg.model_type,
                    module_list(has, known, sizeof known));
    for (int mod = 0; mod < ZT_LORA_NMODULES; mod++)
        if (((*out >> mod) & 1) && layers_named[mod] && layers_named[mod] != m->L)
            return zt_fail(ZT_EUSER,
                           "lora: target_modules name %s in layers 0 to %d of the model's %d: adapters on part of "
                           "the layers are not supported yet",
                           zt_lora_module_names[mod], layers_named[mod] - 1, m->L);
    return ZT_OK;
}

/* LoRA+ gives B (ab 'B') the learning rate times the ratio, A the learning rate */
static void add_tensor(zt_llama *v, const zt_lora_config *c, size_t off, int rows, int cols, const char *path, char ab)
{
    zt_llama_tensor *t = &v->tensors[v->n_tensors++];
    snprintf(t->name, sizeof t->name, "%smodel.%s.lora_%c.weight", zt_lora_peft_prefix(&v->cfg), path, ab);
    t->offset = off, t->ndim = 2, t->shape[0] = rows, t->shape[1] = cols, t->decay = 1;
    t->lr_scale = ab == 'B' && c->loraplus_lr_ratio > 0 ? c->loraplus_lr_ratio : 1;
}

/* DoRA's magnitude [out], decayed as PEFT's trainer decays it (it is not a norm's weight); LoRA+
 * trains it with B's learning rate, as PEFT's create_loraplus_optimizer does every 1-D adapter */
static void add_magnitude(zt_llama *v, const zt_lora_config *c, size_t off, int out, const char *path)
{
    zt_llama_tensor *t = &v->tensors[v->n_tensors++];
    snprintf(t->name, sizeof t->name, "%smodel.%s.lora_magnitude_vector", zt_lora_peft_prefix(&v->cfg), path);
    t->offset = off, t->ndim = 1, t->shape[0] = out, t->decay = 1;
    t->lr_scale = c->loraplus_lr_ratio > 0 ? c->loraplus_lr_ratio : 1;
}

static zt_status check_config(const zt_lora_config *c)
{
    if (c->r < 1) return zt_fail(ZT_EUSER, "lora: r = %d must be at least 1", c->r);
    if (!(c->alpha > 0)) return zt_fail(ZT_EUSER, "lora: alpha = %g must be above 0", c->alpha);
    if (!(c->dropout >= 0 && c->dropout < 1))
        return zt_fail(ZT_EUSER, "lora: dropout = %g is not in [0, 1)", c->dropout);
    if (!(c->loraplus_lr_ratio >= 0))
        return zt_fail(ZT_EUSER, "lora: loraplus_lr_ratio = %g is below 0", c->loraplus_lr_ratio);
    if (!(c->targets & ZT_LORA_ALL)) return zt_fail(ZT_EUSER, "lora: no target modules");
    return ZT_OK;
}

/* A base tensor trained whole (modules_to_save: the score head, the embedding, the LM head): its copy
 * of rows × C at off, after the layers' adapters, named as PEFT saves it, starting as the base's
 * tensor at element base_off */
static void add_copy(zt_llama *m, zt_lora *a, const char *name, size_t off, int rows, size_t base_off)
{
    zt_llama *v = &a->view;
    zt_llama_tensor *t = &v->tensors[v->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s%s", zt_lora_peft_prefix(&m->cfg), name);
    t->offset = off, t->ndim = 2, t->shape[0] = rows, t->shape[1] = m->C, t->decay = 1, t->lr_scale = 1;
    m->be->copy(m->be, v->params + off, m->params + base_off, (size_t)rows * m->C * sizeof(zt_real));
}

/* The trainable tokens' rows, named as PEFT saves them, starting as the base's rows */
static void add_tokens(zt_llama *m, zt_lora *a)
{
    zt_llama *v = &a->view;
    zt_llama_tensor *t = &v->tensors[v->n_tensors++];
    const zt_lora_config *c = &a->cfg;
    snprintf(t->name, sizeof t->name, "%smodel.embed_tokens.token_adapter.trainable_tokens_delta",
             zt_lora_peft_prefix(&m->cfg));
    t->offset = a->tokens_off, t->ndim = 2, t->shape[0] = c->n_tokens, t->shape[1] = m->C, t->decay = 1,
    t->lr_scale = 1;
    for (int i = 0; i < m->V; i++) a->slot_of[i] = -1;
    for (int j = 0; j < c->n_tokens; j++) {
        a->slot_of[c->tokens[j]] = j;
        m->be->copy(m->be, v->params + a->tokens_off + (size_t)j * m->C,
                    m->params + m->embed_off + (size_t)c->tokens[j] * m->C, (size_t)m->C * sizeof(zt_real));
    }
}

/* modules_to_save the model cannot take */
static zt_status check_saved(const zt_llama *m, const zt_lora_config *c)
{
    if (c->score && m->cfg.num_labels != 1)
        return zt_fail(ZT_EUSER,
                       "lora: the adapter trains a score head (modules_to_save = [\"score\"]), which a causal "
                       "LM lacks: it is a reward model's adapter");
    if ((c->save & ZT_LORA_SAVE_HEAD) && m->cfg.num_labels)
        return zt_fail(ZT_EUSER, "lora: modules_to_save names lm_head, which a model with a score head lacks");
    return ZT_OK;
}

/* The first of v[0..n) outside [0, limit) or equal to one before it (*twice: which), -1 none */
static int first_bad(const int32_t *v, int n, int limit, int *twice)
{
    for (int i = 0; i < n; i++) {
        *twice = 0;
        if (v[i] < 0 || v[i] >= limit) return i;
        for (int j = 0; j < i; j++)
            if (v[j] == v[i]) return *twice = 1, i;
    }
    return -1;
}

/* layers_to_transform naming a layer the model lacks, or one twice */
static zt_status check_layers(const zt_llama *m, const zt_lora_config *c)
{
    int twice, i;
    if (c->n_layers < 0 || c->n_layers > ZT_LORA_MAX_LAYERS)
        return zt_fail(ZT_EUSER, "lora: layers_to_transform names %d layers, more than %d", c->n_layers,
                       ZT_LORA_MAX_LAYERS);
    if ((i = first_bad(c->layers, c->n_layers, m->L, &twice)) < 0) return ZT_OK;
    return twice ? zt_fail(ZT_EUSER, "lora: layers_to_transform names layer %d twice", c->layers[i])
                 : zt_fail(ZT_EUSER, "lora: layers_to_transform: %d is not a layer of the model (layers 0 to %d)",
                           c->layers[i], m->L - 1);
}

/* trainable_token_indices the model cannot take: a row it lacks, one named twice, and the
 * embedding trained whole too (PEFT refuses that) or a tied LM head's copy trained apart */
static zt_status check_tokens(const zt_llama *m, const zt_lora_config *c)
{
    if (c->n_tokens < 0 || c->n_tokens > ZT_LORA_MAX_TOKENS)
        return zt_fail(ZT_EUSER, "lora: trainable_token_indices names %d tokens, more than %d", c->n_tokens,
                       ZT_LORA_MAX_TOKENS);
    int twice, i = first_bad(c->tokens, c->n_tokens, m->V, &twice);
    if (i >= 0 && c->tokens[i] == -1) /* zt_plan_lora_config without a tokenizer */
        return zt_fail(ZT_EUSER, "lora: trainable_token_indices names a token by its text, which this run has no "
                                 "tokenizer to look up: give its id");
    if (i >= 0)
        return twice
                   ? zt_fail(ZT_EUSER, "lora: trainable_token_indices names %d twice", c->tokens[i])
                   : zt_fail(ZT_EUSER, "lora: trainable_token_indices: %d is not a token of the vocabulary (%d tokens)",
                             c->tokens[i], m->V);
    if (c->n_tokens && (c->save & ZT_LORA_SAVE_EMBED))
        return zt_fail(ZT_EUSER, "lora: trainable_token_indices with modules_to_save = embed_tokens: the embedding is "
                                 "trained whole already (use one or the other)");
    if (c->n_tokens && (c->save & ZT_LORA_SAVE_HEAD) && m->cfg.tie_word_embeddings)
        return zt_fail(ZT_EUSER,
                       "lora: trainable_token_indices with modules_to_save = lm_head on a model whose LM head "
                       "is its embedding is not supported (the tokens' rows train in both)");
    return ZT_OK;
}

/* a's layout on m (a->cfg's targets those m has): each module's offsets in a layer's block, the
 * block's elements and outputs, the copies' offsets after the layers; the flat array's elements */
static size_t lay_out(const zt_llama *m, zt_lora *a)
{
    const zt_lora_config *c = &a->cfg;
    int in, out;
    for (int mod = 0; mod < ZT_LORA_NMODULES; mod++) {
        if (per_expert(m, mod)) continue; /* below */
        dims(m, mod, &in, &out);
        a->off[mod] = a->layer_numel;
        a->norm_off[mod] = a->layer_outputs;
        if (!targeted(a, mod)) continue;
        a->layer_numel += (size_t)c->r * (in + out) + (is_dora(a) ? out : 0);
        a->layer_outputs += out;
    }
    for (int mod = ZT_LORA_GATE; m->cfg.n_experts && mod <= ZT_LORA_DOWN; mod++) { /* no DoRA on experts */
        dims(m, mod, &in, &out);
        a->off[mod] = a->layer_numel + a->expert_numel;
        if (targeted(a, mod)) a->expert_numel += (size_t)c->r * (in + out);
    }
    a->layer_numel += (size_t)m->cfg.n_experts * a->expert_numel;
    size_t vocab = (size_t)m->V * m->C;
    a->score_off = a->layer_numel * (size_t)(c->n_layers ? c->n_layers : m->L);
    a->embed_off = a->score_off + (c->score ? (size_t)m->C : 0);
    a->head_off = a->embed_off + (c->save & ZT_LORA_SAVE_EMBED ? vocab : 0);
    a->tokens_off = a->head_off + (c->save & ZT_LORA_SAVE_HEAD ? vocab : 0);
    return a->tokens_off + (size_t)c->n_tokens * m->C;
}

/* The scratch's elements for micro-batches of `tokens` positions: xd and dxd, u and du, DoRA's
 * dv and de */
static size_t scratch_elems(const zt_llama *m, const zt_lora_config *c, size_t tokens)
{
    size_t xd = tokens * widest_of(m, c->targets), u = tokens * c->r;
    return 2 * xd + 2 * u + (c->method == ZT_LORA_METHOD_DORA ? 2 * xd : 0);
}

/* The frozen norms' gradient sink: the hidden size, or Qwen3's q and k head norms */
static size_t sink_elems(const zt_llama *m)
{
    size_t qk = zt_llama_qk_norm_weights(m);
    return (size_t)m->C > qk ? (size_t)m->C : qk;
}

size_t zt_lora_numel(const zt_llama *m, const zt_lora_config *c)
{
    zt_lora a = {.cfg = *c};
    a.cfg.targets = model_targets(m, c->targets);
    return lay_out(m, &a);
}

/* Whether the adapters' products can run on bf16 operands (zt_lora_forward): LoRA on a bf16
 * model that keeps bf16 copies of its products' inputs (llama.c: the base unquantized) */
static int bf16_products(const zt_llama *m, const zt_lora_config *c)
{
    return m->bf16_inputs && !m->qbase && c->method != ZT_LORA_METHOD_DORA;
}

/* The bf16 scratch's elements: A and B of the widest module, u and du, xd with dropout */
static size_t scratch16_elems(const zt_llama *m, const zt_lora_config *c, size_t tokens)
{
    size_t w = widest_of(m, c->targets);
    return bf16_products(m, c) ? 2 * (size_t)c->r * w + 2 * tokens * c->r + (c->dropout > 0 ? tokens * w : 0) : 0;
}

size_t zt_lora_buffer_bytes(const zt_llama *m, const zt_lora_config *c, size_t tokens)
{
    zt_lora a = {.cfg = *c};
    a.cfg.targets = model_targets(m, c->targets);
    lay_out(m, &a);
    size_t norms = c->method == ZT_LORA_METHOD_DORA ? a.layer_outputs * m->L : 0;
    return (scratch_elems(m, &a.cfg, tokens) + sink_elems(m) + norms) * sizeof(zt_real) +
           scratch16_elems(m, &a.cfg, tokens) * sizeof(uint16_t);
}

zt_status zt_lora_attach(zt_llama *m, const zt_lora_config *c)
{
    zt_status st = check_config(c);
    if (!st) st = check_saved(m, c);
    if (!st) st = check_tokens(m, c);
    if (!st) st = check_layers(m, c);
    if (st) return st;
    unsigned targets = 0;
    if ((st = resolve_targets(m, c, &targets))) return st;
    zt_lora *a = calloc(1, sizeof *a);
    if (!a) return zt_fail(ZT_ENOMEM, "out of memory for the adapters");
    a->cfg = *c;
    a->cfg.targets = targets;
    a->scale = c->alpha / (c->rslora ? sqrt((double)c->r) : c->r);
    zt_llama *v = &a->view;
    v->cfg = m->cfg, v->be = m->be, v->L = m->L;
    v->numel = lay_out(m, a);
    v->tensors = calloc((size_t)m->L * (ZT_LORA_NMODULES + 3 * (size_t)m->cfg.n_experts) * 3 + 4, sizeof *v->tensors);
    v->params = m->be->alloc(m->be, (v->numel + ZT_LLAMA_PAD) * sizeof(zt_real));
    v->grads = m->be->alloc(m->be, (v->numel + ZT_LLAMA_PAD) * sizeof(zt_real));
    a->norm_sink = m->be->alloc(m->be, sink_elems(m) * sizeof(zt_real));
    if (is_dora(a)) a->weight_norm = m->be->alloc(m->be, a->layer_outputs * m->L * sizeof(zt_real));
    if (c->n_tokens) a->slot_of = malloc((size_t)m->V * sizeof *a->slot_of);
    a->layer_slot = malloc((size_t)m->L * sizeof *a->layer_slot);
    m->lora = a;
    if (!v->tensors || !v->params || !v->grads || !a->norm_sink || (is_dora(a) && !a->weight_norm) ||
        (c->n_tokens && !a->slot_of) || !a->layer_slot) {
        zt_lora_free(m);
        return zt_fail(ZT_ENOMEM, "out of memory for %zu adapter parameters", v->numel);
    }
    m->be->memset0(m->be, v->params, (v->numel + ZT_LLAMA_PAD) * sizeof(zt_real));
    m->be->memset0(m->be, v->grads, (v->numel + ZT_LLAMA_PAD) * sizeof(zt_real));
    for (int l = 0; l < m->L; l++) /* the layers in order, whichever layers_to_transform names */
        a->layer_slot[l] = c->n_layers ? -1 : l;
    for (int i = 0, k = 0; i < m->L; i++)
        for (int j = 0; j < c->n_layers; j++)
            if (c->layers[j] == i) a->layer_slot[i] = k++;
    for (int l = 0; l < m->L; l++)
        for (int mod = 0; mod < ZT_LORA_NMODULES; mod++)
            for (int e = 0; adapted(a, l, mod) && e < experts_of(m, mod); e++) {
                int in, out;
                char path[64]; /* layers.N.block_sparse_moe.experts.E.w1: the tensor name fits in 128 */
                dims(m, mod, &in, &out);
                zt_lora_model_path(&m->cfg, path, sizeof path, l, e, mod);
                size_t A = adapter_off(a, l, e, mod);
                add_tensor(v, c, A, c->r, in, path, 'A');
                add_tensor(v, c, A + (size_t)c->r * in, out, c->r, path, 'B');
                if (is_dora(a)) add_magnitude(v, c, A + (size_t)c->r * (in + out), out, path);
            }
    if (c->score) add_copy(m, a, "score.weight", a->score_off, m->cfg.num_labels, m->head_off);
    if (c->save & ZT_LORA_SAVE_EMBED) add_copy(m, a, "model.embed_tokens.weight", a->embed_off, m->V, m->embed_off);
    if (c->save & ZT_LORA_SAVE_HEAD) add_copy(m, a, "lm_head.weight", a->head_off, m->V, m->head_off);
    if (c->n_tokens) add_tokens(m, a);
    m->be->free(m->be, m->grads); /* the base is frozen: it has no gradient */
    m->grads = NULL;
    return m->B ? zt_lora_alloc_scratch(m, (size_t)m->B * m->T_alloc) : ZT_OK;
}

void zt_lora_free(zt_llama *m)
{
    zt_lora *a = m->lora;
    if (!a) return;
    zt_backend *be = m->be;
    be->free(be, a->view.params);
    be->free(be, a->view.grads);
    be->free(be, a->norm_sink);
    be->free(be, a->weight_norm);
    be->free(be, a->scratch);
    be->free(be, a->scratch16);
    be->free(be, a->token_slot);
    free(a->slot_host);
    free(a->slot_of);
    free(a->layer_slot);
    free(a->view.tensors);
    free(a);
    m->lora = NULL;
}

zt_status zt_lora_alloc_scratch(zt_llama *m, size_t tokens)
{
    zt_lora *a = m->lora;
    zt_backend *be = m->be;
    size_t xd = tokens * widest(m), u = tokens * a->cfg.r;
    be->free(be, a->scratch);
    a->scratch = be->alloc(be, scratch_elems(m, &a->cfg, tokens) * sizeof(zt_real));
    if (!a->scratch) return zt_fail(ZT_ENOMEM, "out of memory for the adapters' scratch");
    a->xd = a->scratch, a->dxd = a->xd + xd, a->u = a->dxd + xd, a->du = a->u + u;
    a->dv = is_dora(a) ? a->du + u : NULL, a->de = is_dora(a) ? a->dv + xd : NULL;
    a->scratch_tokens = tokens;
    size_t n16 = scratch16_elems(m, &a->cfg, tokens);
    be->free(be, a->scratch16);
    a->scratch16 = n16 ? be->alloc(be, n16 * sizeof(uint16_t)) : NULL;
    if (n16 && !a->scratch16) return zt_fail(ZT_ENOMEM, "out of memory for the adapters' scratch");
    a->w16 = a->scratch16, a->u16 = a->w16 + 2 * (size_t)a->cfg.r * widest(m), a->du16 = a->u16 + u;
    a->xd16 = a->du16 + u;
    if (!a->cfg.n_tokens) return ZT_OK;
    be->free(be, a->token_slot);
    free(a->slot_host);
    a->token_slot = be->alloc(be, tokens * sizeof(int32_t));
    a->slot_host = malloc(tokens * sizeof(int32_t));
    return a->token_slot && a->slot_host ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory for the adapters' scratch");
}

/* A of module mod (of expert e: 0 but for per_expert modules) in layer l, in the adapters' array base */
static zt_real *adapter_a(const zt_lora *a, zt_real *base, int l, int e, zt_lora_module mod)
{
    return base + adapter_off(a, l, e, mod);
}

/* DoRA's magnitude of module mod in layer l in the adapters p (it follows B) */
static zt_real *magnitude(const zt_llama *m, zt_real *p, int l, zt_lora_module mod)
{
    int in, out;
    dims(m, mod, &in, &out);
    return adapter_a(m->lora, p, l, 0, mod) + (size_t)m->lora->cfg.r * (in + out);
}

/* DoRA: norm[j] = ||W_j + s·(B·A)_j|| over the outputs j of module mod in layer l, W from the
 * base weights w and A, B from the adapters p, all where be computes (the model's backend on
 * its arrays, the CPU's on mapped ones), a block of rows at a time in buf (cap elements there, at
 * least one row). */
static void weight_norms(const zt_llama *m, zt_backend *be, const zt_real *w, zt_real *p, int l, zt_lora_module mod,
                         zt_real *norm, zt_real *buf, size_t cap)
{
    const zt_lora *a = m->lora;
    int r = a->cfg.r, in, out;
    dims(m, mod, &in, &out);
    const zt_real *A = adapter_a(a, p, l, 0, mod), *B = A + (size_t)r * in, *W = w + base_weight(m, l, 0, mod);
    int rows = cap / in < (size_t)out ? (int)(cap / in) : out;
    for (int j0 = 0; j0 < out; j0 += rows) {
        int n = out - j0 < rows ? out - j0 : rows;
        be->copy(be, buf, W + (size_t)j0 * in, (size_t)n * in * sizeof *buf);
        be->gemm(be, 0, 0, n, in, r, (zt_real)a->scale, B + (size_t)j0 * r, r, A, in, 1, buf, in);
        be->row_norms(be, norm + j0, buf, n, in);
    }
}

/* A buffer of 64 rows of the widest layer where be computes, for weight_norms outside a pass. */
static zt_real *norm_rows(const zt_llama *m, zt_backend *be, size_t *cap)
{
    *cap = 64 * widest(m);
    return be->alloc(be, *cap * sizeof(zt_real));
}

/* DoRA's norms ||W + s·B·A|| of every targeted module of every layer into dst(l, mod), where the
 * model computes, from its arrays. A base that ZeRO stage 3 shards (m->hooks) has each layer
 * gathered for it, as a forward pass would. */
static zt_status all_norms(zt_llama *m, zt_real *(*dst)(zt_llama *m, int l, zt_lora_module mod))
{
    size_t cap;
    zt_backend *be = m->be;
    zt_real *buf = norm_rows(m, be, &cap);
    if (!buf) return zt_fail(ZT_ENOMEM, "out of memory for the DoRA norms");
    for (int l = 0; l < m->L; l++) {
        int unit = zt_llama_layer_unit(m, l); /* the whole layer: DoRA runs with an untiled MLP */
        zt_llama_acquire(m, unit, ZT_LLAMA_FORWARD);
        for (int mod = 0; mod < ZT_LORA_NMODULES; mod++)
            if (adapted(m->lora, l, mod))
                weight_norms(m, be, m->params, m->lora->view.params, l, mod, dst(m, l, mod), buf, cap);
        zt_llama_release(m, unit, ZT_LLAMA_FORWARD);
    }
    if (m->hooks) m->hooks->finish(m->hooks->ctx, 0);
    be->free(be, buf);
    return ZT_OK;
}

static zt_real *magnitude_of(zt_llama *m, int l, zt_lora_module mod)
{
    return magnitude(m, m->lora->view.params, l, mod);
}

zt_status zt_lora_init_weights(zt_llama *m, uint64_t seed)
{
    zt_lora *a = m->lora;
    zt_llama *v = &a->view;
    zt_real *p = zt_llama_params_map(v);
    if (!p) return zt_fail(ZT_ENOMEM, "out of memory initialising the adapters");
    for (int i = 0; i < v->n_tensors; i++) {
        const zt_llama_tensor *t = &v->tensors[i];
        if (t->ndim == 1 || !strstr(t->name, ".lora_")) continue; /* DoRA's magnitude: below; the copies */
        size_t n = (size_t)t->shape[0] * t->shape[1];
        int is_a = strstr(t->name, ".lora_A.") != NULL;
        double bound = 1 / sqrt((double)t->shape[1]); /* kaiming_uniform_(a = sqrt(5)): gain·sqrt(3/fan_in) */
        zt_rng rng;
        zt_rng_seed(&rng, seed, 0x10a0 + (uint64_t)i);
        for (size_t j = 0; j < n; j++) {
            double w = 0;
            if (is_a && a->cfg.init == ZT_LORA_INIT_GAUSSIAN) w = zt_rng_normal(&rng) / a->cfg.r;
            else if (is_a) w = (2 * zt_rng_uniform(&rng) - 1) * bound;
            p[t->offset + j] = (zt_real)w;
        }
    }
    zt_llama_params_unmap(v, p, 1);
    return is_dora(a) ? all_norms(m, magnitude_of) : ZT_OK; /* M = ||W + s·B·A||, ||W|| with B = 0 */
}

/* ---- dropout ---------------------------------------------------------------------------- */

/* dst[i] = keep(i) ? src[i] / (1 - p) : 0, or with accumulate dst[i] += that, over n
 * elements; keep(i) is a function of (m->draw_seed, m->pass, layer, module, expert, i) alone. */
static void dropout(const zt_llama *m, int l, int e, zt_lora_module mod, const zt_real *src, zt_real *dst, size_t n,
                    int accumulate)
{
    double p = m->lora->cfg.dropout;
    /* the modules before the router keyed as when they were all there were (the same masks), a
       shared expert's apart */
    uint64_t module = mod > ZT_LORA_ROUTER    ? zt_mix64(0x5e5e0000u + (uint64_t)l * 4 + (mod - ZT_LORA_SHARED_GATE))
                      : mod == ZT_LORA_ROUTER ? zt_mix64(0x7e7e0000u + (uint64_t)l)
                                              : zt_mix64((uint64_t)l * ZT_LORA_ROUTER + mod + 1);
    if (e) module ^= zt_mix64(0xe7e70000u + (uint64_t)e);
    uint64_t key = zt_mix64(zt_mix64(m->draw_seed ^ 0xd50f) ^ zt_mix64(m->pass) ^ module);
    uint64_t drop_below = (uint64_t)(p * 9007199254740992.0); /* p·2⁵³ */
    m->be->dropout(m->be, dst, src, n, key, drop_below, (zt_real)(1 / (1 - p)), accumulate);
}

/* The adapter's input: x, or x with dropout in a->xd (training passes with p > 0). */
static const zt_real *dropped(const zt_llama *m, int l, int e, zt_lora_module mod, const zt_real *x, size_t n)
{
    zt_lora *a = m->lora;
    if (!a->training || a->cfg.dropout == 0) return x;
    dropout(m, l, e, mod, x, a->xd, n, 0);
    return a->xd;
}

/* ---- forward and backward --------------------------------------------------------------- */

/* The norms ||W + s·B·A|| of module mod in layer l, in a->weight_norm */
static zt_real *layer_norms(const zt_lora *a, int l, zt_lora_module mod)
{
    return a->weight_norm + a->layer_outputs * l + a->norm_off[mod];
}

/* DoRA's part of y for N rows, u = xd·Aᵀ given and the norms in a->weight_norm: y += (g - 1)·W·xd
 * + g·s·u·Bᵀ, g = M / ||W + s·B·A||. */
static void dora_forward(zt_llama *m, int l, zt_lora_module mod, const zt_real *xd, zt_real *y, int ldy, int N)
{
    zt_lora *a = m->lora;
    zt_backend *be = m->be;
    int r = a->cfg.r, in, out;
    dims(m, mod, &in, &out);
    const zt_real *B = adapter_a(a, a->view.params, l, 0, mod) + (size_t)r * in,
                  *M = magnitude(m, a->view.params, l, mod);
    const zt_real *norm = layer_norms(a, l, mod);
    zt_real *v = a->dv, *bu = a->de;
    be->gemm(be, 0, 1, N, out, in, 1, xd, in, m->params + base_weight(m, l, 0, mod), in, 0, v, out); /* W·xd */
    be->gemm(be, 0, 1, N, out, r, (zt_real)a->scale, a->u, r, B, r, 0, bu, out);                  /* s·u·Bᵀ */
    be->dora_forward(be, y, ldy, v, bu, M, norm, N, out);
}

/* DoRA's backward, u = xd·Aᵀ given: ∂M += Σₙ dy·(W·xd + s·u·Bᵀ) / ||W + s·B·A|| (the norm a
 * constant, as PEFT detaches it); g·dy into a->de, what B and A see, and (g - 1)·dy into
 * a->dv, what W·xd sees. */
static void dora_backward(zt_llama *m, int l, zt_lora_module mod, const zt_real *xd, const zt_real *dy, int ldy, int N)
{
    zt_lora *a = m->lora;
    zt_backend *be = m->be;
    int r = a->cfg.r, in, out;
    dims(m, mod, &in, &out);
    const zt_real *B = adapter_a(a, a->view.params, l, 0, mod) + (size_t)r * in,
                  *M = magnitude(m, a->view.params, l, mod);
    const zt_real *norm = layer_norms(a, l, mod);
    zt_real *gM = magnitude(m, a->view.grads, l, mod), *t = a->dv;
    be->gemm(be, 0, 1, N, out, in, 1, xd, in, m->params + base_weight(m, l, 0, mod), in, 0, t, out);
    be->gemm(be, 0, 1, N, out, r, (zt_real)a->scale, a->u, r, B, r, 1, t, out); /* t = W·xd + s·u·Bᵀ */
    be->dora_backward(be, gM, a->de, a->dv, dy, ldy, t, M, norm, N, out);       /* t read before dv is written */
}

#ifndef ZT_REAL_DOUBLE
/* The bf16 products (zt_lora_forward): n elements of src rounded into dst */
static const uint16_t *to16(zt_llama *m, uint16_t *dst, const float *src, size_t n)
{
    m->be->to_bf16(m->be, dst, src, n);
    return dst;
}

/* The adapter's input in bf16: x's copy, or with dropout xd's, made here */
static const uint16_t *input16(zt_llama *m, const float *x, const uint16_t *x16, const float *xd, size_t n)
{
    return xd == x ? x16 : to16(m, m->lora->xd16, xd, n);
}

static void forward_bf16(zt_llama *m, int l, int e, zt_lora_module mod, const uint16_t *xd16, zt_real *y, int ldy,
                         int N)
{
    zt_lora *a = m->lora;
    zt_backend *be = m->be;
    int r = a->cfg.r, in, out;
    dims(m, mod, &in, &out);
    const float *A = adapter_a(a, a->view.params, l, e, mod), *B = A + (size_t)r * in;
    be->gemm_bf16(be, 0, 1, N, r, in, 1, xd16, in, to16(m, a->w16, A, (size_t)r * in), in, 0, a->u, r);
    be->gemm(be, 0, 1, N, out, r, (float)a->scale, a->u, r, B, r, 1, y, ldy);
}

/* zt_lora_backward's products with the long inner dimensions (the input's or the output's width,
 * the tokens) on bf16 operands; those of inner dimension r add a rank-r product to y or dxd,
 * bound by reading and writing them in fp32 either way, and stay fp32. dxd as there. */
static void backward_bf16(zt_llama *m, int l, int e, zt_lora_module mod, const uint16_t *xd16, const uint16_t *dy16,
                          int ldy, zt_real *dxd, float dxd_beta, int N)
{
    zt_lora *a = m->lora;
    zt_backend *be = m->be;
    int r = a->cfg.r, in, out;
    float s = (float)a->scale;
    dims(m, mod, &in, &out);
    const float *A = adapter_a(a, a->view.params, l, e, mod);
    const uint16_t *A16 = to16(m, a->w16, A, (size_t)r * (in + out)), *B16 = A16 + (size_t)r * in;
    float *gA = adapter_a(a, a->view.grads, l, e, mod), *gB = gA + (size_t)r * in;
    be->gemm_bf16(be, 0, 1, N, r, in, 1, xd16, in, A16, in, 0, a->u, r); /* u = xd·Aᵀ, again */
    be->gemm_bf16(be, 1, 0, out, r, N, s, dy16, ldy, to16(m, a->u16, a->u, (size_t)N * r), r, 1, gB, r);
    be->gemm_bf16(be, 0, 0, N, r, out, s, dy16, ldy, B16, r, 0, a->du, r);
    const uint16_t *du16 = to16(m, a->du16, a->du, (size_t)N * r);
    be->gemm_bf16(be, 1, 0, r, in, N, 1, du16, r, xd16, in, 1, gA, in);
    be->gemm(be, 0, 0, N, in, r, 1, a->du, r, A, in, dxd_beta, dxd, in);
}
#endif

void zt_lora_forward(zt_llama *m, int l, zt_lora_module mod, const zt_real *x, const uint16_t *x16, zt_real *y, int ldy)
{
    zt_lora_forward_rows(m, l, 0, mod, x, x16, y, ldy, m->B * m->T);
}

void zt_lora_forward_rows(zt_llama *m, int l, int e, zt_lora_module mod, const zt_real *x, const uint16_t *x16,
                          zt_real *y, int ldy, int N)
{
    zt_lora *a = m->lora;
    if (!a || a->disabled || !adapted(a, l, mod)) return;
    zt_backend *be = m->be;
    int r = a->cfg.r, in, out;
    dims(m, mod, &in, &out);
    const zt_real *A = adapter_a(a, a->view.params, l, e, mod), *B = A + (size_t)r * in;
    const zt_real *xd = dropped(m, l, e, mod, x, (size_t)N * in);
#ifndef ZT_REAL_DOUBLE
    if (x16 && a->scratch16) {
        forward_bf16(m, l, e, mod, input16(m, x, x16, xd, (size_t)N * in), y, ldy, N);
        return;
    }
#endif
    be->gemm(be, 0, 1, N, r, in, 1, xd, in, A, in, 0, a->u, r);
    if (is_dora(a) && !a->keep_norms) /* for the backward pass too */
        weight_norms(m, be, m->params, a->view.params, l, mod, layer_norms(a, l, mod), a->dv,
                     a->scratch_tokens * widest(m));
    if (is_dora(a)) dora_forward(m, l, mod, xd, y, ldy, N);
    else be->gemm(be, 0, 1, N, out, r, (zt_real)a->scale, a->u, r, B, r, 1, y, ldy);
}

void zt_lora_decode(zt_llama *m, int l, int e, zt_lora_module mod, const zt_real *x, zt_real *y, int ldy, int n)
{
    zt_lora *a = m->lora;
    if (!a || a->disabled || !adapted(a, l, mod)) return;
    zt_backend *be = m->be;
    int r = a->cfg.r, in, out;
    dims(m, mod, &in, &out);
    const zt_real *A = adapter_a(a, a->view.params, l, e, mod), *B = A + (size_t)r * in;
    be->gemm(be, 0, 1, n, r, in, 1, x, in, A, in, 0, a->u, r);
    if (is_dora(a)) dora_forward(m, l, mod, x, y, ldy, n);
    else be->gemm(be, 0, 1, n, out, r, (zt_real)a->scale, a->u, r, B, r, 1, y, ldy);
}

static zt_real *norms_of(zt_llama *m, int l, zt_lora_module mod) { return layer_norms(m->lora, l, mod); }

zt_status zt_lora_prepare_decode(zt_llama *m)
{
    zt_lora *a = m->lora;
    if (!a || !is_dora(a)) return ZT_OK;
    zt_status st = all_norms(m, norms_of);
    a->decode_norms = !st;
    return st;
}

void zt_lora_backward(zt_llama *m, int l, zt_lora_module mod, const zt_real *x, const uint16_t *x16, const zt_real *dy,
                      const uint16_t *dy16, int ldy, zt_real *dx)
{
    zt_lora_backward_rows(m, l, 0, mod, x, x16, dy, dy16, ldy, dx, m->B * m->T);
}

void zt_lora_backward_rows(zt_llama *m, int l, int e, zt_lora_module mod, const zt_real *x, const uint16_t *x16,
                           const zt_real *dy, const uint16_t *dy16, int ldy, zt_real *dx, int N)
{
    zt_lora *a = m->lora;
    if (!a || a->disabled || !adapted(a, l, mod)) return;
    zt_backend *be = m->be;
    int r = a->cfg.r, in, out;
    zt_real s = (zt_real)a->scale;
    dims(m, mod, &in, &out);
    const zt_real *A = adapter_a(a, a->view.params, l, e, mod), *B = A + (size_t)r * in;
    zt_real *gA = adapter_a(a, a->view.grads, l, e, mod), *gB = gA + (size_t)r * in;
    const zt_real *xd = dropped(m, l, e, mod, x, (size_t)N * in);
#ifndef ZT_REAL_DOUBLE
    if (x16 && dy16 && a->scratch16) { /* without dropout straight into dx, as below */
        backward_bf16(m, l, e, mod, input16(m, x, x16, xd, (size_t)N * in), dy16, ldy, xd == x ? dx : a->dxd, xd == x,
                      N);
        if (xd != x) dropout(m, l, e, mod, a->dxd, dx, (size_t)N * in, 1);
        return;
    }
#endif
    be->gemm(be, 0, 1, N, r, in, 1, xd, in, A, in, 0, a->u, r); /* u = xd·Aᵀ, again */
    if (is_dora(a)) {                                           /* B and A see g·dy */
        dora_backward(m, l, mod, xd, dy, ldy, N);
        dy = a->de, ldy = out;
    }
    be->gemm(be, 1, 0, out, r, N, s, dy, ldy, a->u, r, 1, gB, r);       /* ∂B += s·dyᵀ·u */
    be->gemm(be, 0, 0, N, r, out, s, dy, ldy, B, r, 0, a->du, r);       /* du = s·dy·B */
    be->gemm(be, 1, 0, r, in, N, 1, a->du, r, xd, in, 1, gA, in);       /* ∂A += duᵀ·xd */
    zt_real *dxd = xd == x ? dx : a->dxd;                               /* without dropout straight into dx */
    be->gemm(be, 0, 0, N, in, r, 1, a->du, r, A, in, xd == x, dxd, in); /* dxd (+)= du·A */
    if (is_dora(a))                                                     /* dxd += (g - 1)·dy·W */
        be->gemm(be, 0, 0, N, in, out, 1, a->dv, out, m->params + base_weight(m, l, 0, mod), in, 1, dxd, in);
    if (xd != x) dropout(m, l, e, mod, a->dxd, dx, (size_t)N * in, 1); /* through the same mask */
}

zt_real *zt_lora_score(const zt_llama *m, int grad)
{
    const zt_lora *a = m->lora;
    if (!a || a->disabled || !a->cfg.score) return NULL;
    return (grad ? a->view.grads : a->view.params) + a->score_off;
}

/* the part of the base's rows [base_off, +rows·C) in its elements [off, off + n) into the copy at
 * view offset to */
static void copy_part(zt_llama *m, size_t to, size_t base_off, size_t rows, size_t off, size_t n, const zt_real *src)
{
    size_t lo = base_off > off ? base_off : off, end = base_off + rows * (size_t)m->C,
           hi = off + n < end ? off + n : end;
    if (lo < hi)
        m->be->upload(m->be, m->lora->view.params + to + (lo - base_off), src + (lo - off), (hi - lo) * sizeof *src);
}

void zt_lora_copies_load(zt_llama *m, size_t off, size_t n, const zt_real *src)
{
    zt_lora *a = m->lora;
    if (!a) return;
    if (a->cfg.score) copy_part(m, a->score_off, m->head_off, (size_t)m->cfg.num_labels, off, n, src);
    if (a->cfg.save & ZT_LORA_SAVE_EMBED) copy_part(m, a->embed_off, m->embed_off, (size_t)m->V, off, n, src);
    if (a->cfg.save & ZT_LORA_SAVE_HEAD) copy_part(m, a->head_off, m->head_off, (size_t)m->V, off, n, src);
    for (int j = 0; j < a->cfg.n_tokens; j++)
        copy_part(m, a->tokens_off + (size_t)j * m->C, m->embed_off + (size_t)a->cfg.tokens[j] * m->C, 1, off, n, src);
}

zt_real *zt_lora_embed(const zt_llama *m, int grad)
{
    const zt_lora *a = m->lora;
    if (!a || a->disabled || !(a->cfg.save & ZT_LORA_SAVE_EMBED)) return NULL;
    return (grad ? a->view.grads : a->view.params) + a->embed_off;
}

zt_real *zt_lora_head(const zt_llama *m, int grad)
{
    const zt_lora *a = m->lora;
    if (!a || a->disabled || !(a->cfg.save & ZT_LORA_SAVE_HEAD)) return NULL;
    return (grad ? a->view.grads : a->view.params) + a->head_off;
}

/* ---- files ------------------------------------------------------------------------------ */

/* PEFT's own copies of a trained embedding or LM head, which it saves beside the trained one when
 * the vocabulary grew: NAME.original_module.weight (the base's) and NAME.modules_to_save.weight
 * (the trained one again) for a copy NAME.weight in v */
static int peft_copy(const zt_llama *v, const char *name)
{
    static const char *const kinds[] = {".original_module.weight", ".modules_to_save.weight"};
    char trained[sizeof v->tensors->name];
    size_t n = strlen(name);
    for (int i = 0; i < 2; i++) {
        size_t k = strlen(kinds[i]);
        if (n <= k || n - k + sizeof ".weight" > sizeof trained || strcmp(name + n - k, kinds[i])) continue;
        snprintf(trained, sizeof trained, "%.*s.weight", (int)(n - k), name);
        const zt_llama_tensor *t = zt_llama_find_tensor(v, trained);
        if (t && !strstr(trained, ".lora_")) return 1;
    }
    return 0;
}

zt_status zt_lora_load(zt_llama *m, const char *dir)
{
    char path[4096];
    zt_st_reader *rd = NULL;
    zt_llama *v = &m->lora->view;
    zt_status st = zt_path_join(path, sizeof path, dir, "adapter_model.safetensors");
    if (!st) st = zt_st_open(&rd, path);
    if (st) return st;
    size_t top = strlen("base_model.model.");
    for (int i = 0; !st && i < zt_st_count(rd); i++) {
        const char *name = zt_st_get(rd, i)->name;
        if (!strncmp(name, "base_model.model.", top) && zt_llama_passes_through(&m->cfg, name + top))
            m->lora->carried++;
        else if (!zt_llama_find_tensor(v, name) && !peft_copy(v, name))
            st = zt_fail(ZT_EUSER, "'%s': tensor '%s' is not an adapter of this model and adapter_config.json", path,
                         name);
    }
    zt_real *p = st ? NULL : zt_llama_params_map(v);
    if (!st && !p) st = zt_fail(ZT_ENOMEM, "out of memory loading '%s'", path);
    for (int i = 0; !st && i < v->n_tensors; i++) {
        const zt_llama_tensor *t = &v->tensors[i];
        const zt_st_tensor *f = zt_st_find(rd, t->name);
        st = f ? zt_st_read_into(f, p + t->offset, ZT_REAL_DTYPE, t->shape, t->ndim)
               : zt_fail(ZT_EUSER, "'%s': missing tensor '%s'", path, t->name);
    }
    if (p) zt_llama_params_unmap(v, p, !st);
    zt_st_close(rd);
    if (!st && m->lora->carried)
        zt_log_info("'%s': %d of its tensors adapt the vision tower, which text does not reach (zt export --merge "
                    "merges them)",
                    path, m->lora->carried);
    return st;
}

/* The targeted modules' names; in an image-text checkpoint a pattern over the language model's
 * paths (lora_pattern.c), as Unsloth writes: PEFT would match a list's q_proj, k_proj and v_proj in
 * the vision tower too, and load the adapter with new, untrained adapters there */
static cJSON *target_modules(const zt_llama *m)
{
    const zt_lora *a = m->lora;
    char pattern[256];
    snprintf(pattern, sizeof pattern, "%smodel\\.layers\\.\\d+\\.(self_attn|mlp)\\.(",
             m->cfg.text_prefix[0] ? "language_model\\." : "");
    cJSON *t = m->cfg.image_text ? NULL : cJSON_CreateArray();
    for (int mod = 0; mod < ZT_LORA_NMODULES; mod++) {
        if (!targeted(a, mod) || named_before(mod)) continue; /* a shared expert's: the experts' names */
        const char *name = zt_lora_model_module_name(&m->cfg, mod);
        if (t) cJSON_AddItemToArray(t, cJSON_CreateString(name));
        else snprintf(pattern + strlen(pattern), sizeof pattern - strlen(pattern), "%s|", name);
    }
    if (t) return t;
    pattern[strlen(pattern) - 1] = ')'; /* the last '|' */
    return cJSON_CreateString(pattern);
}

static zt_status save_config(const zt_llama *m, const char *dir, const char *base)
{
    const zt_lora *a = m->lora;
    char path[4096];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "target_modules", target_modules(m));
    cJSON_AddStringToObject(o, "peft_type", "LORA");
    cJSON_AddStringToObject(o, "task_type", a->cfg.score ? "SEQ_CLS" : "CAUSAL_LM");
    cJSON_AddStringToObject(o, "base_model_name_or_path", base);
    cJSON_AddNumberToObject(o, "r", a->cfg.r);
    cJSON_AddNumberToObject(o, "lora_alpha", a->cfg.alpha);
    cJSON_AddNumberToObject(o, "lora_dropout", a->cfg.dropout);
    cJSON_AddStringToObject(o, "bias", "none");
    cJSON_AddBoolToObject(o, "use_rslora", a->cfg.rslora);
    cJSON_AddBoolToObject(o, "use_dora", is_dora(a));
    if (a->cfg.score || a->cfg.save) { /* a SEQ_CLS task's "classifier", "score" after the others, as PEFT's */
        cJSON *s = cJSON_AddArrayToObject(o, "modules_to_save");
        static const char *const names[] = {"embed_tokens", "lm_head", "classifier", "score"};
        int on[] = {a->cfg.save & ZT_LORA_SAVE_EMBED, a->cfg.save & ZT_LORA_SAVE_HEAD, a->cfg.score, a->cfg.score};
        for (int i = 0; i < 4; i++)
            if (on[i]) cJSON_AddItemToArray(s, cJSON_CreateString(names[i]));
    } else {
        cJSON_AddNullToObject(o, "modules_to_save");
    }
    cJSON *tokens = a->cfg.n_tokens ? cJSON_AddArrayToObject(o, "trainable_token_indices")
                                    : cJSON_AddNullToObject(o, "trainable_token_indices");
    for (int j = 0; j < a->cfg.n_tokens; j++) cJSON_AddItemToArray(tokens, cJSON_CreateNumber(a->cfg.tokens[j]));
    cJSON *layers = a->cfg.n_layers ? cJSON_AddArrayToObject(o, "layers_to_transform")
                                    : cJSON_AddNullToObject(o, "layers_to_transform");
    for (int j = 0; j < a->cfg.n_layers; j++) cJSON_AddItemToArray(layers, cJSON_CreateNumber(a->cfg.layers[j]));
    cJSON_AddNullToObject(o, "layers_pattern");
    cJSON_AddBoolToObject(o, "fan_in_fan_out", 0);
    cJSON_AddBoolToObject(o, "inference_mode", 1);
    if (a->cfg.init == ZT_LORA_INIT_GAUSSIAN) cJSON_AddStringToObject(o, "init_lora_weights", "gaussian");
    else cJSON_AddBoolToObject(o, "init_lora_weights", 1);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    zt_status st = text ? zt_path_join(path, sizeof path, dir, "adapter_config.json")
                        : zt_fail(ZT_ENOMEM, "out of memory writing the adapter config");
    if (!st) st = zt_write_file_atomic(path, text, strlen(text));
    free(text);
    return st;
}

zt_status zt_lora_save(const zt_llama *m, const char *dir, const char *base)
{
    zt_llama *v = &m->lora->view;
    zt_status st = zt_mkdir_p(dir);
    if (st) return st;
    zt_st_writer *w = zt_st_writer_new();
    zt_real *p = zt_llama_params_map(v);
    if (!w || !p) st = zt_fail(ZT_ENOMEM, "out of memory saving '%s'", dir);
    for (int i = 0; i < v->n_tensors && !st; i++) {
        const zt_llama_tensor *t = &v->tensors[i];
        st = zt_st_writer_add(w, t->name, ZT_F32, t->shape, t->ndim, p + t->offset, ZT_REAL_DTYPE);
    }
    if (!st) st = zt_st_writer_finish_file(w, dir, "adapter_model.safetensors");
    zt_st_writer_free(w);
    if (p) zt_llama_params_unmap(v, p, 0);
    return st ? st : save_config(m, dir, base);
}

uint32_t zt_lora_base_hash_start(const zt_llama *m) { return zt_crc32c(0, &m->numel, sizeof m->numel); }

uint32_t zt_lora_base_hash_add(uint32_t h, const zt_real *w, size_t n) { return zt_crc32c(h, w, n * sizeof *w); }

uint32_t zt_lora_base_hash(const zt_llama *m)
{
    zt_real *p = zt_llama_params_map(m);
    if (!p) return 0; /* out of memory: nothing to compare, which the resume check reports as a mismatch */
    uint32_t h = zt_lora_base_hash_add(zt_lora_base_hash_start(m), p, m->numel);
    zt_llama_params_unmap((zt_llama *)m, p, 0);
    return h;
}

/* The base weight of module mod (of expert e) in layer l: its offset in the flat array */
static size_t base_weight(const zt_llama *m, int l, int e, zt_lora_module mod)
{
    const zt_llama_layer_layout *y = &m->lay;
    size_t b = m->layer0_off + y->numel * l + (per_expert(m, mod) ? y->expert * e : 0), C = m->C;
    switch (mod) {
    case ZT_LORA_ROUTER: return b + y->router;
    case ZT_LORA_Q:
    case ZT_LORA_QKV: return b + y->wqkv;
    case ZT_LORA_K: return b + y->wqkv + (size_t)m->HD * C;
    case ZT_LORA_V: return b + y->wqkv + (size_t)(m->HD + m->KV * m->D) * C;
    case ZT_LORA_O: return b + y->wo;
    case ZT_LORA_GATE:
    case ZT_LORA_GATE_UP: return b + y->wgu;
    case ZT_LORA_UP: return b + y->wgu + (size_t)m->F * C;
    case ZT_LORA_SHARED_GATE: return b + y->shared_gu;
    case ZT_LORA_SHARED_UP: return b + y->shared_gu + (size_t)m->cfg.shared_expert_size * C;
    case ZT_LORA_SHARED_DOWN: return b + y->shared_d;
    case ZT_LORA_SHARED_ROUTER: return b + y->shared_gate;
    default: return b + y->wd;
    }
}

/* DoRA's merge of module mod in layer l, W + s·B·A in w already: each row times M / norm, the
 * norms of W + s·B·A taken before the merge */
static void scale_rows(const zt_llama *m, zt_real *w, zt_real *p, int l, zt_lora_module mod, const zt_real *norm)
{
    int in, out;
    dims(m, mod, &in, &out);
    const zt_real *M = magnitude(m, p, l, mod);
    zt_real *W = w + base_weight(m, l, 0, mod);
    for (int j = 0; j < out; j++)
        for (int i = 0; i < in; i++) W[(size_t)j * in + i] *= M[j] / norm[j];
}

zt_status zt_lora_merge(zt_llama *m)
{
    /* PEFT's copies of a tied embedding and LM head train apart: the merged model keeps both */
    zt_status st = m->lora->cfg.save ? zt_llama_untie(m) : ZT_OK;
    if (st) return st;
    zt_lora *a = m->lora;
    zt_backend *cpu = zt_backend_cpu(); /* on the mapped arrays */
    size_t cap = 0;
    zt_real *w = zt_llama_params_map(m), *p = zt_llama_params_map(&a->view);
    zt_real *buf = is_dora(a) ? norm_rows(m, cpu, &cap) : NULL,
            *norm = is_dora(a) ? malloc(widest(m) * sizeof *norm) : NULL;
    if (!w || !p || (is_dora(a) && (!buf || !norm))) {
        zt_llama_params_unmap(m, w, 0);
        zt_llama_params_unmap(&a->view, p, 0);
        cpu->free(cpu, buf);
        free(norm);
        return zt_fail(ZT_ENOMEM, "out of memory merging the adapters");
    }
    int r = a->cfg.r;
    for (int l = 0; l < m->L; l++)
        for (int mod = 0; mod < ZT_LORA_NMODULES; mod++)
            for (int e = 0; adapted(a, l, mod) && e < experts_of(m, mod); e++) {
                int in, out;
                dims(m, mod, &in, &out);
                const zt_real *A = adapter_a(a, p, l, e, mod), *B = A + (size_t)r * in;
                if (is_dora(a)) weight_norms(m, cpu, w, p, l, mod, norm, buf, cap);
                cpu->gemm(cpu, 0, 0, out, in, r, (zt_real)a->scale, B, r, A, in, 1, w + base_weight(m, l, e, mod), in);
                if (is_dora(a)) scale_rows(m, w, p, l, mod, norm);
            }
    size_t vocab = (size_t)m->V * m->C;
    if (a->cfg.score) memcpy(w + m->head_off, p + a->score_off, (size_t)m->C * sizeof *w);
    if (a->cfg.save & ZT_LORA_SAVE_EMBED) memcpy(w + m->embed_off, p + a->embed_off, vocab * sizeof *w);
    if (a->cfg.save & ZT_LORA_SAVE_HEAD) memcpy(w + m->head_off, p + a->head_off, vocab * sizeof *w);
    for (int j = 0; j < a->cfg.n_tokens; j++) /* a tied LM head takes them too */
        memcpy(w + m->embed_off + (size_t)a->cfg.tokens[j] * m->C, p + a->tokens_off + (size_t)j * m->C,
               (size_t)m->C * sizeof *w);
    cpu->free(cpu, buf);
    free(norm);
    zt_llama_params_unmap(&a->view, p, 0);
    zt_llama_params_unmap(m, w, 1);
    return ZT_OK;
}

/* The names of lora.h's and qbase.h's enums (also what the recipe schema takes), and the modules'
 * names and paths. */
#include <stdio.h>
#include <string.h>

#include "lora.h"
#include "qbase.h"

const char *const zt_lora_module_names[ZT_LORA_NMODULES] = {
    "q_proj",   "k_proj",       "v_proj", "o_proj",    "gate_proj", "up_proj",   "down_proj",
    "qkv_proj", "gate_up_proj", "gate",   "gate_proj", "up_proj",   "down_proj", "shared_expert_gate"};
const char *const zt_lora_init_names[2] = {"default", "gaussian"};
const char *const zt_lora_method_names[2] = {"lora", "dora"};
const char *const zt_qbase_kind_names[3] = {"none", "nf4", "int8"};

int zt_lora_in_attention(zt_lora_module mod) { return mod <= ZT_LORA_O || mod == ZT_LORA_QKV; }

void zt_lora_module_path(char *buf, size_t cap, int l, zt_lora_module mod)
{
    snprintf(buf, cap, "layers.%d.%s.%s", l, zt_lora_in_attention(mod) ? "self_attn" : "mlp",
             zt_lora_module_names[mod]);
}

unsigned zt_lora_named_targets(const zt_llama_config *c, unsigned targets)
{
    if (!c || !c->shared_expert_size) return targets;
    for (int i = 0; i < 3; i++) /* gate, up, down: the shared expert's after the experts' */
        targets |= ((targets >> (ZT_LORA_GATE + i)) & 1u) << (ZT_LORA_SHARED_GATE + i);
    return targets;
}

int zt_lora_per_expert(const zt_llama_config *c, zt_lora_module mod)
{
    return c && c->n_experts && mod >= ZT_LORA_GATE && mod <= ZT_LORA_DOWN;
}

const char *zt_lora_peft_prefix(const zt_llama_config *c)
{
    return c && c->text_prefix[0] ? "base_model.model.language_model." : "base_model.model.";
}

static int mixtral(const zt_llama_config *c) { return c && !strcmp(c->model_type, "mixtral"); }

const char *zt_lora_model_module_name(const zt_llama_config *c, zt_lora_module mod)
{
    static const char *const w[] = {"w1", "w3", "w2"}; /* gate, up, down */
    return mixtral(c) && zt_lora_per_expert(c, mod) ? w[mod - ZT_LORA_GATE] : zt_lora_module_names[mod];
}

void zt_lora_model_path(const zt_llama_config *c, char *buf, size_t cap, int l, int e, zt_lora_module mod)
{
    const char *block = mixtral(c) ? "block_sparse_moe" : "mlp";
    if (mod == ZT_LORA_ROUTER) snprintf(buf, cap, "layers.%d.%s.gate", l, block);
    else if (mod >= ZT_LORA_SHARED_GATE && mod <= ZT_LORA_SHARED_DOWN)
        snprintf(buf, cap, "layers.%d.mlp.shared_expert.%s", l, zt_lora_module_names[mod]);
    else if (zt_lora_per_expert(c, mod))
        snprintf(buf, cap, "layers.%d.%s.experts.%d.%s", l, block, e, zt_lora_model_module_name(c, mod));
    else zt_lora_module_path(buf, cap, l, mod);
}

int zt_lora_module_of(const char *name)
{
    for (int i = 0; i < ZT_LORA_NMODULES; i++)
        if (!strcmp(name, zt_lora_module_names[i])) return i;
    static const char *const mixtral[] = {"w1", "w3", "w2"}; /* gate, up, down */
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, mixtral[i])) return ZT_LORA_GATE + i;
    return -1;
}

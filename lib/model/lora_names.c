/* The names of lora.h's and qbase.h's enums (also what the recipe schema takes), and the modules'
 * names and paths. */
#include <stdio.h>
#include <string.h>

#include "lora.h"
#include "qbase.h"

const char *const zt_lora_module_names[ZT_LORA_NMODULES] = {"q_proj",       "k_proj",  "v_proj",    "o_proj",
                                                            "gate_proj",    "up_proj", "down_proj", "qkv_proj",
                                                            "gate_up_proj", "gate"};
const char *const zt_lora_init_names[2] = {"default", "gaussian"};
const char *const zt_lora_method_names[2] = {"lora", "dora"};
const char *const zt_qbase_kind_names[3] = {"none", "nf4", "int8"};

int zt_lora_in_attention(zt_lora_module mod) { return mod <= ZT_LORA_O || mod == ZT_LORA_QKV; }

void zt_lora_module_path(char *buf, size_t cap, int l, zt_lora_module mod)
{
    snprintf(buf, cap, "layers.%d.%s.%s", l, zt_lora_in_attention(mod) ? "self_attn" : "mlp",
             zt_lora_module_names[mod]);
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

/* The names of lora.h's and qbase.h's enums (also what the recipe schema takes). */
#include <string.h>

#include "lora.h"
#include "qbase.h"

const char *const zt_lora_module_names[ZT_LORA_NMODULES] = {"q_proj",    "k_proj",    "v_proj",
                                                            "o_proj",    "gate_proj", "up_proj",
                                                            "down_proj", "qkv_proj",  "gate_up_proj"};
const char *const zt_lora_init_names[2] = {"default", "gaussian"};
const char *const zt_lora_method_names[2] = {"lora", "dora"};
const char *const zt_qbase_kind_names[3] = {"none", "nf4", "int8"};

int zt_lora_module_of(const char *name)
{
    for (int i = 0; i < ZT_LORA_NMODULES; i++)
        if (!strcmp(name, zt_lora_module_names[i])) return i;
    return -1;
}

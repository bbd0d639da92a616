/* A PEFT adapter directory on a model (lora.h): what zt eval, zt generate and zt export --merge
 * run base + adapter with. */
#include "lib/core/fileio.h"
#include "lora.h"

int zt_lora_is_adapter_dir(const char *dir)
{
    char path[4096];
    return dir && !zt_path_join(path, sizeof path, dir, "adapter_config.json") && zt_path_exists(path);
}

zt_status zt_lora_attach_dir(zt_llama *m, const char *dir, zt_qbase_kind kind, int double_quant)
{
    zt_lora_config c;
    zt_qbase_kind noted;
    int dq;
    if (!zt_lora_is_adapter_dir(dir))
        return zt_fail(ZT_EUSER, "'%s' is not a PEFT adapter directory (it has no adapter_config.json)", dir);
    zt_status st = zt_lora_read_config(dir, &c);
    if (!st) st = zt_qbase_note_read(dir, &noted, &dq);
    if (!st && noted != ZT_QBASE_NONE) kind = noted, double_quant = dq;
    if (!st && kind != ZT_QBASE_NONE) st = zt_qbase_round_trip(m, kind, double_quant);
    if (!st) st = zt_lora_attach(m, &c);
    return st ? st : zt_lora_load(m, dir);
}

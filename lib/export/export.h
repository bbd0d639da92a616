/* export: a Hugging Face model directory (config.json, model.safetensors or
 * shards + index, tokenizer files, generation_config.json) from a training checkpoint,
 * a run, or another model directory, written tensor by tensor in bounded chunks: the
 * whole model is never in memory (unlike DeepSpeed's zero_to_fp32).
 *
 *     zt_export_info info;
 *     st = zt_export("runs/x", NULL, "out/hf", "bf16", 5000000000ull, &info);
 *     // info.source: runs/x/checkpoints/step-000300 (its newest complete checkpoint)
 */
#ifndef ZT_EXPORT_H
#define ZT_EXPORT_H

#include <stddef.h>

#include "lib/core/status.h"

typedef struct zt_export_info {
    char source[4096]; /* the checkpoint or model directory exported */
    long step;         /* the checkpoint's step, -1 for a model directory */
    size_t numel;      /* parameters */
    const char *dtype; /* "bf16" or "fp32" as written */
} zt_export_info;

/* src: a checkpoint directory (complete: DONE), a run directory (its newest complete
 * checkpoint, else its final/), or a model directory (converted). dtype: "bf16", "fp32",
 * or NULL for the source config.json's torch_dtype (bf16 for "bfloat16", else fp32).
 * max_shard_bytes: 0 for one file. Bad or missing input is ZT_EUSER naming the file.
 * base: NULL, but for a checkpoint of an image-text model (Gemma 3's), which holds the language model
 * alone: the model it was trained from, whose vision tower the export carries. */
zt_status zt_export(const char *src, const char *base, const char *out_dir, const char *dtype, size_t max_shard_bytes,
                    zt_export_info *info);

/* --merge: the model of a LoRA run (its final/) or a PEFT adapter directory, W + s·B·A for
 * every adapter, on base (NULL: adapter_config.json's base_model_name_or_path). The base is
 * read whole into memory (fp32). */
zt_status zt_export_merged(const char *src, const char *base, const char *out_dir, const char *dtype,
                           size_t max_shard_bytes, zt_export_info *info);

#endif

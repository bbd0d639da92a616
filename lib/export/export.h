/* export: a Hugging Face model directory (config.json, model.safetensors or
 * shards + index, tokenizer files, generation_config.json), or one GGUF file for llama.cpp,
 * from a training checkpoint, a run, or another model directory, written tensor by tensor in
 * bounded chunks: the whole model is never in memory (unlike DeepSpeed's zero_to_fp32).
 *
 *     zt_export_info info;
 *     zt_export_options o = {.dtype = "bf16", .max_shard_bytes = 5000000000ull};
 *     st = zt_export("runs/x", "out/hf", &o, &info);
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
    const char *dtype; /* "bf16", "fp32" (GGUF: "fp16", "q8_0") as written */
} zt_export_info;

typedef struct zt_export_options {
    /* NULL, but for a checkpoint of an image-text model (Gemma 3's), which holds the language model
     * alone: the model it was trained from, whose vision tower the export carries; with --merge,
     * the base model (NULL: adapter_config.json's base_model_name_or_path) */
    const char *base;
    /* "bf16", "fp32" (and for GGUF "fp16", "q8_0"), or NULL for the source config.json's
     * torch_dtype (bf16 for "bfloat16", else fp32) */
    const char *dtype;
    size_t max_shard_bytes; /* 0 for one file */
    /* out is one GGUF file (export/gguf_model.h) with the tokenizer, not a directory */
    int gguf;
} zt_export_options;

/* src: a checkpoint directory (complete: DONE), a run directory (its newest complete
 * checkpoint, else its final/), or a model directory (converted). Bad or missing input is
 * ZT_EUSER naming the file. */
zt_status zt_export(const char *src, const char *out, const zt_export_options *o, zt_export_info *info);

/* --merge: the model of a LoRA run (its final/) or a PEFT adapter directory, W + s·B·A for
 * every adapter, on o->base. The base is read whole into memory (fp32). */
zt_status zt_export_merged(const char *src, const char *out, const zt_export_options *o, zt_export_info *info);

#endif

/* zt export: a Hugging Face model directory from a run or a training checkpoint. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "lib/export/export.h"
#include "lib/core/log.h"
#include "options.h"

int cmd_export(int argc, char **argv)
{
    const char *out = NULL, *dtype = NULL, *shard = "5GB", *base = NULL, *format = "hf";
    int merge = 0;
    unsigned long long max_shard;
    zt_usage u = {"zt export",
                  "RUN_OR_CHECKPOINT_DIR --out DIR [--dtype bf16|fp32] [--max-shard-size 5GB] [--merge] [--base DIR]\n"
                  "       zt export RUN_OR_CHECKPOINT_DIR --format gguf --out FILE.gguf [--dtype fp32|fp16|bf16|q8_0] "
                  "[--merge] [--base DIR]",
                  "Write a Hugging Face model directory (config.json, model.safetensors or shards with an\n"
                  "index, tokenizer files, generation_config.json). A run directory exports its newest\n"
                  "complete checkpoint, or its final/ when it has none; a checkpoint directory exports\n"
                  "that one. Tensors are written one at a time: the model never has to fit in memory.\n"
                  "With --merge, a LoRA run (its final/) or a PEFT adapter directory: the base model with\n"
                  "every adapter merged into its weights (the base read whole into memory).\n"
                  "A checkpoint of an image-text model (Gemma 3's, ...) holds its language model alone: --base names\n"
                  "the model it was trained from, whose vision tower the export carries.\n"
                  "With --format gguf, one GGUF file for llama.cpp, Ollama or LM Studio (Llama, Mistral, Qwen 2 and\n"
                  "3, Phi-3, Gemma 1 to 3, OLMo 2, SmolLM3, Granite and the mixtures of experts Mixtral, Qwen-MoE and\n"
                  "OLMoE, with a BPE tokenizer.json): the weights, the tokenizer and the chat template; of an\n"
                  "image-text model, its language model. Of a LoRA run or PEFT adapter without --merge, a GGUF\n"
                  "LoRA adapter (llama.cpp's --lora, Ollama's ADAPTER)."};
    zt_option opts[] = {
        {"out", 'S', &out, "DIR", "output directory (--format gguf: the file)", 0, 0},
        {"dtype", 'S', &dtype, "TYPE",
         "bf16 or fp32; GGUF also fp16 or q8_0 (default: the source config.json's torch_dtype)", 0, 0},
        {"format", 'S', &format, "FORMAT", "hf (a model directory, the default) or gguf (one file)", 0, 0},
        {"max-shard-size", 'S', &shard, "SIZE", "largest safetensors file (default 5GB); more are sharded", 0, 0},
        {"merge", 'F', &merge, "", "merge LoRA adapters into their base model", 0, 0},
        {"base", 'S', &base, "DIR",
         "with --merge: the base model (default: the adapter's base_model_name_or_path); with an image-text "
         "checkpoint: the model it was trained from",
         0, 0},
        {0},
    };
    if ((argc = zt_options_parse(argc, argv, opts, &u)) < 0) return argc == -2 ? 0 : 2;
    if (argc != 2 || !out) {
        fprintf(stderr, "zt: error: zt export: needs RUN_OR_CHECKPOINT_DIR and --out DIR (see 'zt export --help')\n");
        return 2;
    }
    if (zt_parse_size(shard, &max_shard) || max_shard == 0) {
        fprintf(stderr, "zt: error: zt export: --max-shard-size '%s' is not a size like 500MB or 5GB\n", shard);
        return 2;
    }
    if (strcmp(format, "hf") && strcmp(format, "gguf")) {
        fprintf(stderr, "zt: error: zt export: --format '%s' is not hf or gguf\n", format);
        return 2;
    }
    zt_export_info info;
    zt_export_options o = {base, dtype, (size_t)max_shard, !strcmp(format, "gguf")};
    zt_status st = merge ? zt_export_merged(argv[1], out, &o, &info) : zt_export(argv[1], out, &o, &info);
    if (st) return cmd_fail(st);
    if (info.step >= 0)
        zt_log_info("exported step %ld from '%s' (%zu parameters, %s) to '%s'", info.step, info.source, info.numel,
                    info.dtype, out);
    else zt_log_info("exported '%s' (%zu parameters, %s) to '%s'", info.source, info.numel, info.dtype, out);
    return 0;
}

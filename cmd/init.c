/* zt init: a randomly initialised model in Hugging Face format. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/model/llama.h"
#include "lib/model/qbase_bnb.h"
#include "options.h"

int cmd_init(int argc, char **argv)
{
    const char *arch = NULL, *out = NULL, *quantize = NULL;
    const char *shard = "5GB", *dtype_name = "fp32";
    int double_quant = 0;
    zt_dtype dtype;
    unsigned long long max_shard;
    long seed = 0;
    zt_usage u = {"zt init", "--arch llama --out DIR [--seed S] [--dtype fp32|bf16] [config_key=value ...]",
                  "Write config.json (the architecture's defaults plus the given config.json keys) and\n"
                  "model.safetensors with weights N(0, 0.02) for matrices, 1 for norm weights (0 for Gemma's,\n"
                  "whose scale is 1 + weight), 0 for biases. With --quantize nf4 the linear weights are written\n"
                  "quantized, as bitsandbytes 4-bit checkpoints are, tensor by tensor: a model larger than\n"
                  "memory (or than the disk in fp32) for LoRA with lora.quantize_base = \"nf4\"."};
    zt_option opts[] = {
        {"arch", 'S', &arch, "NAME",
         "llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3, glm, glm4, olmo2, phi3, smollm3, granite, or the "
         "mixtures of experts mixtral, qwen2_moe, qwen3_moe, olmoe (sets model_type; gemma3 is gemma3_text)",
         0, 0},
        {"out", 'S', &out, "DIR", "output directory", 0, 0},
        {"seed", 'I', &seed, "S", "random seed (default 0)", 0, LONG_MAX},
        {"dtype", 'S', &dtype_name, "DTYPE", "fp32 (default), bf16 or fp16: the weights as stored", 0, 0},
        {"max-shard-size", 'S', &shard, "SIZE", "largest safetensors file (default 5GB); more are sharded", 0, 0},
        {"quantize", 'S', &quantize, "nf4",
         "write the linear weights in NF4 (the bitsandbytes 4-bit format, the same weights quantized)", 0, 0},
        {"double-quant", 'F', &double_quant, "", "with --quantize: the NF4 absmax values quantized again", 0, 0},
        {0},
    };
    if ((argc = zt_options_parse(argc, argv, opts, &u)) < 0) return argc == -2 ? 0 : 2;
    if (!arch || !out) {
        fprintf(stderr, "zt: error: zt init: --arch and --out are required (see 'zt init --help')\n");
        return 2;
    }
    if (zt_parse_size(shard, &max_shard) || max_shard == 0) {
        fprintf(stderr, "zt: error: zt init: --max-shard-size '%s' is not a size like 500MB or 5GB\n", shard);
        return 2;
    }
    if (zt_dtype_parse(dtype_name, &dtype) || dtype == ZT_F64) {
        fprintf(stderr, "zt: error: zt init: --dtype '%s' is not fp32, bf16 or fp16\n", dtype_name);
        return 2;
    }
    if ((quantize && strcmp(quantize, "nf4")) || (double_quant && !quantize)) {
        fprintf(stderr, "zt: error: zt init: %s\n",
                quantize ? "--quantize writes \"nf4\" only (the bitsandbytes 4-bit format)"
                         : "--double-quant needs --quantize nf4");
        return 2;
    }
    zt_llama_config cfg;
    zt_llama_config_default(&cfg);
    zt_status st = zt_llama_config_set(&cfg, "model_type", strcmp(arch, "gemma3") ? arch : "gemma3_text");
    for (int i = 1; i < argc && !st; i++) {
        char key[128];
        const char *eq = strchr(argv[i], '=');
        if (!eq || eq == argv[i] || (size_t)(eq - argv[i]) >= sizeof key) {
            fprintf(stderr, "zt: error: zt init: '%s' is not a config_key=value pair\n", argv[i]);
            return 2;
        }
        snprintf(key, sizeof key, "%.*s", (int)(eq - argv[i]), argv[i]);
        st = zt_llama_config_set(&cfg, key, eq + 1);
    }
    if (!st && cfg.head_dim == 0 && cfg.num_attention_heads > 0)
        cfg.head_dim = cfg.hidden_size / cfg.num_attention_heads;
    zt_llama m;
    if (!st) st = zt_llama_config_check(&cfg, "zt init");
    if (st) return cmd_fail(st);
    if (quantize) { /* never the whole model in memory */
        st = zt_qbase_bnb_write_init(&cfg, out, dtype, double_quant, (uint64_t)seed, 0.02, (size_t)max_shard);
        if (!st)
            zt_log_info("wrote a %s model, its linear weights NF4%s, to '%s'", cfg.model_type,
                        double_quant ? " with double quantization" : "", out);
        return st ? cmd_fail(st) : 0;
    }
    if ((st = zt_llama_init(&m, &cfg, zt_backend_cpu(), ZT_F32))) return cmd_fail(st);
    st = zt_llama_init_weights(&m, (uint64_t)seed, 0.02);
    if (!st) st = zt_llama_save(&m, out, dtype, (size_t)max_shard);
    if (!st) zt_log_info("wrote a %s model with %zu parameters to '%s'", cfg.model_type, m.numel, out);
    zt_llama_free(&m);
    return st ? cmd_fail(st) : 0;
}

/* generate: text generation from a model directory (weights, config and
 * tokenizer), or a base model with a PEFT adapter run without merging: KV-cached decoding,
 * sampling, stopping at an end-of-turn token or a stop string.
 *
 *     zt_generator g;
 *     zt_generator_open(&g, &(zt_generator_options){.model = "runs/x/final", .max_len = 256});
 *     g.sampler.temperature = 0;                        // greedy
 *     char *text;
 *     zt_generate_text(&g, "Once upon a time", &text);   // raw text prompt
 *     zt_generate_chat(&g, msgs, n, NULL, &text);        // through the chat template
 *     zt_generator_close(&g);
 */
#ifndef ZT_GENERATE_H
#define ZT_GENERATE_H

#include <cjson/cJSON.h>

#include "lib/data/formats.h"
#include "lib/data/template.h"
#include "lib/model/llama.h"
#include "lib/model/lora.h"
#include "lib/model/sample.h"
#include "tokenizers/tokenizer.h"

typedef struct zt_generator {
    zt_llama m;
    zt_llama_cache cache;
    zt_tokenizer *tok;
    zt_template *tmpl; /* NULL when the model has no chat template and none was named */
    zt_sampler sampler;
    int max_new_tokens;
    const char *const *stop; /* stop strings (not included in the output) */
    int nstop;
    int32_t stop_ids[ZT_END_IDS + 1]; /* zt_format_end_ids, then config.json's eos_token_id; -1 when unused */
    zt_real *logits;
    void *scratch;
    int64_t generated; /* tokens sampled so far, and the seconds spent (prompts included) */
    double seconds;
} zt_generator;

typedef struct zt_generator_options {
    /* a model directory, or a PEFT adapter directory: then the adapter on the base its
     * adapter_config.json names (base_model_name_or_path), as PEFT's AutoPeftModel loads it */
    const char *model;
    /* NULL, or a PEFT adapter directory run on model without merging (zt_lora_attach_dir); the
     * base quantized as quantize_base and double_quant say when it has no zt_quantization.json */
    const char *adapter;
    zt_qbase_kind quantize_base;
    int double_quant;
    /* the chat template (zt_template_load; template_path for ZT_TEMPLATE_FILE): auto takes the
     * model's own when it has one (optional here), any other must load */
    zt_chat_template chat_template;
    const char *template_path;
    const char *template_kwargs; /* NULL, or a JSON object: more variables for it (zt_template_set_kwargs) */
    int max_len;      /* positions of the KV cache */
    zt_device device; /* where the model and its cache live (auto: a GPU when one answers) */
} zt_generator_options;

/* The tokenizer and the model's template come from the adapter directory when it has a
 * tokenizer (a LoRA run's final/ does), else from the model's. */
zt_status zt_generator_open(zt_generator *g, const zt_generator_options *o);
void zt_generator_close(zt_generator *g);
/* Continues ids (a prompt already tokenized); the completion's text in *out (malloc'd). */
zt_status zt_generate_ids(zt_generator *g, const int32_t *ids, size_t n, char **out);
zt_status zt_generate_text(zt_generator *g, const char *prompt, char **out);
/* The answer to msgs[0..n) rendered by the chat template with row's "tools" and
 * "chat_template_kwargs" (row: the request or data line, or NULL). */
zt_status zt_generate_chat(zt_generator *g, const zt_message *msgs, int n, const cJSON *row, char **out);

/* One line of a prompts file (zt generate --input): a JSON object with "prompt" (a string, or
 * messages) or "messages" (read as data/messages.h reads them), and "tools" and
 * "chat_template_kwargs" for the template (taken by zt_generate_chat from obj); its
 * other fields are kept in obj, where the completion goes. line[len] is its end (the newline
 * removed); where ("file:line") starts a ZT_EUSER message. */
typedef struct zt_generate_request {
    cJSON *obj;
    const char *prompt; /* a text prompt, or NULL: */
    zt_message *msgs;   /* the conversation, n messages */
    int n;
} zt_generate_request;
zt_status zt_generate_request_parse(zt_generate_request *q, const char *line, size_t len, const char *where);
void zt_generate_request_free(zt_generate_request *q);

#endif

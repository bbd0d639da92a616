/* Evaluation: mean loss over every row of a data set, one pass in file order. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/generate/generate.h"
#include "lib/data/batch.h"
#include "lib/data/formats.h"
#include "lib/data/jsonl.h"
#include "lib/data/messages.h"
#include "lib/core/fileio.h"
#include "lib/model/lora.h"
#include "train.h"

zt_status zt_eval_dataset(zt_llama *m, const zt_dataset *ds, const zt_recipe *r, zt_eval_result *out)
{
    zt_loader ld;
    zt_batch b;
    int B = m->acts_mem ? m->B : r->train.micro_batch_size, T = r->data.max_length, T_model = m->T;
    zt_status st = zt_loader_init(&ld, ds, T, B, r->data.packing, 0, r->train.seed, 0, 1);
    if (st) return st;
    /* The rows' tokens, not max_length, set the work and the activations: their padding is cut.
     * Rounded up to 64 positions: a row's results depend on whether it falls in a full block of
     * the GEMMs' row tiles or in an edge tile, and at 64 they fall as they do at max_length (a
     * multiple of 64), so losses are bitwise the same. */
    int W = (ld.width + 63) / 64 * 64;
    if (W > T) W = T;
    if (!m->acts_mem) st = zt_llama_alloc_acts(m, B, W, 0), T_model = W;
    if (st || (st = zt_batch_alloc(&b, B, W))) {
        zt_loader_free(&ld);
        return st;
    }
    zt_llama_set_length(m, W);
    double loss = 0;
    int64_t tokens = 0, positions = 0, batches = zt_loader_get_stats(&ld).batches;
    for (int64_t i = 0; i < batches && !st; i++) {
        if ((st = zt_loader_next(&ld, &b))) break;
        if (!b.n_targets) continue;
        zt_llama_forward_backward(m, b.input, b.target, b.pos, 0, &loss);
        tokens += b.n_targets;
        positions += (int64_t)B * W;
    }
    zt_llama_set_length(m, T_model);
    zt_batch_free(&b);
    zt_loader_free(&ld);
    out->loss = tokens ? loss / tokens : NAN;
    out->tokens = tokens;
    out->positions = positions;
    return st;
}

typedef struct accuracy_ctx {
    zt_generator *g;
    zt_data_format format;
    int64_t max, seen, right;
} accuracy_ctx;

static void trim(char **s)
{
    while (isspace((unsigned char)**s)) ++*s;
    size_t n = strlen(*s);
    while (n && isspace((unsigned char)(*s)[n - 1])) (*s)[--n] = 0;
}

/* greedy answer to the conversation up to its last assistant turn, compared with that turn as the
 * model was trained to write it (zt_format_answer: tool calls, and a template's text around the
 * content, such as Qwen3's empty think block, included) */
static zt_status accuracy_line(void *ctx, cJSON *o)
{
    accuracy_ctx *a = ctx;
    if (a->max && a->seen >= a->max) return ZT_OK;
    zt_message *m;
    int n;
    char *owned, *gen = NULL, *want = NULL;
    zt_status st = zt_messages_normalize(o);
    if (!st) st = zt_format_messages(o, a->format, &m, &n, &owned);
    if (st) return st;
    int last = n - 1;
    while (last >= 0 && strcmp(m[last].role, "assistant")) last--;
    if (last > 0 && !(st = zt_generate_chat(a->g, m, last, o, &gen)) &&
        !(st = zt_format_answer(a->g->tok, a->g->tmpl, m, n, o, a->g->stop_ids, ZT_END_IDS + 1, &want))) {
        char *w = want, *got = gen;
        trim(&w), trim(&got);
        a->right += !strcmp(w, got);
        a->seen++;
    }
    free(want);
    free(gen);
    free(m);
    free(owned);
    return st;
}

/* model_dir answers, with adapter (a PEFT adapter directory, or NULL) on it as the loss saw it */
static zt_status eval_accuracy(const zt_recipe *r, const char *model_dir, const char *adapter, zt_eval_result *out)
{
    if (!r->data.valid.n) return zt_fail(ZT_EUSER, "eval.generate = true needs data.valid (held-out conversations)");
    zt_generator g;
    zt_generator_options o = {.model = model_dir,
                              .adapter = adapter,
                              .quantize_base = r->lora.quantize_base,
                              .double_quant = r->lora.double_quant,
                              .chat_template = r->tokenizer.chat_template,
                              .template_path = r->tokenizer.chat_template_path,
                              .template_kwargs = r->tokenizer.chat_template_kwargs,
                              .max_len = r->data.max_length + r->eval.max_new_tokens};
    zt_status st = zt_generator_open(&g, &o);
    if (st) return st;
    g.max_new_tokens = r->eval.max_new_tokens;
    accuracy_ctx a = {.g = &g, .format = r->data.format, .max = r->eval.max_examples};
    int64_t skipped;
    st = zt_jsonl_load(r->data.valid.items, r->data.valid.n, r->data.skip_bad_lines, accuracy_line, &a, &skipped);
    zt_generator_close(&g);
    out->accuracy = a.seen ? (double)a.right / a.seen : NAN;
    out->answered = a.seen;
    return st;
}

/* The weights were checked finite when loaded, so a loss that is not is the model's own
 * numerical failure (an overflow in the forward pass): a runtime error, exit 1. */
static zt_status loss_check(const zt_eval_result *e, const char *data)
{
    if (!e->tokens) return zt_fail(ZT_EUSER, "%s has no target tokens to evaluate", data);
    if (isfinite(e->loss)) return ZT_OK;
    return zt_fail(ZT_ERUNTIME,
                   "the loss is %s over %lld tokens of %s: a numerical failure of the model (its "
                   "forward pass overflows)",
                   isnan(e->loss) ? "NaN" : "inf", (long long)e->tokens, data);
}

zt_status zt_evaluate(const zt_recipe *r, const char *checkpoint_dir, zt_eval_result *out)
{
    /* --checkpoint DIR holding a PEFT adapter (a LoRA run's final/) is evaluated on model.path, as lora.adapter is */
    const char *adapter = zt_lora_is_adapter_dir(checkpoint_dir) ? checkpoint_dir
                          : r->lora.adapter[0]                   ? r->lora.adapter
                                                                 : NULL;
    if (adapter == checkpoint_dir) checkpoint_dir = NULL;
    out->accuracy = NAN;
    out->answered = 0;
    if (r->data.format == ZT_DATA_PREFERENCE || r->data.format == ZT_DATA_UNPAIRED || r->data.format == ZT_DATA_PROMPT)
        return zt_fail(ZT_EUSER, "data.format '%s' is for zt rlhf", zt_data_format_names[r->data.format]);
    zt_llama m;
    zt_dataset train, valid;
    zt_data_tools d;
    zt_status st = zt_model_open(&m, checkpoint_dir ? checkpoint_dir : r->model.path, r->model.dtype, r->model.device);
    if (st) return st;
    if ((st = zt_data_tools_open(&d, r))) {
        zt_llama_free(&m);
        return st;
    }
    int V = m.V;
    zt_lora_config c;
    if (!(st = zt_vocab_prepare(&d, &m)) && adapter && m.V != V && !(st = zt_lora_read_config(adapter, &c)))
        st = zt_lora_check_vocab(&m, &c, V);
    if (!st && adapter) st = zt_lora_attach_dir(&m, adapter, r->lora.quantize_base, r->lora.double_quant);
    if (!st && !(st = zt_data_open(r, &d, m.V, &train, &valid))) {
        st = zt_eval_dataset(&m, valid.n_examples ? &valid : &train, r, out);
        if (!st) st = loss_check(out, valid.n_examples ? "data.valid" : "data.train");
        zt_dataset_free(&train);
        zt_dataset_free(&valid);
    }
    zt_data_tools_close(&d);
    zt_llama_free(&m);
    int chat = r->data.format == ZT_DATA_CHAT || r->data.format == ZT_DATA_INSTRUCT;
    if (!st && r->eval.generate && chat)
        st = eval_accuracy(r, checkpoint_dir ? checkpoint_dir : r->model.path, adapter, out);
    return st;
}

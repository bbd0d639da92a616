/* data/formats: JSONL examples in the text, chat and instruct formats turned into
 * token ids and labels through the tokenizer and the chat template.
 *
 *   text      {"text": ...}: BOS (when the tokenizer adds one) + text + EOS, every
 *             token trained; longer than max_length: split into chunks (the packer
 *             does it when packing, this layer otherwise), nothing dropped. Special
 *             tokens written in it are their ids unless split_special.
 *   chat      {"messages": [{"role", "content"}]} or ShareGPT {"conversations":
 *             [{"from": human|gpt|system, "value"}]} (read as data/messages.h reads
 *             them: text parts, tool calls), with the line's "tools" and
 *             "chat_template_kwargs": rendered by the chat template;
 *             the template's loss spans (train_on) become the labels, each span
 *             tokenized on its own so its tokens are exactly the trained ones;
 *             too long: truncated and counted (the spans past the cut are not
 *             looked for, so a conversation costs about one render of it).
 *   instruct  {"instruction", "input", "output"}: a user turn (instruction, then the
 *             input after a blank line) and an assistant turn, as chat.
 *   preference {"prompt", "chosen", "rejected"}: two examples per line, chosen then
 *             rejected (pairs sit at 2i and 2i+1): the prompt untrained, the answer
 *             trained; strings are used as is (BOS + prompt + answer + EOS), message
 *             lists go through the chat template (the answer as the last assistant turn).
 *   unpaired  {"prompt", "completion", "label"} (TRL's unpaired preference, KTO's): one answer,
 *             desirable (label true) or not, tokenized as a preference side and stored as a
 *             pair: in the chosen place or the rejected one, the other a placeholder of one
 *             untrained token.
 *   prompt    {"prompt": text or messages}: the prompt alone (messages rendered with the
 *             generation prompt), nothing trained: what RL generation starts from.
 *
 *     zt_format f = {.format = ZT_DATA_CHAT, .train_on = ZT_TRAIN_ASSISTANT, .max_length = 2048,
 *                    .packing = 1, .tok = tok, .tmpl = tmpl, .ds = &ds};
 *     st = zt_format_load(&f, paths, npaths, skip_bad, &skipped);
 */
#ifndef ZT_DATA_FORMATS_H
#define ZT_DATA_FORMATS_H

#include <stdint.h>

#include "dataset.h"
#include "lib/data/template.h"
#include "tokenizers/tokenizer.h"

/* data.format; tokens (pre-tokenized ids, lib/data/tokens.h) is not read here */
typedef enum zt_data_format {
    ZT_DATA_TEXT,
    ZT_DATA_CHAT,
    ZT_DATA_INSTRUCT,
    ZT_DATA_PREFERENCE,
    ZT_DATA_PROMPT,
    ZT_DATA_COMPLETION,
    ZT_DATA_TOKENS,
    ZT_DATA_UNPAIRED,
} zt_data_format;
/* "text", "chat", "instruct", "preference", "prompt", "completion", "tokens", "unpaired": indexed by
 * zt_data_format */
extern const char *const zt_data_format_names[8];

/* The stored sequences a line of format f becomes (2: a pair, an unpaired answer stored as one with
 * its placeholder; else 1), and what a line is called in counts: "pairs", "answers", "examples". */
int zt_format_group(zt_data_format f);
const char *zt_format_unit(zt_data_format f);

enum { ZT_END_IDS = 4 }; /* the most ids that end a turn (zt_format_end_ids) */

typedef struct zt_format {
    zt_data_format format; /* not tokens */
    zt_train_on train_on;
    int max_length, packing;
    int split_special; /* special tokens written in text, prompts and answers are plain text */
    const zt_tokenizer *tok;
    const zt_template *tmpl; /* chat and instruct */
    zt_dataset *ds;          /* examples are appended here */
    int32_t end[ZT_END_IDS]; /* set by zt_format_load: zt_format_end_ids of tok and tmpl */
    /* counts */
    int64_t examples, truncated, no_targets;
} zt_format;

zt_status zt_format_load(zt_format *f, char *const *paths, int npaths, int skip_bad, int64_t *skipped);

/* The conversation of one chat or instruct line (o as zt_messages_normalize left it): *msgs (free
 * it) points into o and into *owned (free it too; NULL for chat). */
struct cJSON;
zt_status zt_format_messages(const struct cJSON *o, zt_data_format format, zt_message **msgs, int *n, char **owned);

/* What the chat template is given beside the messages: tok's BOS and EOS, and the line's "tools"
 * and "chat_template_kwargs" (data/messages.h; row NULL: none). */
zt_status zt_format_vars(const zt_tokenizer *tok, const struct cJSON *row, zt_template_vars *v);

/* The ids that end an assistant turn (ZT_END_IDS at most, -1 fills the rest): the tokenizer's EOS
 * and the special tokens (or whole-tag pieces, such as SentencePiece user-defined symbols) the
 * chat template writes right after an assistant message's content
 * (Gemma's <end_of_turn>, Llama 3's <|eot_id|>, ChatML's <|im_end|>; a template that ends turns
 * with </s> or writes no special token there leaves EOS alone). Found by rendering a short
 * conversation (two exchanges) and tokenizing the text each assistant span has after its content;
 * tmpl NULL, or a template that cannot render that conversation or place its contents
 * (a warning), gives EOS alone. The loss mask's end of turn, generation_config.json's added
 * eos_token_ids and zt generate's stop set all are this set. */
zt_status zt_format_end_ids(const zt_tokenizer *tok, const zt_template *tmpl, int32_t ids[ZT_END_IDS]);

/* The last assistant turn of msgs[0..n) (row: the line, for its tools and kwargs) as a generation
 * that answers the messages before it gives it back: the turn's trained span as tmpl renders the
 * whole conversation (its tool calls and any text the template puts around its content, such
 * as Qwen3's empty <think></think>), cut at its first token in stop[0..nstop) (ids < 0 unused)
 * and decoded without special tokens, as zt_generate_chat decodes. *out is malloc'ed. */
zt_status zt_format_answer(const zt_tokenizer *tok, const zt_template *tmpl, const zt_message *msgs, int n,
                           const struct cJSON *row, const int32_t *stop, int nstop, char **out);

#endif

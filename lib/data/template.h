/* data/template: chat templates, which turn a conversation into the text the
 * model is trained on, and the byte spans of that text that carry loss.
 *
 * A template is named (tokenizer.chat_template in the recipe):
 *   auto     the model's own: model_dir/chat_template.jinja when present, else
 *            the chat_template of model_dir/tokenizer_config.json (a string, or
 *            a list of {name, template} of which "default" is taken), else that of
 *            chat_template.json (an image-text model's processor's)
 *   chatml   <|im_start|>role\n...<|im_end|>\n as Qwen2 writes it, without a default system prompt
 *   llama2   Llama-2-chat's [INST] <<SYS>> format      llama3   Llama-3-Instruct's headers
 *   mistral  Mistral-7B-Instruct-v0.2's [INST] format  zephyr   HuggingFaceH4/zephyr-7b-beta's <|user|> format
 *   alpaca   the Stanford Alpaca prompt ("### Instruction:" / "### Response:"), one pair per turn
 *   a path ending in .jinja, read as is.
 * The named ones are Jinja sources kept in template.c that render the same
 * text as the models' published templates; all of them run in the Jinja
 * interpreter (jinja.h) with transformers' environment, so the text equals what
 * tokenizer.apply_chat_template(messages, tokenize=False) returns. Templates
 * write BOS themselves where the model wants it (bos_token), so the caller
 * tokenizes the text without adding special tokens.
 *
 * Loss spans are those of prefix rendering, so no template needs markers: for
 * each assistant message i, render messages[0..i) with the generation prompt
 * (P) and messages[0..i] without it (Q). Q must start with P, and the whole
 * conversation's text must start with Q; the assistant's span is then
 * [len(P), len(Q)): its content and whatever the template closes the turn
 * with (EOS, <|eot_id|>, <|im_end|>\n), so the model learns to stop.
 * A template that rewrites turns depending on what follows them fails that
 * check (Qwen3 and DeepSeek-R1 drop an earlier turn's reasoning, Phi-3.5 writes
 * EOS after the last turn only, Mistral-Nemo moves the system prompt into the
 * last user turn). The span of such a turn is its closing span: the assistant's
 * content where the whole text has it (placed by the sentinel rendering below,
 * stripped as the template strips it), then as much of the closing text as the
 * whole text has right after it, the closing text being what Q writes after the
 * content, which is how the template ends the turn when the conversation ends
 * there; a match that stops short of the whole closing text does not end inside
 * a tag it opens ('<' or '[' without its '>' or ']': Phi-3.5's "<|end|>\n" is
 * followed by "<|user|>" in the text and "<|endoftext|>" in Q), and it ends
 * after EOS (and the whitespace after it) when it holds EOS. Either way the
 * trained span is the assistant content plus what the template puts after it
 * up to and including its end-of-turn token (prefix
 * rendering also takes what the template writes between the generation prompt
 * and the content, such as an empty <think></think>). A turn whose content
 * the template changes beyond stripping it, or whose content is none, cannot
 * be placed so, nor can a turn with tool calls (its text is more than its
 * content). Such a turn's span, where the text starts with P and Q with P, is
 * the longest end of Q's rest (Q after P) that the text has right after P: the
 * turn as the template writes it when the conversation ends there, less the
 * start it drops when the conversation goes on (Qwen3's empty <think></think>).
 * When there is none either, that is an error naming the turn. Where a template ends the
 * last turn with another token than the others (gpt-oss: <|return|>, <|end|>),
 * the earlier turns' spans are their contents alone, which the data pipeline
 * refuses for lacking an end-of-turn token; the sentinel placement below is
 * not used for a conversation once one of its turns needed a closing span.
 *
 * Rendering every P and Q would cost O(N^2) bytes for N turns, so only the
 * first spans are found so (Q of the last message is the text itself): once
 * their renders pass half the text's length with 3 or more assistant turns
 * left, the conversation is rendered once more with each content replaced by a
 * sentinel (U+E000, the message's index, U+E001, with a vertical tab either
 * side: a tab gone tells that the template strips that side). The text must
 * equal that rendering with each sentinel replaced by its content, stripped
 * where a tab is gone; each cut (where a P or a Q ends) must lie in the
 * template's own text between the sentinels of the messages before it and
 * after it: its window. A cut lies at the offset in its window at which a cut
 * rendered already lay in a window alike: the same text, the same generation
 * prompt (or none), the same roles and none-contents from the message before
 * to the one after at the same distances from the cut, both at the text's
 * start or end or neither. The first cut of each kind of window (16 kinds at
 * most) is rendered, and so is the last cut but the text's end, as a check.
 * When anything of that fails (contents escaped or cut, written out of order,
 * a window over 16 messages, too many kinds, sentinel bytes in the template,
 * a role or a special token), the remaining spans come from prefix rendering
 * after all, with its errors. What this assumes, as the named and published
 * templates do: where a turn's text ends and the next one's begins depends on
 * the text and roles around it, not on how far into the conversation it is,
 * nor on contents in ways those renders do not show. A conversation then
 * costs about four renders of its text (the text, the first prefixes, the
 * sentinels, the check); a caller that needs only the first spans walks them
 * with zt_template_each_span and stops, which costs the prefixes up to them.
 * train_on (data.train_on): every assistant turn, the last one only, or the
 * whole text.
 *
 *     zt_template *t;
 *     if ((st = zt_template_load(&t, ZT_TEMPLATE_AUTO, NULL, "models/llama3"))) return st;
 *     zt_message msgs[] = {{"user", "Hi", NULL}, {"assistant", "Hello!", NULL}};
 *     char *text; zt_span *spans; int nspans;
 *     zt_template_vars v = {"<|begin_of_text|>", "<|eot_id|>", NULL};
 *     st = zt_template_spans(t, msgs, 2, &v, ZT_TRAIN_ASSISTANT, &spans, &nspans, &text);
 *     // text[spans[0].begin .. spans[0].end) == "Hello!<|eot_id|>"
 *     free(text); free(spans); zt_template_free(t);
 *
 * Errors are ZT_EUSER and name the template ("chat template 'mistral':12:13:
 * After the optional system message, conversation roles must alternate ...").
 * A loaded template is read-only: render from as many threads as you like.
 */
#ifndef ZT_DATA_TEMPLATE_H
#define ZT_DATA_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

typedef struct zt_template zt_template;

struct cJSON;

typedef struct zt_message {
    const char *role;         /* system | user | assistant | tool | ... */
    const char *content;      /* NULL renders as none */
    const struct cJSON *json; /* the object it was read from, or NULL: its members beside role and
                                 content (tool_calls, tool_call_id, name, reasoning_content...) go to
                                 the template as they are */
} zt_message;

/* What a render gives the template beside the messages, as apply_chat_template does: the
 * tokenizer's BOS and EOS (NULL: the variable is undefined), the tools the model may call (a
 * JSON list of function schemas; NULL: tools is none) and more variables (a JSON object, over
 * the template's own kwargs; NULL: none). */
typedef struct zt_template_vars {
    const char *bos, *eos;
    const struct cJSON *tools, *kwargs;
} zt_template_vars;

/* What carries loss (data.train_on). */
typedef enum zt_train_on { ZT_TRAIN_ASSISTANT, ZT_TRAIN_ALL, ZT_TRAIN_LAST } zt_train_on;
extern const char *const zt_train_on_names[3]; /* "assistant", "all", "last": indexed by zt_train_on */

typedef struct zt_span {
    size_t begin, end; /* bytes [begin, end) of the rendered text */
} zt_span;

/* Which template (tokenizer.chat_template): the model's own (auto), a named one, or a .jinja file. */
typedef enum zt_chat_template {
    ZT_TEMPLATE_AUTO,
    ZT_TEMPLATE_CHATML,
    ZT_TEMPLATE_LLAMA2,
    ZT_TEMPLATE_LLAMA3,
    ZT_TEMPLATE_MISTRAL,
    ZT_TEMPLATE_ZEPHYR,
    ZT_TEMPLATE_ALPACA,
    ZT_TEMPLATE_FILE, /* a path (tokenizer.chat_template_path) */
} zt_chat_template;
/* "auto", "chatml", ...: indexed by zt_chat_template (a file has no name) */
extern const char *const zt_chat_template_names[ZT_TEMPLATE_FILE];

/* The template of kind: auto takes the model's (chat_template.jinja, tokenizer_config.json or chat_template.json in
 * model_dir, needed for auto only), a named one its compiled-in source, ZT_TEMPLATE_FILE the
 * .jinja file `file` (else unused). */
zt_status zt_template_load(zt_template **t, zt_chat_template kind, const char *file, const char *model_dir);
/* The kind of a template named outside a recipe (zt generate --chat-template): auto, a name,
 * or a path ending in .jinja (ZT_TEMPLATE_FILE, the text is the path). */
zt_status zt_template_kind(const char *text, zt_chat_template *kind);
void zt_template_free(zt_template *t);

/* More variables for every render of t (tokenizer.chat_template_kwargs: enable_thinking...), a
 * JSON object's text; a render's own kwargs (zt_template_vars) go over them. Names a render
 * passes itself (messages, tools, bos_token...) are refused. Call it before rendering. */
zt_status zt_template_set_kwargs(zt_template *t, const char *json);

/* The Jinja source (to write into an exported tokenizer_config.json) and what it is called in messages. */
const char *zt_template_source(const zt_template *t);
const char *zt_template_name(const zt_template *t);
/* The bytes this template has rendered since it was loaded (all renders, all threads). */
uint64_t zt_template_rendered(const zt_template *t);
/* The source of a named template, or NULL. */
const char *zt_template_builtin(zt_chat_template kind);

/* Renders msgs[0..n) with v. *out is malloc'ed. */
zt_status zt_template_render(const zt_template *t, const zt_message *msgs, int n, int add_generation_prompt,
                             const zt_template_vars *v, char **out);

/* Renders the conversation into *text (*len bytes; free it; NULL on failure) as
 * zt_template_spans does and calls each(ctx, *text, span, &stop) for its spans in order
 * until one sets stop: the spans after it are never looked for, which saves the prefix
 * renders that would find them. An error of each ends the walk and is returned. */
typedef zt_status (*zt_span_fn)(void *ctx, const char *text, zt_span span, int *stop);
zt_status zt_template_each_span(const zt_template *t, const zt_message *msgs, int n, const zt_template_vars *v,
                                zt_train_on train_on, zt_span_fn each, void *ctx, char **text, size_t *len);

/* Renders the whole conversation into *text and finds the spans that carry loss
 * (in order, not overlapping, not empty); free(*text), free(*spans). */
zt_status zt_template_spans(const zt_template *t, const zt_message *msgs, int n, const zt_template_vars *v,
                            zt_train_on train_on, zt_span **spans, int *nspans, char **text);

#endif

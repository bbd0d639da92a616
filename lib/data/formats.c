#include "formats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl.h"
#include "messages.h"
#include "lib/core/log.h"

enum { IGNORE = -100, LINES_PER_BATCH = 8192 };

/* one example being built: its tokens, and what happened to it */
typedef struct seq {
    int32_t *ids, *labels;
    size_t n, cap;
    int split;      /* text: may be cut into max_length pieces */
    int truncated;  /* chat: cut to max_length */
    int no_targets; /* chat: nothing left to train on (left out) */
    int placeholder; /* unpaired: the missing side of a pair, one untrained token, not counted */
} seq;

static zt_status seq_push(seq *s, const int32_t *ids, size_t n, int trained)
{
    if (s->n + n > s->cap) {
        size_t cap = (s->n + n) * 2;
        int32_t *a = realloc(s->ids, cap * sizeof *a);
        if (a) s->ids = a;
        int32_t *b = a ? realloc(s->labels, cap * sizeof *b) : NULL;
        if (!b) return zt_fail(ZT_ENOMEM, "out of memory");
        s->labels = b, s->cap = cap;
    }
    for (size_t i = 0; i < n; i++) {
        s->ids[s->n + i] = ids[i];
        s->labels[s->n + i] = trained ? ids[i] : IGNORE;
    }
    s->n += n;
    return ZT_OK;
}

static zt_status seq_push_text(seq *s, const zt_tokenizer *tok, const char *text, size_t len, int parse_special,
                               int trained)
{
    int32_t *ids;
    size_t n;
    zt_status st = zt_tokenizer_encode(tok, text, len, parse_special, &ids, &n);
    if (st) return st;
    st = seq_push(s, ids, n, trained);
    free(ids);
    return st;
}

zt_status zt_format_vars(const zt_tokenizer *tok, const cJSON *row, zt_template_vars *v)
{
    int32_t bos = zt_tokenizer_bos_id(tok), eos = zt_tokenizer_eos_id(tok);
    *v = (zt_template_vars){bos >= 0 ? zt_tokenizer_id_to_piece(tok, bos) : NULL,
                            eos >= 0 ? zt_tokenizer_id_to_piece(tok, eos) : NULL, NULL, NULL};
    return zt_messages_extras(row, &v->tools, &v->kwargs);
}

static void add_end_id(int32_t ids[ZT_END_IDS], int32_t id)
{
    for (int k = 0; k < ZT_END_IDS; k++) {
        if (ids[k] == id) return;
        if (ids[k] < 0) {
            ids[k] = id;
            return;
        }
    }
}

/* The last place of needle in text[begin, end), or NULL */
static const char *last_in(const char *text, size_t begin, size_t end, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t k = end; k >= begin + n; k--)
        if (!memcmp(text + k - n, needle, n)) return text + k - n;
    return NULL;
}

/* EOS, a special token, or a vocabulary piece that is a whole tag ("<|im_end|>" as a SentencePiece
 * user-defined symbol, which is no added token): text that is markup, not words. */
static int is_marker(const zt_tokenizer *tok, int32_t id)
{
    const char *p = zt_tokenizer_id_to_piece(tok, id);
    size_t n = p ? strlen(p) : 0;
    int tag = n >= 3 && ((p[0] == '<' && p[n - 1] == '>') || (p[0] == '[' && p[n - 1] == ']'));
    return id == zt_tokenizer_eos_id(tok) || zt_tokenizer_is_special(tok, id) || tag;
}

/* Adds the markers (is_marker) of what the template writes after an assistant content: the
 * text from a span's last copy of the content it holds to the span's end. */
static zt_status add_closing_ids(const zt_tokenizer *tok, const char *text, const zt_span *spans, int nspans,
                                 const char *const contents[2], int32_t ids[ZT_END_IDS])
{
    zt_status st = ZT_OK;
    for (int i = 0; i < nspans && !st; i++) {
        int c = 0;
        const char *content = NULL;
        while (c < 2 && !(content = last_in(text, spans[i].begin, spans[i].end, contents[c]))) c++;
        if (!content) continue; /* the template rewrote it: the span does not tell where the turn ends */
        const char *closing = content + strlen(contents[c]);
        int32_t *tokens;
        size_t n;
        if ((st = zt_tokenizer_encode(tok, closing, (size_t)(text + spans[i].end - closing), 1, &tokens, &n))) break;
        for (size_t k = 0; k < n; k++)
            if (is_marker(tok, tokens[k])) add_end_id(ids, tokens[k]);
        free(tokens);
    }
    return st;
}

static int is_stop(const int32_t *stop, int nstop, int32_t id)
{
    for (int i = 0; i < nstop; i++)
        if (stop[i] >= 0 && stop[i] == id) return 1;
    return 0;
}

zt_status zt_format_answer(const zt_tokenizer *tok, const zt_template *tmpl, const zt_message *msgs, int n,
                           const cJSON *row, const int32_t *stop, int nstop, char **out)
{
    *out = NULL;
    zt_template_vars v;
    char *text = NULL;
    zt_span *spans = NULL;
    int nspans = 0;
    int32_t *ids = NULL;
    size_t k = 0, cut = 0;
    zt_status st = zt_format_vars(tok, row, &v);
    if (!st) st = zt_template_spans(tmpl, msgs, n, &v, ZT_TRAIN_LAST, &spans, &nspans, &text);
    if (!st && !nspans) st = zt_fail(ZT_EUSER, "the chat template renders no trained span for the last assistant turn");
    if (!st) {
        zt_span last = spans[nspans - 1];
        st = zt_tokenizer_encode(tok, text + last.begin, last.end - last.begin, 1, &ids, &k);
    }
    while (!st && cut < k && !is_stop(stop, nstop, ids[cut])) cut++;
    if (!st) st = zt_tokenizer_decode(tok, ids, cut, 1, out);
    free(ids);
    free(spans);
    free(text);
    return st;
}

zt_status zt_format_end_ids(const zt_tokenizer *tok, const zt_template *tmpl, int32_t ids[ZT_END_IDS])
{
    /* two exchanges, so that a template that ends the last turn unlike the others shows both */
    static const char *const contents[] = {"Hello there.", "Goodbye now."};
    static const zt_message probe[] = {{"user", "Hi", NULL},
                                       {"assistant", "Hello there.", NULL},
                                       {"user", "Bye", NULL},
                                       {"assistant", "Goodbye now.", NULL}};
    for (int k = 0; k < ZT_END_IDS; k++) ids[k] = -1;
    int32_t eos = zt_tokenizer_eos_id(tok);
    if (eos >= 0) add_end_id(ids, eos);
    if (!tmpl) return ZT_OK;
    zt_template_vars v;
    zt_format_vars(tok, NULL, &v); /* no row: nothing to refuse */
    char *text;
    zt_span *spans;
    int nspans;
    zt_status st = zt_template_spans(tmpl, probe, 4, &v, ZT_TRAIN_ASSISTANT, &spans, &nspans, &text);
    /* EOS alone, quietly: a conversation the template refuses fails with its own one-line error
     * where it is rendered, and a trained turn that then lacks its end is refused by name */
    if (st == ZT_EUSER) {
        zt_log_debug("turns end at EOS alone: the chat template cannot show how it ends one (%s)", zt_errmsg());
        return ZT_OK;
    }
    if (st) return st;
    st = add_closing_ids(tok, text, spans, nspans, contents, ids);
    free(spans);
    free(text);
    return st;
}

/* appends the example (text split into max_length pieces when not packing) and counts it */
static zt_status emit(zt_format *f, const seq *s)
{
    if (s->placeholder) return s->no_targets ? ZT_OK : zt_dataset_append(f->ds, s->ids, s->labels, 1);
    f->examples++;
    f->truncated += s->truncated;
    f->no_targets += s->no_targets;
    if (s->no_targets) return ZT_OK; /* counted and reported; fatal only if every example is like this */
    size_t piece = s->split && !f->packing ? (size_t)f->max_length : s->n;
    zt_status st = ZT_OK;
    for (size_t at = 0; at < s->n && !st; at += piece) {
        size_t n = s->n - at < piece ? s->n - at : piece;
        st = zt_dataset_append(f->ds, s->ids + at, s->labels + at, (int64_t)n);
    }
    return st;
}

/* A text's end, trained: what the tokenizer's template puts after a text, else EOS (a text
 * always ends in one, so that the model learns to stop) */
static zt_status push_end(const zt_format *f, seq *s)
{
    const int32_t *after;
    size_t n = zt_tokenizer_template(f->tok, 1, &after);
    int32_t eos = zt_tokenizer_eos_id(f->tok);
    return n ? seq_push(s, after, n, 1) : eos >= 0 ? seq_push(s, &eos, 1, 1) : ZT_OK;
}

static zt_status text_example(const zt_format *f, const cJSON *o, seq *s)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "text");
    if (!cJSON_IsString(t)) return zt_fail(ZT_EUSER, "\"text\" is %s, not a string", zt_json_kind(t));
    const int32_t *before;
    size_t n = zt_tokenizer_template(f->tok, 0, &before);
    zt_status st = seq_push(s, before, n, 1);
    if (!st) st = seq_push_text(s, f->tok, t->valuestring, strlen(t->valuestring), !f->split_special, 1);
    if (!st) st = push_end(f, s);
    if (!st && s->n < 2) return zt_fail(ZT_EUSER, "\"text\" gives no tokens to train on");
    s->split = 1;
    return st;
}

/* messages from "messages" (ShareGPT's "conversations" made so by zt_messages_normalize) */
static zt_status read_messages(const cJSON *o, zt_message **out, int *n)
{
    return zt_messages_read(cJSON_GetObjectItemCaseSensitive(o, "messages"), out, n);
}

static int has_end_id(const int32_t *ids, size_t n, const int32_t end[ZT_END_IDS])
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < ZT_END_IDS; k++)
            if (end[k] >= 0 && ids[i] == end[k]) return 1;
    return 0;
}

/* Tokenizing a conversation span by span: the text before each span untrained, the span trained. */
typedef struct spans_ctx {
    const zt_format *f;
    zt_train_on train_on;
    size_t at; /* the text before this byte is tokenized */
    int32_t end[ZT_END_IDS];
    seq *s;
} spans_ctx;

static zt_status push_span(void *ctx, const char *text, zt_span span, int *stop)
{
    spans_ctx *c = ctx;
    seq *s = c->s;
    zt_status st = span.begin > c->at ? seq_push_text(s, c->f->tok, text + c->at, span.begin - c->at, 1, 0) : ZT_OK;
    size_t before = s->n;
    if (!st) st = seq_push_text(s, c->f->tok, text + span.begin, span.end - span.begin, 1, 1);
    /* the model must learn to stop: each trained turn ends with an end-of-turn token */
    if (!st && c->train_on != ZT_TRAIN_ALL && !has_end_id(s->ids + before, s->n - before, c->end))
        st = zt_fail(ZT_EUSER, "an assistant turn's trained tokens do not include EOS or an end-of-turn token "
                               "(the chat template does not end turns with one the tokenizer knows)");
    c->at = span.end;
    /* Later pushes only append, so once past max_length the kept tokens are final: the later
     * spans are not looked for (each costs a render of the conversation up to it). */
    *stop = s->n > (size_t)c->f->max_length;
    return st;
}

static zt_status conversation(const zt_format *f, const zt_message *msgs, int n, const cJSON *row, zt_train_on train_on,
                              seq *s)
{
    zt_template_vars v;
    zt_status st = zt_format_vars(f->tok, row, &v);
    if (st) return st;
    char *text;
    size_t len;
    spans_ctx c = {.f = f, .train_on = train_on, .s = s};
    memcpy(c.end, f->end, sizeof c.end);
    st = zt_template_each_span(f->tmpl, msgs, n, &v, train_on, push_span, &c, &text, &len);
    if (st) return st;
    len = strlen(text); /* the text after the last span, up to its first NUL if it has one */
    if (s->n <= (size_t)f->max_length && len > c.at) st = seq_push_text(s, f->tok, text + c.at, len - c.at, 1, 0);
    free(text);
    if (st) return st;
    if (s->n > (size_t)f->max_length) {
        s->n = (size_t)f->max_length;
        s->truncated = 1;
    }
    size_t trained = 0;
    for (size_t i = 1; i < s->n; i++) trained += s->labels[i] != IGNORE; /* the first token is never a target */
    s->no_targets = !trained;
    return ZT_OK;
}

/* instruct fields as a user and an assistant message; the user text is malloc'd into *user */
static zt_status instruct_messages(const cJSON *o, zt_message **out, int *n, char **user_out)
{
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(o, "instruction"),
                *in = cJSON_GetObjectItemCaseSensitive(o, "input"),
                *ans = cJSON_GetObjectItemCaseSensitive(o, "output");
    if (!cJSON_IsString(ins)) return zt_fail(ZT_EUSER, "\"instruction\" is %s, not a string", zt_json_kind(ins));
    if (!cJSON_IsString(ans)) return zt_fail(ZT_EUSER, "\"output\" is %s, not a string", zt_json_kind(ans));
    if (in && !cJSON_IsString(in) && !cJSON_IsNull(in))
        return zt_fail(ZT_EUSER, "\"input\" is %s, not a string", zt_json_kind(in));
    const char *input = cJSON_IsString(in) ? in->valuestring : "";
    size_t len = strlen(ins->valuestring) + strlen(input) + 3;
    char *user = malloc(len);
    zt_message *m = calloc(2, sizeof *m);
    if (!user || !m) {
        free(user);
        free(m);
        return zt_fail(ZT_ENOMEM, "out of memory");
    }
    snprintf(user, len, "%s%s%s", ins->valuestring, input[0] ? "\n\n" : "", input);
    m[0] = (zt_message){"user", user, NULL};
    m[1] = (zt_message){"assistant", ans->valuestring, NULL};
    *out = m, *n = 2, *user_out = user;
    return ZT_OK;
}

zt_status zt_format_messages(const cJSON *o, zt_data_format format, zt_message **msgs, int *n, char **owned)
{
    *owned = NULL;
    return format == ZT_DATA_INSTRUCT ? instruct_messages(o, msgs, n, owned) : read_messages(o, msgs, n);
}

static zt_status chat_example(const zt_format *f, const cJSON *o, seq *s)
{
    zt_message *m = NULL;
    int n = 0;
    char *owned;
    zt_status st = zt_format_messages(o, f->format, &m, &n, &owned);
    if (st) return st;
    st = conversation(f, m, n, o, f->train_on, s);
    free(m);
    free(owned);
    return st;
}

/* a string prompt: what the tokenizer puts before a text (BOS) and its tokens, none trained */
static zt_status text_prompt(const zt_format *f, const char *prompt, seq *s)
{
    const int32_t *before;
    size_t n = zt_tokenizer_template(f->tok, 0, &before);
    zt_status st = seq_push(s, before, n, 0);
    return st ? st : seq_push_text(s, f->tok, prompt, strlen(prompt), !f->split_special, 0);
}

/* One side of a preference pair: the prompt untrained, the answer trained (with EOS / end of turn). */
static zt_status preference_side(const zt_format *f, const cJSON *row, const cJSON *prompt, const cJSON *answer,
                                 const char *name, seq *s)
{
    if (cJSON_IsString(prompt)) {
        if (!cJSON_IsString(answer)) return zt_fail(ZT_EUSER, "\"%s\" must be a string like \"prompt\"", name);
        zt_status st = text_prompt(f, prompt->valuestring, s);
        if (!st) st = seq_push_text(s, f->tok, answer->valuestring, strlen(answer->valuestring), !f->split_special, 1);
        if (!st) st = push_end(f, s);
        if (!st && s->n > (size_t)f->max_length) s->n = (size_t)f->max_length, s->truncated = 1;
        return st;
    }
    zt_message *pm, *am = NULL;
    int pn, an = 1;
    zt_status st = zt_messages_read(prompt, &pm, &pn);
    if (st) return st;
    zt_message one = {"assistant", cJSON_IsString(answer) ? answer->valuestring : "", NULL};
    if (!cJSON_IsString(answer)) st = zt_messages_read(answer, &am, &an); /* the answer as a list of messages */
    zt_message *all = st ? NULL : calloc((size_t)(pn + an), sizeof *all);
    if (!st && !all) st = zt_fail(ZT_ENOMEM, "out of memory");
    if (!st) {
        memcpy(all, pm, (size_t)pn * sizeof *all);
        memcpy(all + pn, am ? am : &one, (size_t)an * sizeof *all);
        st = conversation(f, all, pn + an, row, ZT_TRAIN_LAST, s);
    }
    free(all);
    free(pm);
    free(am);
    return st;
}

/* The prompt that "chosen" and "rejected" share when a pair has none of its own (or a string
 * beside conversations), as TRL's extract_prompt finds it: their common start (whole messages,
 * or characters backed off a space) is the prompt, the rest of each is its answer. Where one is
 * a start of the other, the prompt stops before the shorter one's last character or message. */
static zt_status implicit_prompt(const cJSON *c, const cJSON *r, cJSON **prompt, cJSON **chosen, cJSON **rejected)
{
    *prompt = *chosen = *rejected = NULL;
    int conversations = cJSON_IsArray(c) && cJSON_IsArray(r);
    if (!conversations && !(cJSON_IsString(c) && cJSON_IsString(r)))
        return zt_fail(ZT_EUSER, "\"chosen\" and \"rejected\" must both be strings or both message lists when the "
                                 "prompt is taken from them (no \"prompt\")");
    if (conversations) {
        int n = cJSON_GetArraySize(c) < cJSON_GetArraySize(r) ? cJSON_GetArraySize(c) : cJSON_GetArraySize(r), i = 0;
        while (i < n - 1 && cJSON_Compare(cJSON_GetArrayItem(c, i), cJSON_GetArrayItem(r, i), 1)) i++;
        if (i == 0)
            return zt_fail(ZT_EUSER, "\"chosen\" and \"rejected\" share no first message to take as the prompt");
        *prompt = cJSON_CreateArray(), *chosen = cJSON_CreateArray(), *rejected = cJSON_CreateArray();
        int ok = *prompt && *chosen && *rejected;
        for (int k = 0; k < cJSON_GetArraySize(c) && ok; k++)
            ok = cJSON_AddItemReferenceToArray(k < i ? *prompt : *chosen, cJSON_GetArrayItem(c, k));
        for (int k = i; k < cJSON_GetArraySize(r) && ok; k++)
            ok = cJSON_AddItemReferenceToArray(*rejected, cJSON_GetArrayItem(r, k));
        return ok ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory");
    }
    const char *a = c->valuestring, *b = r->valuestring;
    size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb, i = 0;
    if (n == 0)
        return zt_fail(ZT_EUSER, "\"chosen\" and \"rejected\" must not be empty when the prompt is taken from them");
    while (i < n && a[i] == b[i]) i++;
    int differ = i < n;
    if (!differ) i = n - 1;                                    /* the shorter one's last character, */
    while (i > 0 && ((unsigned char)a[i] & 0xC0) == 0x80) i--; /* from its first byte */
    if (differ && i > 0 && a[i - 1] == ' ') i--;
    char *text = malloc(i + 1);
    if (text) {
        memcpy(text, a, i);
        text[i] = 0;
        *prompt = cJSON_CreateString(text);
        free(text);
    }
    *chosen = cJSON_CreateString(a + i);
    *rejected = cJSON_CreateString(b + i);
    if (!*prompt || !*chosen || !*rejected) return zt_fail(ZT_ENOMEM, "out of memory");
    return ZT_OK;
}

static zt_status preference_example(const zt_format *f, const cJSON *o, seq *chosen, seq *rejected)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt"), *c = cJSON_GetObjectItemCaseSensitive(o, "chosen"),
                *r = cJSON_GetObjectItemCaseSensitive(o, "rejected");
    if (!c || !r) return zt_fail(ZT_EUSER, "needs \"chosen\" and \"rejected\"");
    cJSON *ip = NULL, *ic = NULL, *ir = NULL;
    zt_status st = ZT_OK;
    if (!p || (cJSON_IsString(p) && cJSON_IsArray(c))) {
        if (!(st = implicit_prompt(c, r, &ip, &ic, &ir))) p = ip, c = ic, r = ir;
    } else if (!cJSON_IsString(p) && !cJSON_IsArray(p))
        st = zt_fail(ZT_EUSER, "\"prompt\" is %s, not a string or a list of messages", zt_json_kind(p));
    if (!st && cJSON_IsArray(p) && !f->tmpl) st = zt_fail(ZT_EUSER, "a prompt of messages needs a chat template");
    if (!st) st = preference_side(f, o, p, c, "chosen", chosen);
    if (!st) st = preference_side(f, o, p, r, "rejected", rejected);
    cJSON_Delete(ip);
    cJSON_Delete(ic);
    cJSON_Delete(ir);
    return st;
}

/* TRL's unpaired preference data: a completion of a prompt, desirable or not, tokenized as a side
 * of a preference pair and stored as one: in the chosen place when "label" is true, in the
 * rejected place otherwise, the other place a placeholder (one untrained token). */
static zt_status unpaired_example(const zt_format *f, const cJSON *o, seq s[2])
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt"),
                *c = cJSON_GetObjectItemCaseSensitive(o, "completion"),
                *label = cJSON_GetObjectItemCaseSensitive(o, "label");
    if (!p || !c || !label) return zt_fail(ZT_EUSER, "needs \"prompt\", \"completion\" and \"label\"");
    if (!cJSON_IsBool(label)) return zt_fail(ZT_EUSER, "\"label\" is %s, not true or false", zt_json_kind(label));
    if (!cJSON_IsString(p) && !cJSON_IsArray(p))
        return zt_fail(ZT_EUSER, "\"prompt\" is %s, not a string or a list of messages", zt_json_kind(p));
    if (cJSON_IsArray(p) && !f->tmpl) return zt_fail(ZT_EUSER, "a prompt of messages needs a chat template");
    seq *real = &s[cJSON_IsTrue(label) ? 0 : 1], *none = &s[cJSON_IsTrue(label) ? 1 : 0];
    zt_status st = preference_side(f, o, p, c, "completion", real);
    if (!st && real->n) st = seq_push(none, real->ids, 1, 0), none->placeholder = 1;
    return st;
}

/* The tokens of a message list rendered by the template with the row's tools (special tokens as
 * their ids, as transformers' apply_chat_template tokenizes), appended to s. */
static zt_status rendered(const zt_format *f, const cJSON *o, const cJSON *const lists[2], int add_generation_prompt,
                          int trained, seq *s)
{
    zt_message *part[2] = {NULL, NULL}, *all = NULL;
    int n[2] = {0, 0};
    zt_template_vars v;
    zt_status st = zt_format_vars(f->tok, o, &v);
    for (int k = 0; k < 2 && lists[k] && !st; k++) st = zt_messages_read(lists[k], &part[k], &n[k]);
    if (!st && !(all = calloc((size_t)(n[0] + n[1]), sizeof *all))) st = zt_fail(ZT_ENOMEM, "out of memory");
    char *text = NULL;
    if (!st) {
        memcpy(all, part[0], (size_t)n[0] * sizeof *all);
        if (n[1]) memcpy(all + n[0], part[1], (size_t)n[1] * sizeof *all);
        st = zt_template_render(f->tmpl, all, n[0] + n[1], add_generation_prompt, &v, &text);
    }
    if (!st) st = seq_push_text(s, f->tok, text, strlen(text), 1, trained);
    free(text);
    free(all);
    free(part[0]);
    free(part[1]);
    return st;
}

static zt_status prompt_example(const zt_format *f, const cJSON *o, seq *s)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    if (cJSON_IsString(p)) return text_prompt(f, p->valuestring, s);
    if (!cJSON_IsArray(p))
        return zt_fail(ZT_EUSER, "\"prompt\" is %s, not a string or a list of messages", zt_json_kind(p));
    if (!f->tmpl) return zt_fail(ZT_EUSER, "a prompt of messages needs a chat template");
    const cJSON *prompt[2] = {p, NULL};
    return rendered(f, o, prompt, 1, 0, s);
}

/* A text as the tokenizer encodes it with its special tokens (what its template puts before and
 * after), then EOS when eos_after and the text does not already end with it. */
static zt_status encoded(const zt_format *f, const char *text, int eos_after, seq *s)
{
    const int32_t *around;
    size_t n = zt_tokenizer_template(f->tok, 0, &around);
    zt_status st = seq_push(s, around, n, 1);
    if (!st) st = seq_push_text(s, f->tok, text, strlen(text), !f->split_special, 1);
    int32_t eos = zt_tokenizer_eos_id(f->tok);
    if (!st && eos_after && eos >= 0 && (s->n == 0 || s->ids[s->n - 1] != eos)) st = seq_push(s, &eos, 1, 1);
    n = zt_tokenizer_template(f->tok, 1, &around);
    return st ? st : seq_push(s, around, n, 1);
}

/* TRL's prompt-completion data, as its SFT trainer tokenizes it: the prompt alone (a text as the
 * tokenizer encodes it; messages rendered with the generation prompt) and the whole (the text of
 * prompt and completion, then EOS; the messages of both rendered), the whole's tokens after the
 * longest start it shares with the prompt's trained. */
static zt_status completion_example(const zt_format *f, const cJSON *o, seq *s)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt"),
                *c = cJSON_GetObjectItemCaseSensitive(o, "completion");
    int messages = cJSON_IsArray(p) && cJSON_IsArray(c);
    if (!messages && !(cJSON_IsString(p) && cJSON_IsString(c)))
        return zt_fail(ZT_EUSER,
                       "\"prompt\" and \"completion\" must both be strings or both message lists (they are "
                       "%s and %s)",
                       zt_json_kind(p), zt_json_kind(c));
    if (messages && !f->tmpl) return zt_fail(ZT_EUSER, "a prompt of messages needs a chat template");
    seq alone = {0};
    zt_status st;
    if (messages) {
        const cJSON *prompt[2] = {p, NULL}, *both[2] = {p, c};
        st = rendered(f, o, prompt, 1, 1, &alone);
        if (!st) st = rendered(f, o, both, 0, 1, s);
    } else {
        size_t lp = strlen(p->valuestring), lc = strlen(c->valuestring);
        char *whole = malloc(lp + lc + 1);
        st = whole ? encoded(f, p->valuestring, 0, &alone) : zt_fail(ZT_ENOMEM, "out of memory");
        if (!st) {
            memcpy(whole, p->valuestring, lp);
            memcpy(whole + lp, c->valuestring, lc + 1);
            st = encoded(f, whole, 1, s);
        }
        free(whole);
    }
    size_t k = 0;
    while (!st && k < alone.n && k < s->n && alone.ids[k] == s->ids[k]) k++;
    free(alone.ids);
    free(alone.labels);
    if (st) return st;
    for (size_t i = 0; i < k; i++) s->labels[i] = IGNORE;
    if (s->n > (size_t)f->max_length) s->n = (size_t)f->max_length, s->truncated = 1;
    s->no_targets = s->n <= k || (k == 0 && s->n < 2); /* the first token is never a target */
    return ZT_OK;
}

/* one line to its example (two for a preference pair), or a ZT_EUSER message; runs on many threads at once */
static zt_status example(const zt_format *f, const cJSON *o, seq s[2])
{
    switch (f->format) {
    case ZT_DATA_TEXT: return text_example(f, o, &s[0]);
    case ZT_DATA_PREFERENCE: return preference_example(f, o, &s[0], &s[1]);
    case ZT_DATA_UNPAIRED: return unpaired_example(f, o, s);
    case ZT_DATA_PROMPT: return prompt_example(f, o, &s[0]);
    case ZT_DATA_COMPLETION: return completion_example(f, o, &s[0]);
    default: return chat_example(f, o, &s[0]);
    }
}

static zt_status convert(const zt_format *f, const char *text, size_t len, seq s[2])
{
    cJSON *o;
    zt_status st = zt_jsonl_parse(text, len, &o);
    if (st) return st;
    if (!(st = zt_messages_normalize(o))) st = example(f, o, s);
    cJSON_Delete(o);
    return st;
}

/* Tokenizes a batch of lines on all threads, then appends the results in file order:
 * the data set, and the first error, are those of a sequential pass. */
static zt_status load_batch(zt_format *f, const zt_jsonl_lines *l, int skip_bad, int64_t *skipped)
{
    seq *out = calloc(2 * (size_t)l->n, sizeof *out); /* two per line: a preference pair */
    zt_status *res = calloc((size_t)l->n, sizeof *res);
    char **msg = calloc((size_t)l->n, sizeof *msg);
    zt_status st =
        out && res && msg ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory tokenizing %lld lines", (long long)l->n);
    if (!st) {
#pragma omp parallel for schedule(dynamic, 16)
        for (int64_t i = 0; i < l->n; i++)
            if ((res[i] = convert(f, l->text[i], l->len[i], &out[2 * i]))) msg[i] = strdup(zt_errmsg());
    }
    for (int64_t i = 0; !st && i < l->n; i++) {
        if (res[i]) {
            st = zt_fail(res[i], "%s:%ld: %s", l->paths[l->file[i]], l->lineno[i], msg[i] ? msg[i] : "out of memory");
            st = zt_jsonl_skip(st, skip_bad, skipped);
            continue;
        }
        seq *pair = &out[2 * i];
        if (pair[1].n && (pair[0].no_targets || pair[1].no_targets)) /* a pair stays whole or goes */
            pair[0].no_targets = pair[1].no_targets = 1;
        st = emit(f, &pair[0]);
        if (!st && pair[1].n) st = emit(f, &pair[1]);
    }
    for (int64_t i = 0; out && i < 2 * l->n; i++) free(out[i].ids), free(out[i].labels);
    for (int64_t i = 0; msg && i < l->n; i++) free(msg[i]);
    free(out);
    free(res);
    free(msg);
    return st;
}

const char *const zt_data_format_names[8] = {"text",   "chat",       "instruct", "preference",
                                             "prompt", "completion", "tokens",   "unpaired"};

int zt_format_group(zt_data_format f) { return f == ZT_DATA_PREFERENCE || f == ZT_DATA_UNPAIRED ? 2 : 1; }

const char *zt_format_unit(zt_data_format f)
{
    return f == ZT_DATA_PREFERENCE ? "pairs" : f == ZT_DATA_UNPAIRED ? "answers" : "examples";
}

zt_status zt_format_load(zt_format *f, char *const *paths, int npaths, int skip_bad, int64_t *skipped)
{
    const char *format = zt_data_format_names[f->format];
    if (f->format == ZT_DATA_TOKENS)
        return zt_fail(ZT_EUSER,
                       "data.format '%s' is not text, chat, instruct, preference, unpaired, prompt or completion",
                       format);
    if ((f->format == ZT_DATA_CHAT || f->format == ZT_DATA_INSTRUCT) && !f->tmpl)
        return zt_fail(ZT_EUSER, "data.format '%s' needs a chat template", format);
    zt_jsonl_lines l;
    *skipped = 0;
    /* the prompt format trains nothing, so no turn's end */
    zt_status st = f->tmpl && f->format != ZT_DATA_PROMPT ? zt_format_end_ids(f->tok, f->tmpl, f->end) : ZT_OK;
    if (st) return st;
    st = zt_jsonl_open(&l, paths, npaths);
    while (!st && !(st = zt_jsonl_next(&l, LINES_PER_BATCH)) && l.n > 0) st = load_batch(f, &l, skip_bad, skipped);
    zt_jsonl_close(&l);
    if (!st && f->ds->n_examples == 0)
        st = f->no_targets ? zt_fail(ZT_EUSER, "none of the %lld examples has a token to train on (data.train_on = %s)",
                                     (long long)f->no_targets, zt_train_on_names[f->train_on])
                           : zt_jsonl_no_examples(paths, npaths, *skipped);
    return st;
}

/* target_modules written as one regular expression (lora.h: zt_lora_pattern_targets). PEFT takes
 * a string other than "all-linear" as a pattern that a module's whole name must match
 * (re.fullmatch), the name as the transformers model calls it ("model.layers.3.mlp.down_proj",
 * in an image-text model "language_model.model.layers.3.mlp.down_proj"); Unsloth saves its
 * adapters that way, and zt those of an image-text model. PCRE2 reads Python's syntax for what such patterns use. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <string.h>

#include "lora.h"

/* A pattern and what matching it needs. A pattern that backtracks without end ((a+)+b) meets
 * PCRE2's match limit, set low here: names are short, so a real pattern never comes near it. */
typedef struct matcher {
    pcre2_code *code;
    pcre2_match_data *md;
    pcre2_match_context *mc;
    int too_complex;
} matcher;

static int full_match(matcher *x, const char *name)
{
    int rc = pcre2_match(x->code, (PCRE2_SPTR)name, strlen(name), 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, x->md, x->mc);
    x->too_complex |= rc < 0 && rc != PCRE2_ERROR_NOMATCH;
    return rc >= 0;
}

/* The modules of layer l of a model of config c whose names (past top: "", or an image-text
 * checkpoint's text_prefix) the pattern matches; a module with an adapter per expert
 * where it matches every expert's; *some: where it matches some alone */
static unsigned layer_matches(matcher *x, const zt_llama_config *c, const char *top, int l, int *some)
{
    unsigned mods = 0;
    char name[128];
    int k = snprintf(name, sizeof name, "%smodel.", top);
    for (int mod = 0; mod < ZT_LORA_NMODULES; mod++) {
        int experts = zt_lora_per_expert(c, mod) ? c->n_experts : 1, matched = 0;
        for (int e = 0; e < experts; e++) {
            zt_lora_model_path(c, name + k, sizeof name - (size_t)k, l, e, mod);
            matched += full_match(x, name);
        }
        if (matched == experts) mods |= 1u << mod;
        else if (matched) *some = 1;
    }
    return mods;
}

zt_status zt_lora_pattern_targets(const char *where, const char *pattern, const zt_llama_config *c, int layers,
                                  unsigned *targets)
{
    int err;
    PCRE2_SIZE at;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &err, &at, NULL);
    if (!code) {
        PCRE2_UCHAR why[160];
        pcre2_get_error_message(err, why, sizeof why);
        return zt_fail(ZT_EUSER, "%s: target_modules '%.200s' is not a regular expression: %s at offset %zu", where,
                       pattern, (const char *)why, (size_t)at);
    }
    matcher x = {code, pcre2_match_data_create_from_pattern(code, NULL), pcre2_match_context_create(NULL), 0};
    zt_status st = x.md && x.mc ? ZT_OK : zt_fail(ZT_ENOMEM, "out of memory matching target_modules");
    if (!st) pcre2_set_match_limit(x.mc, 100000);
    /* read without a model (c NULL): the pattern may name either checkpoint's modules */
    const char *top = c ? c->text_prefix : "";
    int some = 0;
    *targets = st ? 0 : layer_matches(&x, c, top, 0, &some);
    if (!st && !c && !*targets) top = "language_model.", *targets = layer_matches(&x, c, top, 0, &some);
    static const char *const whole[] = {"lm_head", "model.embed_tokens"};
    for (int i = 0; i < 2 && !st; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", top, whole[i]);
        if (full_match(&x, name))
            st = zt_fail(ZT_EUSER, "%s: target_modules '%.200s' matches %s: adapters on it are not supported", where,
                         pattern, name);
    }
    if (!st && !*targets)
        st = zt_fail(ZT_EUSER,
                     "%s: target_modules '%.200s' matches no linear module of layer 0 (model.layers.0.self_attn.q_proj "
                     "and the like): adapters on part of the layers are not supported yet",
                     where, pattern);
    for (int l = 1; l < layers && !st && !x.too_complex; l++)
        if (layer_matches(&x, c, top, l, &some) != *targets)
            st = zt_fail(ZT_EUSER,
                         "%s: target_modules '%.200s' matches other modules in layer %d than in layer 0: adapters on "
                         "part of the layers are not supported yet",
                         where, pattern, l);
    if (!st && some)
        st = zt_fail(ZT_EUSER,
                     "%s: target_modules '%.200s' matches some of a module's experts and not the others: adapters on "
                     "part of the experts are not supported",
                     where, pattern);
    if (x.too_complex)
        st = zt_fail(ZT_EUSER, "%s: target_modules '%.200s' takes too long to match (it backtracks without end)", where,
                     pattern);
    pcre2_match_context_free(x.mc);
    pcre2_match_data_free(x.md);
    pcre2_code_free(code);
    return st;
}

/* train/vocab: the tokenizer, chat template and vocabulary a run trains with.
 *
 * A named chat template writes special tokens (ChatML's <|im_start|>, Llama 3's
 * <|eot_id|>) that a base model's tokenizer may lack: they are added as special
 * tokens, the model's embedding and LM head grow to match (new rows start at the
 * mean of the old ones), and the run's final/ carries them: tokenizer.json's
 * added_tokens, tokenizer_config.json's added_tokens_decoder and chat_template.
 *
 *     zt_data_tools d;
 *     zt_data_tools_open(&d, &recipe);          // nothing for data.format = tokens
 *     zt_vocab_prepare(&d, &model);             // adds what the template needs
 *     zt_data_open(&recipe, &d, model.V, &train, &valid);
 *     zt_vocab_save(&d, model_dir, "runs/x/final");
 *     zt_data_tools_close(&d);
 */
#ifndef ZT_TRAIN_VOCAB_H
#define ZT_TRAIN_VOCAB_H

#include "lib/data/template.h"
#include "lib/model/llama.h"
#include "lib/recipe/recipe.h"
#include "tokenizers/tokenizer.h"

typedef struct zt_data_tools {
    zt_tokenizer *tok; /* NULL for data.format = tokens */
    zt_template *tmpl; /* chat and instruct */
    int added[8];      /* ids of special tokens added for the template */
    int nadded;
} zt_data_tools;

zt_status zt_data_tools_open(zt_data_tools *d, const zt_recipe *r);
void zt_data_tools_close(zt_data_tools *d);
/* Adds the special tokens the template writes and the tokenizer lacks. */
zt_status zt_vocab_prepare_tokens(zt_data_tools *d);
/* The same, then grows the model's vocabulary to the tokenizer's (an error when the
 * tokenizer is larger for any other reason). */
zt_status zt_vocab_prepare(zt_data_tools *d, zt_llama *m);
/* Writes into out_dir the tokenizer files of tok_dir, with the added tokens and the chat template. */
zt_status zt_vocab_save(const zt_data_tools *d, const char *tok_dir, const char *out_dir);

#endif

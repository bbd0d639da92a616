/* train: the trainer loop shared by pretrain, sft and rlhf, and evaluation.
 *
 *     zt_recipe r;  zt_recipe_load(&r, "recipe.toml", n, overrides);
 *     st = zt_train(&r, argc, argv);            // writes the run directory, final/
 *     zt_eval_result e;
 *     st = zt_evaluate(&r, NULL, &e);            // loss over the validation data
 */
#ifndef ZT_TRAIN_H
#define ZT_TRAIN_H

#include <stdint.h>

#include "lib/backend/backend.h"
#include "lib/data/dataset.h"
#include "lib/model/open.h"
#include "lib/recipe/recipe.h"
#include "vocab.h"

/* Loads data.train in data.format (text, chat and instruct through d's tokenizer
 * and template, see vocab.h), and the validation set: data.valid, or the
 * data.valid_split part held out of data.train (valid stays empty without either). */
zt_status zt_data_open(const zt_recipe *r, const zt_data_tools *d, int vocab_size, zt_dataset *train,
                       zt_dataset *valid);

zt_status zt_train(const zt_recipe *r, int argc, char **argv);

typedef struct zt_eval_result {
    double loss; /* mean over target tokens */
    int64_t tokens;
    int64_t positions; /* the model computed: rows × their width, the widest row's tokens (not max_length) */
    double accuracy;   /* eval.generate: exact-match fraction of greedy answers; NaN when not measured */
    int64_t answered;  /* conversations the accuracy is over */
} zt_eval_result;

/* Mean loss of model m over every row of ds (one pass, file order), rows of data.max_length
 * computed only as wide as the widest one's tokens; a model without activations gets them for
 * that width and micro_batch_size rows. */
zt_status zt_eval_dataset(zt_llama *m, const zt_dataset *ds, const zt_recipe *r, zt_eval_result *out);
/* `zt eval`: the recipe's model (or checkpoint_dir) on the validation set, else data.train;
 * with eval.generate on chat/instruct data also the exact-match accuracy of greedy
 * answers to data.valid's last assistant turns (whitespace trimmed). */
zt_status zt_evaluate(const zt_recipe *r, const char *checkpoint_dir, zt_eval_result *out);

#endif

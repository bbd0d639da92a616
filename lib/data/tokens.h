/* data/tokens: the pre-tokenized JSONL format (format = "tokens"): one object
 * per line, {"input_ids": [ints], "labels": [ints]}. Labels are optional
 * (absent or null: labels = input_ids), aligned with input_ids as in Hugging
 * Face, and -100 means no loss; other fields are ignored; blank lines are skipped.
 *
 *     zt_dataset ds;
 *     int64_t skipped;
 *     zt_status st = zt_tokens_load(&ds, paths, npaths, vocab_size, 0, &skipped);
 *     if (st) return st;        // e.g. "data/train.jsonl:12: input_ids[3] = 70000 is outside ..."
 *     ...
 *     zt_dataset_free(&ds);
 */
#ifndef ZT_DATA_TOKENS_H
#define ZT_DATA_TOKENS_H

#include "dataset.h"

/* Reads every file in order into a fresh *ds. A bad line fails the whole load
 * with ZT_EUSER and a "path:line: what" message (with skip_bad it is counted in
 * *skipped instead), as does a dataset without examples; on failure *ds is left empty. */
zt_status zt_tokens_load(zt_dataset *ds, char *const *paths, int npaths, int vocab_size, int skip_bad,
                         int64_t *skipped);

#endif

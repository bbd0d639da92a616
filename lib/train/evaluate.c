/* Evaluation: mean loss over every row of a data set, one pass in file order. */
#include <math.h>
#include <string.h>

#include "lib/data/batch.h"
#include "train.h"

zt_status zt_eval_dataset(zt_llama *m, const zt_dataset *ds, const zt_recipe *r, zt_eval_result *out)
{
    zt_loader ld;
    zt_batch b;
    int B = m->B, T = m->T;
    zt_status st = zt_loader_init(&ld, ds, T, B, r->data.packing, 0, r->train.seed, 0, 1);
    if (st) return st;
    if ((st = zt_batch_alloc(&b, B, T))) {
        zt_loader_free(&ld);
        return st;
    }
    double loss = 0;
    int64_t tokens = 0, batches = zt_loader_get_stats(&ld).batches;
    for (int64_t i = 0; i < batches && !st; i++) {
        if ((st = zt_loader_next(&ld, &b))) break;
        if (!b.n_targets) continue;
        zt_llama_forward_backward(m, b.input, b.target, b.pos, 0, &loss);
        tokens += b.n_targets;
    }
    zt_batch_free(&b);
    zt_loader_free(&ld);
    out->loss = tokens ? loss / tokens : NAN;
    out->tokens = tokens;
    return st;
}

zt_status zt_evaluate(const zt_recipe *r, const char *checkpoint_dir, zt_eval_result *out)
{
    zt_llama m;
    zt_dataset train, valid;
    zt_status st = zt_model_open(&m, checkpoint_dir ? checkpoint_dir : r->model.path, r->model.dtype);
    if (st) return st;
    if (!(st = zt_data_open(r, m.V, &train, &valid))) {
        if (!(st = zt_llama_alloc_acts(&m, r->train.micro_batch_size, r->data.max_length, 0)))
            st = zt_eval_dataset(&m, valid.n_examples ? &valid : &train, r, out);
        zt_dataset_free(&train);
        zt_dataset_free(&valid);
    }
    zt_llama_free(&m);
    return st;
}

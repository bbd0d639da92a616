/* ZeRO stage 3 in one process (lib/zero): a tiny model trained a few steps with its stage-3
 * slices in each tier — memory (offload.param = "cpu" on the CPU backend), pinned host memory
 * beside a device (offload.param = "cpu" on the CPU posing as one, lib/backend/select.c) and a
 * swap file (offload.param = "nvme", on both) — ends with the losses and the weights of stage
 * 0 on the CPU, bitwise. docs/offload.md promises it: in one process a unit's gradient of the
 * step so far goes back into the model's array before its backward pass, so the kernels
 * accumulate the micro-batches as without ZeRO, and AdamW sees the same numbers.
 *
 * The steps are the trainer's: its ZeRO options from a recipe (zt_plan_zero_options), then
 * per step zero grads, the micro-batches' forward and backward, and zt_optimizer_step (reduce,
 * clip, AdamW, the weights back to the model), on recipes made from the defaults and overrides. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/core/rng.h"
#include "lib/model/lora.h"
#include "lib/plan/options.h"
#include "lib/train/trainer.h"
#include "tests/unit/test.h"

enum { T = 32, A = 3, STEPS = 3, SPLIT = 13 }; /* micro-batches of one row of T tokens, A a step; two documents a row */

static char swap_dir[64];
static int32_t input[STEPS * A][T], target[STEPS * A][T], pos[STEPS * A][T];

/* random tokens, documents [0, SPLIT) and [SPLIT, T) in every row */
static void make_batches(int vocab)
{
    zt_rng r;
    zt_rng_seed(&r, 7, 0);
    for (int b = 0; b < STEPS * A; b++) {
        for (int t = 0; t < T; t++) input[b][t] = (int32_t)(zt_rng_next_u64(&r) % (uint64_t)vocab);
        for (int t = 0; t < T; t++) {
            int start = t < SPLIT ? 0 : SPLIT, end = t < SPLIT ? SPLIT : T;
            pos[b][t] = t - start;
            target[b][t] = t + 1 < end ? input[b][t + 1] : -100;
        }
    }
}

static zt_llama_config tiny_config(void)
{
    zt_llama_config c;
    zt_llama_config_default(&c);
    c.vocab_size = 64, c.hidden_size = 32, c.intermediate_size = 64, c.num_hidden_layers = 3;
    c.num_attention_heads = 4, c.num_key_value_heads = 2, c.head_dim = 8, c.max_position_embeddings = 64;
    return c;
}

/* One configuration: the backend, the recipe's overrides, and the tier its stage-3 slices must be in. */
typedef struct run {
    const char *name;
    int as_device;
    const char *overrides[6];
    int stage, staged, swap; /* what zt_zero_init must have chosen */
} run;

typedef struct result {
    float *weights; /* the flat array after the last step */
    size_t numel;
    double loss[STEPS];
    int ok;
} result;

/* whether swap_dir holds a file (the swap file of offload.param = "nvme") */
static int swap_files(void)
{
    DIR *d = opendir(swap_dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d))) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n > 0;
}

/* STEPS optimizer steps of A micro-batches each, as the trainer makes them */
static void train_steps(const zt_recipe *r, zt_llama *m, zt_zero *z, zt_optstate *opt, result *out)
{
    int64_t targets = 0;
    for (int t = 0; t < A * T; t++) targets += target[t / T][t % T] >= 0;
    for (long step = 1; step <= STEPS; step++) {
        zt_zero_zero_grads(z);
        double sum = 0;
        for (int i = 0; i < A; i++) {
            int b = (int)(step - 1) * A + i;
            zt_llama_forward_backward(m, input[b], target[b], pos[b], (float)(1.0 / (double)targets), &sum);
        }
        out->loss[step - 1] = sum / (double)targets;
        float gnorm;
        /* a fixed learning rate large enough that each step moves the weights well past rounding */
        zt_status st = zt_optimizer_step(r, z, opt, 1e-2, step, out->loss[step - 1], &gnorm);
        CHECK_MSG(!st, "step %ld: %s", step, zt_errmsg());
        if (st) return;
    }
    out->ok = 1;
}

/* The recipe of a run: the defaults, the swap file's settings and the run's overrides. */
static zt_status load_recipe(zt_recipe *r, const char *name, const char *const *overrides)
{
    char nvme[96], *over[8];
    int n = 0;
    snprintf(nvme, sizeof nvme, "offload.nvme_path=%s", swap_dir);
    over[n++] = nvme;
    over[n++] = "offload.aio.block_size=4096";
    over[n++] = "offload.max_pinned_bytes=24576"; /* swap chunks of 4 KiB: a unit in several */
    over[n++] = "train.max_grad_norm=0.9";        /* the gradient norms are 0.96, 0.86, 1.02: clipped, not, clipped */
    for (int i = 0; overrides[i]; i++) over[n++] = (char *)overrides[i];
    zt_status st = zt_recipe_load(r, NULL, n, over);
    CHECK_MSG(!st, "%s: %s", name, zt_errmsg());
    return st;
}

/* The flat array's weights of z after training, or NULL (a failed check) */
static float *read_all(zt_zero *z, const char *name)
{
    float *w = malloc((z->numel + 1) * sizeof(float));
    zt_status st = w ? zt_zero_read_weights(z, w, 0, z->numel) : ZT_ENOMEM;
    CHECK_MSG(!st, "%s: reading the weights: %s", name, w ? zt_errmsg() : "out of memory");
    if (!st) return w;
    free(w);
    return NULL;
}

static result train(const run *c)
{
    result out = {0};
    zt_recipe r;
    zt_status st = load_recipe(&r, c->name, c->overrides);
    if (st) return out;
    zt_llama_config cfg = tiny_config();
    zt_backend *be = c->as_device ? zt_backend_cpu_as_device() : zt_backend_cpu();
    zt_llama m;
    zt_zero z = {0};
    zt_optstate opt = {0};
    zt_zero_options o = zt_plan_zero_options(&r);
    zt_offload_io io = zt_recipe_offload_io(&r);
    if (!(st = zt_llama_init(&m, &cfg, be, ZT_F32)) && !(st = zt_llama_init_weights(&m, 3, 0.02)) &&
        !(st = zt_zero_init(&z, NULL, &o, &m)) &&
        !(st = zt_llama_alloc_acts(&m, 1, T, r.model.activation_checkpointing)))
        st = zt_optstate_open(&opt, r.offload.optimizer, r.train.optim, &io, &z, "optim");
    CHECK_MSG(!st, "%s: %s", c->name, zt_errmsg());
    if (!st) {
        CHECK_MSG(z.stage == c->stage && z.staged == c->staged && !!z.swap == c->swap,
                  "%s: stage %d, staged %d, swap file %d", c->name, z.stage, z.staged, z.swap != NULL);
        CHECK_MSG(swap_files() == c->swap, "%s: a swap file in %s: %d", c->name, swap_dir, swap_files());
        train_steps(&r, &m, &z, &opt, &out);
    }
    if (out.ok && !(out.weights = read_all(&z, c->name))) out.ok = 0;
    zt_optstate_close(&opt);
    zt_zero_free(&z);
    zt_llama_free(&m);
    zt_recipe_free(&r);
    CHECK_MSG(!swap_files(), "%s: the swap file is left in %s", c->name, swap_dir);
    return out;
}

/* the first element where a and b differ, or -1 */
static long first_difference(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a)) return (long)i;
    return -1;
}

static void test_stage3_tiers(void)
{
    static const run reference = {"stage 0 on the CPU", 0, {"zero.stage=0"}, 0, 0, 0};
    static const run runs[] = {
        {"stage 3, slices in memory", 0, {"offload.param=cpu"}, 3, 0, 0},
        {"stage 3, pinned host slices (a device)", 1, {"offload.param=cpu", "offload.optimizer=cpu"}, 3, 1, 0},
        {"stage 3, slices in a swap file", 0, {"offload.param=nvme", "offload.optimizer=nvme"}, 3, 0, 1},
        {"stage 3, slices in a swap file (a device)", 1, {"offload.param=nvme", "offload.optimizer=nvme"}, 3, 1, 1},
    };
    zt_llama_config cfg = tiny_config();
    zt_llama shape;
    CHECK(zt_llama_shape(&shape, &cfg, zt_backend_cpu(), ZT_F32) == ZT_OK);
    make_batches(cfg.vocab_size);
    result want = train(&reference);
    CHECK(want.ok);
    if (!want.ok) return;
    /* training moved the weights: a run that does nothing cannot match */
    zt_llama init;
    CHECK(zt_llama_init(&init, &cfg, zt_backend_cpu(), ZT_F32) == ZT_OK &&
          zt_llama_init_weights(&init, 3, 0.02) == ZT_OK);
    size_t moved = 0;
    for (size_t i = 0; i < shape.numel; i++) moved += want.weights[i] != init.params[i];
    CHECK_MSG(moved > shape.numel / 2, "only %zu of %zu weights changed", moved, shape.numel);
    zt_llama_free(&init);
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        result got = train(&runs[k]);
        if (!got.ok) continue;
        for (int s = 0; s < STEPS; s++)
            CHECK_MSG(!memcmp(&got.loss[s], &want.loss[s], sizeof(double)), "%s: step %d's loss %.17g, stage 0's %.17g",
                      runs[k].name, s + 1, got.loss[s], want.loss[s]);
        long at = first_difference(got.weights, want.weights, shape.numel);
        CHECK_MSG(at < 0, "%s: weight %ld is %.9g, stage 0's %.9g", runs[k].name, at, at < 0 ? 0 : got.weights[at],
                  at < 0 ? 0 : want.weights[at]);
        free(got.weights);
    }
    free(want.weights);
}

/* LoRA on the same model, its frozen base left whole (stage 0) or sharded at stage 3 (one process:
 * offload.param), with the trainer's two partitions: the base's, then the adapters' (DoRA's
 * magnitudes start from the layers the base's partition gathers). The adapters after STEPS steps
 * into out; the base's partition must hold weights alone, in a file of the weights alone. */
static result train_lora(const char *name, const char *const *overrides, zt_lora_method method)
{
    result out = {0};
    zt_recipe r;
    if (load_recipe(&r, name, overrides)) return out;
    zt_llama_config cfg = tiny_config();
    zt_llama m;
    zt_zero base = {0}, z = {0};
    zt_optstate opt = {0};
    zt_zero_options bo = zt_plan_zero_options(&r), ao = zt_plan_adapter_zero_options(&r);
    zt_offload_io io = zt_recipe_offload_io(&r);
    zt_lora_config lc = {.r = 4, .alpha = 8, .targets = ZT_LORA_ALL, .method = method};
    zt_status st = zt_llama_init(&m, &cfg, zt_backend_cpu(), ZT_F32);
    if (!st) st = zt_llama_init_weights(&m, 3, 0.02);
    if (!st) st = zt_lora_attach(&m, &lc);
    int sharded = zt_zero_effective_stage(&bo, 1) == 3;
    if (!st && sharded) st = zt_zero_init(&base, NULL, &bo, &m);
    if (!st) st = zt_lora_init_weights(&m, 5);
    if (!st) st = zt_zero_init(&z, NULL, &ao, &m.lora->view);
    if (!st) st = zt_llama_alloc_acts(&m, 1, T, r.model.activation_checkpointing);
    if (!st) st = zt_optstate_open(&opt, r.offload.optimizer, r.train.optim, &io, &z, "optim");
    CHECK_MSG(!st, "%s: %s", name, zt_errmsg());
    if (!st && sharded) {
        zt_zero_memory u = zt_zero_memory_use(&base);
        CHECK_MSG(base.stage == 3 && !base.grad && u.grads == 0 && u.optimizer == 0,
                  "%s: the base's partition: stage %d, %zu bytes of gradients, %zu of optimizer state", name,
                  base.stage, u.grads, u.optimizer);
        CHECK_MSG(!base.swap || base.swap->arrays == 1u << ZT_SWAP_MASTER, "%s: the base's swap file holds %x", name,
                  base.swap ? base.swap->arrays : 0);
    }
    if (!st) train_steps(&r, &m, &z, &opt, &out);
    if (out.ok && !(out.weights = read_all(&z, name))) out.ok = 0;
    out.numel = z.numel;
    zt_optstate_close(&opt);
    zt_zero_free(&z);
    zt_zero_free(&base);
    zt_llama_free(&m);
    zt_recipe_free(&r);
    CHECK_MSG(!swap_files(), "%s: the swap file is left in %s", name, swap_dir);
    return out;
}

static void test_stage3_lora_base(void)
{
    /* lora.r: the recipe of a LoRA run, whose base's swap file needs no optimizer state beside it */
    static const char *const whole[] = {"lora.r=4", "zero.stage=0", NULL};
    static const char *const tiers[][4] = {
        {"offload.param=cpu", "lora.r=4", NULL},
        {"offload.param=nvme", "lora.r=4", NULL},
        {"offload.param=nvme", "lora.r=4", "offload.optimizer=nvme", NULL},
    };
    make_batches(tiny_config().vocab_size);
    for (int method = ZT_LORA_METHOD_LORA; method <= ZT_LORA_METHOD_DORA; method++) {
        const char *kind = zt_lora_method_names[method];
        result want = train_lora(kind, whole, method);
        CHECK(want.ok);
        if (!want.ok) continue;
        /* the adapters moved the loss: a run that does nothing cannot match */
        CHECK_MSG(want.loss[STEPS - 1] != want.loss[0], "%s: the loss stayed at %.17g", kind, want.loss[0]);
        for (size_t k = 0; k < sizeof tiers / sizeof tiers[0]; k++) {
            result got = train_lora(tiers[k][0], tiers[k], method);
            if (!got.ok) continue;
            for (int s = 0; s < STEPS; s++)
                CHECK_MSG(!memcmp(&got.loss[s], &want.loss[s], sizeof(double)),
                          "%s, %s %s: step %d's loss %.17g, not %.17g", kind, tiers[k][0],
                          tiers[k][2] ? tiers[k][2] : "", s + 1, got.loss[s], want.loss[s]);
            long at = first_difference(got.weights, want.weights, want.numel);
            CHECK_MSG(at < 0, "%s, %s: adapter element %ld differs", kind, tiers[k][0], at);
            free(got.weights);
        }
        free(want.weights);
    }
}

int main(void)
{
    snprintf(swap_dir, sizeof swap_dir, "/tmp/zt_test_zero3_XXXXXX");
    if (!mkdtemp(swap_dir)) return perror("mkdtemp"), 1;
    RUN(test_stage3_tiers);
    RUN(test_stage3_lora_base);
    if (zt_remove_tree(swap_dir)) fprintf(stderr, "cannot remove %s\n", swap_dir);
    return test_summary();
}

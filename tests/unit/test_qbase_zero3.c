/* A quantized base (lib/model/qbase.h) sharded by ZeRO stage 3 in one process (lib/zero): the
 * fixture's base quantized as it is read, unit by unit, into its stage-3 slices in memory
 * (offload.param = "cpu") or in a swap file (offload.param = "nvme"), trains LoRA adapters as the
 * quantized base held whole (stage 0) does, bit for bit: the units gathered are the bytes the
 * whole base holds, and the products dequantize the same tiles. The base's partition holds its
 * encoded array alone (no gradient, no optimizer state), and a swap file changed underneath
 * stops the run at the next gather that reads it. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/fileio.h"
#include "lib/model/lora.h"
#include "lib/model/open.h"
#include "lib/model/qbase_read.h"
#include "lib/plan/options.h"
#include "lib/train/trainer.h"
#include "tests/unit/test.h"

#define BASE "tests/fixtures/lora/base"
enum { T = 32, A = 2, STEPS = 3 };

static char swap_dir[64];
static int32_t input[STEPS * A][T], target[STEPS * A][T], pos[STEPS * A][T];

static void make_batches(void)
{
    unsigned s = 11;
    for (int b = 0; b < STEPS * A; b++)
        for (int t = 0; t < T; t++)
            s = s * 1103515245u + 12345u, input[b][t] = (int32_t)((s >> 16) % 64), pos[b][t] = t;
    for (int b = 0; b < STEPS * A; b++)
        for (int t = 0; t < T; t++) target[b][t] = t + 1 < T ? input[b][t + 1] : -100;
}

/* The swap file's path in swap_dir into path; 0 when there is none. */
static int swap_file(char *path, size_t cap)
{
    DIR *d = opendir(swap_dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++, snprintf(path, cap, "%s/%s", swap_dir, e->d_name);
    if (d) closedir(d);
    return n;
}

typedef struct run {
    zt_recipe r;
    zt_llama m;
    zt_qbase_reader *reader;
    zt_zero base, z;
    zt_optstate opt;
    int sharded;
} run;

static zt_status load_unit(void *ctx, size_t off, size_t n, float *dst) { return zt_qbase_read(ctx, off, n, dst); }

/* The trainer's set-up of a LoRA run on the base quantized as NF4 with double_quant: the base whole
 * in memory, or its partition's slices loaded unit by unit; then the adapters' partition. */
static zt_status open_run(run *x, const char *const *overrides, int n)
{
    char nvme[96], *over[8] = {nvme, "offload.aio.block_size=4096", "lora.r=4", "lora.quantize_base=nf4",
                               "lora.double_quant=true"};
    int k = 5;
    snprintf(nvme, sizeof nvme, "offload.nvme_path=%s", swap_dir);
    for (int i = 0; i < n; i++) over[k++] = (char *)overrides[i];
    memset(x, 0, sizeof *x);
    zt_status st = zt_recipe_load(&x->r, NULL, k, over);
    if (st) return st;
    zt_zero_options bo = zt_plan_zero_options(&x->r), ao = zt_plan_adapter_zero_options(&x->r);
    zt_offload_io io = zt_recipe_offload_io(&x->r);
    zt_lora_config lc = {.r = 4, .alpha = 8, .targets = ZT_LORA_ALL};
    x->sharded = zt_zero_effective_stage(&bo, 1) == 3;
    bo.load = load_unit;
    int hit;
    st = zt_model_open_quantized(&x->m, BASE, ZT_F32, ZT_DEVICE_CPU, 0, ZT_QBASE_NF4, 1, &x->reader);
    if (!st) bo.load_ctx = x->reader;
    if (!st && !x->sharded) st = zt_qbase_load(&x->m, x->reader, NULL, &hit);
    if (!st) st = zt_lora_attach(&x->m, &lc);
    if (!st && x->sharded) st = zt_zero_init(&x->base, NULL, &bo, &x->m);
    if (!st) st = zt_lora_init_weights(&x->m, 5);
    if (!st) st = zt_zero_init(&x->z, NULL, &ao, &x->m.lora->view);
    if (!st) st = zt_llama_alloc_acts(&x->m, 1, T, x->r.model.activation_checkpointing);
    if (!st) st = zt_optstate_open(&x->opt, x->r.offload.optimizer, x->r.train.optim, &io, &x->z, "optim");
    return st;
}

static void close_run(run *x)
{
    zt_optstate_close(&x->opt);
    zt_zero_free(&x->z);
    zt_zero_free(&x->base);
    zt_qbase_reader_close(x->reader);
    zt_llama_free(&x->m);
    zt_recipe_free(&x->r);
}

/* One optimizer step of A micro-batches, as the trainer makes it; its loss into *loss. */
static zt_status step(run *x, long s, double *loss)
{
    int64_t targets = 0;
    for (int t = 0; t < A * T; t++) targets += target[t / T][t % T] >= 0;
    zt_zero_zero_grads(&x->z);
    double sum = 0;
    for (int i = 0; i < A; i++) {
        int b = (int)(s - 1) * A + i;
        zt_llama_forward_backward(&x->m, input[b], target[b], pos[b], (float)(1.0 / (double)targets), &sum);
    }
    *loss = sum / (double)targets;
    float gnorm;
    zt_status st = x->sharded ? zt_zero_reduce_grads(&x->base) : ZT_OK; /* a gather that failed */
    return st ? st : zt_optimizer_step(&x->r, &x->z, &x->opt, 1e-2, s, *loss, &gnorm);
}

typedef struct result {
    double loss[STEPS];
    float *adapters;
    size_t numel;
} result;

static result train(const char *name, const char *const *overrides, int n)
{
    result out = {0};
    run x;
    zt_status st = open_run(&x, overrides, n);
    CHECK_MSG(!st, "%s: %s", name, zt_errmsg());
    if (!st && x.sharded) { /* the base's partition: its encoded array alone */
        zt_zero_memory u = zt_zero_memory_use(&x.base);
        size_t held = !strcmp(name, "offload.param=cpu") ? x.m.numel * sizeof(float) : 0;
        CHECK_MSG(x.base.stage == 3 && u.params == held && u.grads == 0 && u.optimizer == 0,
                  "%s: the base's partition holds %zu bytes of weights (%zu expected), %zu of gradients, %zu of "
                  "optimizer state",
                  name, u.params, held, u.grads, u.optimizer);
    }
    for (long s = 1; !st && s <= STEPS; s++) {
        st = step(&x, s, &out.loss[s - 1]);
        CHECK_MSG(!st, "%s, step %ld: %s", name, s, zt_errmsg());
    }
    if (!st && (out.adapters = malloc(x.z.numel * sizeof(float))))
        CHECK(zt_zero_read_weights(&x.z, out.adapters, 0, x.z.numel) == ZT_OK);
    out.numel = x.z.numel;
    close_run(&x);
    char path[512];
    CHECK_MSG(!swap_file(path, sizeof path), "%s: the swap file is left in %s", name, swap_dir);
    return out;
}

static void test_sharded_is_whole(void)
{
    static const char *const whole[] = {"zero.stage=0"};
    static const char *const tiers[][2] = {{"offload.param=cpu", NULL},
                                           {"offload.param=nvme", NULL},
                                           {"offload.param=nvme", "offload.optimizer=nvme"}};
    result want = train("stage 0", whole, 1);
    CHECK(want.adapters && want.loss[STEPS - 1] != want.loss[0]); /* the adapters moved the loss */
    for (size_t k = 0; want.adapters && k < sizeof tiers / sizeof tiers[0]; k++) {
        result got = train(tiers[k][0], tiers[k], tiers[k][1] ? 2 : 1);
        CHECK_MSG(got.adapters && !memcmp(got.loss, want.loss, sizeof want.loss) &&
                      !memcmp(got.adapters, want.adapters, want.numel * sizeof(float)),
                  "%s %s: the losses (%.17g ... %.17g) or the adapters differ from stage 0's (%.17g ... %.17g)",
                  tiers[k][0], tiers[k][1] ? tiers[k][1] : "", got.loss[0], got.loss[STEPS - 1], want.loss[0],
                  want.loss[STEPS - 1]);
        free(got.adapters);
    }
    free(want.adapters);
}

/* A byte of the base's slices flipped in the swap file after the first step: the next step's
 * gather of that unit fails its checksum, naming the file. */
static void test_swap_file_changed_underneath(void)
{
    static const char *const nvme[] = {"offload.param=nvme"};
    run x;
    double loss;
    char path[512];
    zt_status st = open_run(&x, nvme, 1);
    CHECK_MSG(!st && step(&x, 1, &loss) == ZT_OK, "%s", zt_errmsg());
    CHECK(swap_file(path, sizeof path) == 1);
    int fd = open(path, O_RDWR);
    unsigned char b = 0;
    CHECK(fd >= 0 && pread(fd, &b, 1, 100) == 1);
    b ^= 0x40;
    CHECK(fd >= 0 && pwrite(fd, &b, 1, 100) == 1);
    if (fd >= 0) close(fd);
    st = step(&x, 2, &loss);
    CHECK_MSG(st == ZT_EIO && strstr(zt_errmsg(), "changed underneath") && strstr(zt_errmsg(), path), "%d: %s", st,
              zt_errmsg());
    close_run(&x);
}

int main(void)
{
    snprintf(swap_dir, sizeof swap_dir, "/tmp/zt_test_qbase_zero3_XXXXXX");
    if (!mkdtemp(swap_dir)) return perror("mkdtemp"), 1;
    make_batches();
    RUN(test_sharded_is_whole);
    RUN(test_swap_file_changed_underneath);
    if (zt_remove_tree(swap_dir)) fprintf(stderr, "cannot remove %s\n", swap_dir);
    return test_summary();
}

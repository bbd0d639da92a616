/* The recipe: defaults, a full file, every error with its message, typed
 * overrides, path resolution, the resolved-recipe round trip, the data hash,
 * the world checks, and docs/recipe.md matching the schema.
 * Run from the repository root (it compares docs/recipe.md); ZT_UPDATE_DOCS=1
 * rewrites that file instead. */
#include "lib/recipe/recipe.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/fileio.h"
#include "lib/toml/toml.h"
#include "tests/unit/test.h"

static char tmp[PATH_MAX], cwd[PATH_MAX], home[PATH_MAX + 8];

static char *path_in(const char *name)
{
    static char p[4][PATH_MAX + 64];
    static int next;
    char *out = p[next++ % 4];
    snprintf(out, sizeof p[0], "%s/%s", tmp, name);
    return out;
}

/* Writes text to <tmp>/recipe.toml and loads it with the overrides. */
static zt_status load_text(zt_recipe *r, const char *text, int n, char **ov)
{
    char *p = path_in("recipe.toml");
    test_write_text(p, text);
    return zt_recipe_load(r, p, n, ov);
}

/* The load fails with ZT_EUSER and exactly this message, where '@' stands for the recipe path. */
#define EXPECT_ERROR(text, n, ov, want) expect_error(__LINE__, text, n, ov, want)

static void expect_error(int line, const char *text, int n, char **ov, const char *want)
{
    zt_recipe r;
    zt_status st = load_text(&r, text, n, ov);
    char full[2048] = "";
    for (const char *w = want; *w; w++) {
        if (*w == '@') strcat(full, path_in("recipe.toml"));
        else strncat(full, w, 1);
    }
    CHECK_MSG(st == ZT_EUSER, "line %d: status %d", line, st);
    if (st == ZT_OK) zt_recipe_free(&r);
    else CHECK_MSG(!strcmp(zt_errmsg(), full), "line %d:\n    got  %s\n    want %s", line, zt_errmsg(), full);
    CHECK(r.file == NULL && r.origin == NULL); /* left empty on failure */
}

static char *joined(const char *a, const char *b)
{
    static char p[4][2 * PATH_MAX];
    static int next;
    char *out = p[next++ % 4];
    snprintf(out, sizeof p[0], "%s/%s", a, b);
    return out;
}

static void test_defaults(void)
{
    zt_recipe r;
    zt_status st = zt_recipe_load(&r, NULL, 0, NULL);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(!strcmp(r.model.path, "") && r.model.dtype == ZT_BF16 && r.model.activation_checkpointing);
    CHECK(r.model.device == ZT_DEVICE_AUTO);
    CHECK(!strcmp(r.tokenizer.path, "") && r.tokenizer.chat_template == ZT_TEMPLATE_AUTO);
    CHECK(r.data.train.n == 0 && r.data.valid.n == 0 && r.data.valid_split == 0);
    CHECK(r.data.format == ZT_DATA_CHAT && r.data.max_length == 2048 && r.data.packing && r.data.shuffle);
    CHECK(r.data.train_on == ZT_TRAIN_ASSISTANT && !r.data.skip_bad_lines);
    CHECK(!strcmp(r.data.cache_dir, joined(home, ".cache/zt")));
    CHECK(r.train.num_train_epochs == 1 && r.train.max_steps == 0 && r.train.micro_batch_size == 4);
    CHECK(r.train.gradient_accumulation_steps == 1 && r.train.learning_rate == 2e-5);
    CHECK(r.train.lr_scheduler_type == ZT_SCHEDULE_COSINE && r.train.warmup_steps == 0 && r.train.warmup_ratio == 0);
    CHECK(r.train.decay_ratio == 0.1 && r.train.min_lr_ratio == 0 && r.train.weight_decay == 0);
    CHECK(r.train.adam_beta1 == 0.9 && r.train.adam_beta2 == 0.95 && r.train.adam_epsilon == 1e-8);
    CHECK(r.train.max_grad_norm == 1.0 && r.train.seed == 42 && r.train.logging_steps == 10);
    CHECK(r.train.eval_steps == 0 && r.train.save_steps == 0 && r.train.save_total_limit == 2);
    CHECK(r.train.resume == ZT_RESUME_AUTO && !r.train.resume_force && r.train.collective_timeout_s == 300);
    CHECK(!r.eval.generate && r.eval.max_new_tokens == 64 && r.eval.max_examples == 0);
    CHECK(r.zero.stage == 3 && !r.zero.quantized_weights && r.zero.quant_block_size == 128);
    CHECK(r.zero.hpz_partition_size == 1 && !r.zero.quantized_gradients && !r.zero.quantized_gradients_error_feedback);
    CHECK(r.zero.prefetch_layers == 1 && r.zero.reduce_bucket_size == 50000000);
    CHECK(r.offload.optimizer == ZT_OFFLOAD_NONE && r.offload.param == ZT_OFFLOAD_NONE &&
          r.offload.activations == ZT_OFFLOAD_NONE);
    CHECK(r.offload.nvme_path.n == 1 && !strcmp(r.offload.nvme_path.items[0], "/local_nvme"));
    CHECK(r.offload.max_pinned_bytes == 4294967296LL && r.offload.aio.block_size == 1048576 &&
          r.offload.aio.queue_depth == 32);
    CHECK(!strcmp(r.output.dir, joined(cwd, "runs/default")) && !r.output.overwrite && r.output.tensorboard);
    CHECK(r.rlhf.algorithm == ZT_RLHF_DPO && r.rlhf.beta == 0.1 && !strcmp(r.rlhf.reference, ""));
    CHECK(!strcmp(r.rlhf.reward_model, "") && !strcmp(r.rlhf.reward_command, "") && r.rlhf.reward_timeout_s == 60);
    CHECK(r.rlhf.num_generations == 8 && r.rlhf.max_new_tokens == 128 && r.rlhf.temperature == 1.0 &&
          r.rlhf.top_p == 1.0);
    CHECK(r.rlhf.kl_coef == 0.1 && r.rlhf.gamma == 1.0 && r.rlhf.lam == 0.95 && r.rlhf.cliprange == 0.2);
    CHECK(r.rlhf.cliprange_value == 0.2 && r.rlhf.reward_clip == 5.0);
    CHECK(r.file == NULL);
    zt_recipe_free(&r);
    CHECK(r.model.path == NULL && r.origin == NULL);
    zt_recipe_free(&r); /* freeing twice is harmless */

    /* an empty file gives the defaults, and output.dir is named after it */
    test_write_text(path_in("empty.toml"), "# nothing\n");
    st = zt_recipe_load(&r, path_in("empty.toml"), 0, NULL);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(!strcmp(r.output.dir, joined(cwd, "runs/empty")) && r.zero.stage == 3);
    zt_recipe_free(&r);
}

static const char *full_recipe =
    "# every section\n"
    "[model]\n"
    "path = \"models/tiny\"\n"
    "dtype = \"fp16\"\n"
    "activation_checkpointing = false\n"
    "device = \"cpu\"\n"
    "\n"
    "[tokenizer]\n"
    "chat_template = \"templates/chat.jinja\"\n"
    "chat_template_kwargs = {enable_thinking = false, \"odd key\" = \"a \\\"b\\\"\", n = -3, f = 0.25}\n"
    "\n"
    "[data]\n"
    "train = [\"a.jsonl\", \"../b.jsonl\", \"/abs/c.jsonl\", \"~/d.jsonl\", \"./e/./f.jsonl\"]\n"
    "valid = \"v.jsonl\"\n"
    "format = \"text\"\n"
    "max_length = 512\n"
    "packing = false\n"
    "train_on = \"all\"\n"
    "shuffle = false\n"
    "cache_dir = \"cache\"\n"
    "skip_bad_lines = true\n"
    "\n"
    "[train]\n"
    "num_train_epochs = 2.5\n"
    "max_steps = 1_000\n"
    "micro_batch_size = 8\n"
    "gradient_accumulation_steps = 4\n"
    "learning_rate = 3e-4\n"
    "lr_scheduler_type = \"wsd\"\n"
    "warmup_ratio = 0.05\n"
    "decay_ratio = 0.2\n"
    "min_lr_ratio = 0.1\n"
    "weight_decay = 0.01\n"
    "adam_beta1 = 0.8\n"
    "adam_beta2 = 0.999\n"
    "adam_epsilon = 1e-6\n"
    "max_grad_norm = 0\n"
    "seed = 7\n"
    "logging_steps = 1\n"
    "eval_steps = 50\n"
    "save_steps = 100\n"
    "save_total_limit = 0\n"
    "resume = \"never\"\n"
    "resume_force = true\n"
    "collective_timeout_s = 30\n"
    "\n"
    "[eval]\n"
    "generate = true\n"
    "max_new_tokens = 16\n"
    "max_examples = 100\n"
    "\n"
    "[zero]\n"
    "stage = 3\n"
    "quantized_weights = true\n"
    "quant_block_size = 256\n"
    "hpz_partition_size = 4\n"
    "quantized_gradients = true\n"
    "quantized_gradients_error_feedback = true\n"
    "prefetch_layers = 2\n"
    "reduce_bucket_size = 1_000_000\n"
    "\n"
    "[offload]\n"
    "optimizer = \"nvme\"\n"
    "param = \"cpu\"\n"
    "activations = \"cpu\"\n"
    "nvme_path = [\"/nvme0\", \"nvme1\"]\n"
    "max_pinned_bytes = 0x1_0000_0000\n"
    "\n"
    "[offload.aio]\n"
    "block_size = 8192\n"
    "queue_depth = 64\n"
    "\n"
    "[output]\n"
    "dir = \"out\"\n"
    "overwrite = true\n"
    "tensorboard = false\n"
    "\n"
    "[rlhf]\n"
    "algorithm = \"grpo\"\n"
    "beta = 0.04\n"
    "reference = \"ref\"\n"
    "reward_command = \"python3 reward.py --scale=2\"\n"
    "reward_timeout_s = 5\n"
    "num_generations = 4\n"
    "max_new_tokens = 32\n"
    "temperature = 0.7\n"
    "top_p = 0.9\n"
    "kl_coef = 0.2\n"
    "gamma = 0.99\n"
    "lam = 0.9\n"
    "cliprange = 0.1\n"
    "cliprange_value = 0.3\n"
    "reward_clip = 0\n";

static void test_full_recipe(void)
{
    mkdir(path_in("sub"), 0755);
    char *p = path_in("sub/full.toml");
    test_write_text(p, full_recipe);
    zt_recipe r;
    zt_status st = zt_recipe_load(&r, p, 0, NULL);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    char *dir = path_in("sub");
    CHECK(!strcmp(r.model.path, joined(dir, "models/tiny")) && r.model.dtype == ZT_F16);
    CHECK(!r.model.activation_checkpointing && r.model.device == ZT_DEVICE_CPU);
    CHECK(!strcmp(r.tokenizer.path, r.model.path)); /* empty: the model's */
    CHECK(r.tokenizer.chat_template == ZT_TEMPLATE_FILE &&
          !strcmp(r.tokenizer.chat_template_path, joined(dir, "templates/chat.jinja")));
    CHECK_MSG(!strcmp(r.tokenizer.chat_template_kwargs,
                      "{\"enable_thinking\":false,\"odd key\":\"a \\\"b\\\"\",\"n\":-3,\"f\":0.25}"),
              "%s", r.tokenizer.chat_template_kwargs);
    CHECK(r.data.train.n == 5);
    if (r.data.train.n == 5) {
        CHECK(!strcmp(r.data.train.items[0], joined(dir, "a.jsonl")));
        CHECK(!strcmp(r.data.train.items[1], joined(dir, "../b.jsonl")));
        CHECK(!strcmp(r.data.train.items[2], "/abs/c.jsonl"));
        CHECK(!strcmp(r.data.train.items[3], joined(home, "d.jsonl")));
        CHECK(!strcmp(r.data.train.items[4], joined(dir, "e/f.jsonl")));
    }
    CHECK(r.data.valid.n == 1 && !strcmp(r.data.valid.items[0], joined(dir, "v.jsonl")));
    CHECK(r.data.format == ZT_DATA_TEXT && r.data.max_length == 512 && !r.data.packing && !r.data.shuffle);
    CHECK(r.data.train_on == ZT_TRAIN_ALL && !strcmp(r.data.cache_dir, joined(dir, "cache")) && r.data.skip_bad_lines);
    CHECK(r.train.num_train_epochs == 2.5 && r.train.max_steps == 1000 && r.train.micro_batch_size == 8);
    CHECK(r.train.gradient_accumulation_steps == 4 && r.train.learning_rate == 3e-4 &&
          r.train.lr_scheduler_type == ZT_SCHEDULE_WSD);
    CHECK(r.train.warmup_steps == 0 && r.train.warmup_ratio == 0.05 && r.train.decay_ratio == 0.2 &&
          r.train.min_lr_ratio == 0.1);
    CHECK(r.train.weight_decay == 0.01 && r.train.adam_beta1 == 0.8 && r.train.adam_beta2 == 0.999 &&
          r.train.adam_epsilon == 1e-6);
    CHECK(r.train.max_grad_norm == 0 && r.train.seed == 7 && r.train.logging_steps == 1 && r.train.eval_steps == 50);
    CHECK(r.train.save_steps == 100 && r.train.save_total_limit == 0 && r.train.resume == ZT_RESUME_NEVER &&
          r.train.resume_force);
    CHECK(r.train.collective_timeout_s == 30);
    CHECK(r.eval.generate && r.eval.max_new_tokens == 16 && r.eval.max_examples == 100);
    CHECK(r.zero.stage == 3 && r.zero.quantized_weights && r.zero.quant_block_size == 256 &&
          r.zero.hpz_partition_size == 4);
    CHECK(r.zero.quantized_gradients && r.zero.quantized_gradients_error_feedback && r.zero.prefetch_layers == 2);
    CHECK(r.zero.reduce_bucket_size == 1000000);
    CHECK(r.offload.optimizer == ZT_OFFLOAD_NVME && r.offload.param == ZT_OFFLOAD_CPU &&
          r.offload.activations == ZT_OFFLOAD_CPU);
    CHECK(r.offload.nvme_path.n == 2 && !strcmp(r.offload.nvme_path.items[0], "/nvme0"));
    CHECK(r.offload.nvme_path.n == 2 && !strcmp(r.offload.nvme_path.items[1], joined(dir, "nvme1")));
    CHECK(r.offload.max_pinned_bytes == 4294967296LL && r.offload.aio.block_size == 8192 &&
          r.offload.aio.queue_depth == 64);
    CHECK(!strcmp(r.output.dir, joined(dir, "out")) && r.output.overwrite && !r.output.tensorboard);
    CHECK(r.rlhf.algorithm == ZT_RLHF_GRPO && r.rlhf.beta == 0.04 && !strcmp(r.rlhf.reference, joined(dir, "ref")));
    CHECK(!strcmp(r.rlhf.reward_model, "") && !strcmp(r.rlhf.reward_command, "python3 reward.py --scale=2"));
    CHECK(r.rlhf.reward_timeout_s == 5 && r.rlhf.num_generations == 4 && r.rlhf.max_new_tokens == 32);
    CHECK(r.rlhf.temperature == 0.7 && r.rlhf.top_p == 0.9 && r.rlhf.kl_coef == 0.2 && r.rlhf.gamma == 0.99);
    CHECK(r.rlhf.lam == 0.9 && r.rlhf.cliprange == 0.1 && r.rlhf.cliprange_value == 0.3 && r.rlhf.reward_clip == 0);
    CHECK(!strcmp(r.file, p));
    zt_recipe_free(&r);
}

static void test_other_forms(void)
{
    zt_recipe r;
    /* dotted keys, inline tables, a resume path, a tokenizer path */
    zt_status st =
        load_text(&r,
                  "model.path = \"/m\"\n"
                  "offload = { optimizer = \"cpu\", aio = { queue_depth = 8 } }\n"
                  "[tokenizer]\npath = \"tok/tokenizer.json\"\n"
                  "[train]\nresume = \"runs/x/checkpoints/step-000100\"\nmax_steps = 5\nnum_train_epochs = 0\n"
                  "[data]\nvalid = []\ntrain = \"~\"\n",
                  0, NULL);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(!strcmp(r.model.path, "/m") && r.offload.optimizer == ZT_OFFLOAD_CPU && r.offload.aio.queue_depth == 8);
    CHECK(!strcmp(r.tokenizer.path, path_in("tok/tokenizer.json")));
    CHECK(r.train.resume == ZT_RESUME_PATH && !strcmp(r.train.resume_path, path_in("runs/x/checkpoints/step-000100")));
    CHECK(r.data.valid.n == 0 && r.data.train.n == 1 && !strcmp(r.data.train.items[0], home));
    CHECK(!strcmp(r.output.dir, joined(cwd, "runs/recipe")));
    zt_recipe_free(&r);

    st = load_text(&r, "[offload]\naio.block_size = 4096\n", 0, NULL);
    CHECK_MSG(st == ZT_OK && r.offload.aio.block_size == 4096, "%s", zt_errmsg());
    if (!st) zt_recipe_free(&r);

    /* a table key as a section of its own, and as dotted keys */
    st = load_text(&r, "[tokenizer.chat_template_kwargs]\nenable_thinking = false\nlevel = 2\n", 0, NULL);
    CHECK_MSG(st == ZT_OK && !strcmp(r.tokenizer.chat_template_kwargs, "{\"enable_thinking\":false,\"level\":2}"), "%s",
              st ? zt_errmsg() : r.tokenizer.chat_template_kwargs);
    if (!st) zt_recipe_free(&r);
    st = load_text(&r, "tokenizer.chat_template_kwargs.x = \"y\"\n", 0, NULL);
    CHECK_MSG(st == ZT_OK && !strcmp(r.tokenizer.chat_template_kwargs, "{\"x\":\"y\"}"), "%s",
              st ? zt_errmsg() : r.tokenizer.chat_template_kwargs);
    if (!st) zt_recipe_free(&r);

    /* a recipe named without a directory resolves against the current one */
    CHECK(chdir(tmp) == 0);
    test_write_text("bare.toml", "[model]\npath = \"m\"\n");
    st = zt_recipe_load(&r, "bare.toml", 0, NULL);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (!st) {
        CHECK(!strcmp(r.model.path, path_in("m")) && !strcmp(r.output.dir, path_in("runs/bare")));
        zt_recipe_free(&r);
    }
    CHECK(chdir(cwd) == 0);
}

static void test_file_errors(void)
{
    EXPECT_ERROR("[train]\nlearnig_rate = 1e-4\n", 0, NULL,
                 "@:2:1: unknown key 'learnig_rate' in [train] (did you mean 'learning_rate'?)");
    EXPECT_ERROR("# 1\n# 2\n# 3\n# 4\n# 5\n# 6\n# 7\n[train]\nseed = 1\n\n\n    learnig_rate = 1e-4\n", 0, NULL,
                 "@:12:5: unknown key 'learnig_rate' in [train] (did you mean 'learning_rate'?)");
    EXPECT_ERROR("[train]\nlearning_rat = 1\n", 0, NULL,
                 "@:2:1: unknown key 'learning_rat' in [train] (did you mean 'learning_rate'?)");
    EXPECT_ERROR("[train]\nlearningrate = 1\n", 0, NULL,
                 "@:2:1: unknown key 'learningrate' in [train] (did you mean 'learning_rate'?)");
    EXPECT_ERROR("[train]\nepochs = 1\n", 0, NULL,
                 "@:2:1: unknown key 'epochs' in [train] (did you mean 'num_train_epochs'?)");
    EXPECT_ERROR("[model]\ndtpye = \"bf16\"\n", 0, NULL,
                 "@:2:1: unknown key 'dtpye' in [model] (did you mean 'dtype'?)");
    EXPECT_ERROR("[train]\nfoo = 1\n", 0, NULL, "@:2:1: unknown key 'foo' in [train]");
    EXPECT_ERROR("[data]\nseed = 1\n", 0, NULL,
                 "@:2:1: unknown key 'seed' in [data] (did you mean 'seed' in [train]?)");
    EXPECT_ERROR("learning_rate = 1\n", 0, NULL,
                 "@:1:1: unknown key 'learning_rate' at the top level (did you mean 'learning_rate' in [train]?)");
    EXPECT_ERROR("[trian]\n", 0, NULL, "@:1:2: unknown section [trian] (did you mean [train]?)");
    EXPECT_ERROR("[offload.aoi]\n", 0, NULL, "@:1:10: unknown section [offload.aoi] (did you mean [offload.aio]?)");
    EXPECT_ERROR("[zzz]\n", 0, NULL, "@:1:2: unknown section [zzz]");
    EXPECT_ERROR("[train.x]\n", 0, NULL, "@:1:8: unknown section [train.x] (did you mean [train]?)");
    EXPECT_ERROR("train = 1\n", 0, NULL, "@:1:1: [train] must be a table, got an integer");
    EXPECT_ERROR("[offload]\naio = 1\n", 0, NULL, "@:2:1: [offload.aio] must be a table, got an integer");
    /* wrong types: the position is the value's */
    EXPECT_ERROR("[train]\nlearning_rate = \"fast\"\n", 0, NULL,
                 "@:2:17: train.learning_rate: expected a number, got a string");
    EXPECT_ERROR("[train]\nmicro_batch_size = 2.5\n", 0, NULL,
                 "@:2:20: train.micro_batch_size: expected an integer, got a float");
    EXPECT_ERROR("[model]\nactivation_checkpointing = 1\n", 0, NULL,
                 "@:2:28: model.activation_checkpointing: expected true or false, got an integer");
    EXPECT_ERROR("[model]\npath = [\"a\"]\n", 0, NULL, "@:2:8: model.path: expected a string, got an array");
    EXPECT_ERROR("[data]\ntrain = 5\n", 0, NULL,
                 "@:2:9: data.train: expected a string or an array of strings, got an integer");
    EXPECT_ERROR("[data]\ntrain = [\"a\", 1]\n", 0, NULL,
                 "@:2:9: data.train: expected a string or an array of strings, got an array holding an integer");
    EXPECT_ERROR("[data]\ntrain = [\"a\", \"\"]\n", 0, NULL, "@:2:9: data.train: an empty string in the list");
    EXPECT_ERROR("[train.learning_rate]\n", 0, NULL, "@:1:1: train.learning_rate: expected a number, got a table");
    EXPECT_ERROR("[model]\npath = \"a\\u0000b\"\n", 0, NULL, "@:2:8: model.path: a string holding a NUL character");
    /* ranges */
    EXPECT_ERROR("[train]\nwarmup_ratio = 1.5\n", 0, NULL, "@:2:16: train.warmup_ratio: must be in [0, 1], got 1.5");
    EXPECT_ERROR("[zero]\nstage = 4\n", 0, NULL, "@:2:9: zero.stage: must be in [0, 3], got 4");
    EXPECT_ERROR("[train]\nmicro_batch_size = 0\n", 0, NULL, "@:2:20: train.micro_batch_size: must be >= 1, got 0");
    EXPECT_ERROR("[train]\nmax_steps = -1\n", 0, NULL, "@:2:13: train.max_steps: must be >= 0, got -1");
    EXPECT_ERROR("[train]\nadam_beta1 = 1\n", 0, NULL, "@:2:14: train.adam_beta1: must be in [0, 1), got 1");
    EXPECT_ERROR("[train]\nadam_epsilon = 0\n", 0, NULL, "@:2:16: train.adam_epsilon: must be > 0, got 0");
    EXPECT_ERROR("[train]\nlearning_rate = nan\n", 0, NULL,
                 "@:2:17: train.learning_rate: must be a finite number, got nan");
    EXPECT_ERROR("[train]\nlearning_rate = inf\n", 0, NULL,
                 "@:2:17: train.learning_rate: must be a finite number, got inf");
    EXPECT_ERROR("[data]\nvalid_split = 0.6\n", 0, NULL, "@:2:15: data.valid_split: must be in [0, 0.5], got 0.6");
    EXPECT_ERROR("[data]\nmax_length = 3000000000\n", 0, NULL, "@:2:14: data.max_length: must be >= 1, got 3000000000");
    EXPECT_ERROR("[zero]\nhpz_partition_size = 0\n", 0, NULL, "@:2:22: zero.hpz_partition_size: must be >= 1, got 0");
    EXPECT_ERROR("[rlhf]\ntop_p = 0\n", 0, NULL, "@:2:9: rlhf.top_p: must be in (0, 1], got 0");
    /* allowed values */
    EXPECT_ERROR("[model]\ndtype = \"fp8\"\n", 0, NULL, "@:2:9: model.dtype: 'fp8' is not one of fp32, bf16, fp16");
    EXPECT_ERROR("[offload]\nparam = \"gpu\"\n", 0, NULL,
                 "@:2:9: offload.param: 'gpu' is not one of none, cpu, nvme, auto");
    /* a table of strings, numbers and booleans, as an inline table or a section of its own */
    EXPECT_ERROR("[tokenizer]\nchat_template_kwargs = {a = [1]}\n", 0, NULL,
                 "@:2:25: tokenizer.chat_template_kwargs: 'a' must be a string, a finite number or a boolean, got an "
                 "array");
    EXPECT_ERROR("[tokenizer.chat_template_kwargs]\nx = {y = 1}\n", 0, NULL,
                 "@:2:1: tokenizer.chat_template_kwargs: 'x' must be a string, a finite number or a boolean, got a "
                 "table");
    EXPECT_ERROR("[tokenizer]\nchat_template_kwargs = {f = nan}\n", 0, NULL,
                 "@:2:25: tokenizer.chat_template_kwargs: 'f' must be a string, a finite number or a boolean, got an "
                 "infinity or NaN");
    EXPECT_ERROR("[tokenizer]\nchat_template_kwargs = \"enable_thinking\"\n", 0, NULL,
                 "@:2:24: tokenizer.chat_template_kwargs: expected a table, got a string");
    EXPECT_ERROR(
        "[tokenizer]\nchat_template = \"vicuna\"\n", 0, NULL,
        "@:2:17: tokenizer.chat_template: 'vicuna' is not one of auto, chatml, llama2, llama3, mistral, zephyr, alpaca "
        "or a file ending in .jinja");
    EXPECT_ERROR(
        "[tokenizer]\nchat_template = \".jinja\"\n", 0, NULL,
        "@:2:17: tokenizer.chat_template: '.jinja' is not one of auto, chatml, llama2, llama3, mistral, zephyr, alpaca "
        "or a file ending in .jinja");
    /* the TOML layer's errors come through with the file name */
    EXPECT_ERROR("[train]\nseed = 1\nseed = 2\n", 0, NULL, "@:3:1: duplicate key 'seed' (first defined at line 2)");
    EXPECT_ERROR("[train]\nseed = \n", 0, NULL, "@:2:8: expected a value, found a newline");
    EXPECT_ERROR("[model]\npath = models/x\n", 0, NULL, "@:2:8: invalid value 'models' (strings must be quoted)");
    /* checks between keys point at the later key */
    EXPECT_ERROR("[train]\nwarmup_steps = 10\nwarmup_ratio = 0.1\n", 0, NULL,
                 "@:3:1: train.warmup_steps and train.warmup_ratio are both set; use one");
    EXPECT_ERROR("[train]\nnum_train_epochs = 0\n", 0, NULL,
                 "@:2:1: train.num_train_epochs or train.max_steps must be above 0");
    EXPECT_ERROR("[data]\nvalid_split = 0.1\nvalid = \"v.jsonl\"\n", 0, NULL,
                 "@:3:1: data.valid and data.valid_split are both set; use one");
    EXPECT_ERROR("[rlhf]\nreward_model = \"rm\"\nreward_command = \"./score\"\n", 0, NULL,
                 "@:3:1: rlhf.reward_model and rlhf.reward_command are both set; use one");
    EXPECT_ERROR("[zero]\nstage = 2\n[offload]\nparam = \"cpu\"\n", 0, NULL,
                 "@:4:1: offload.param = \"cpu\" needs zero.stage = 3 (it is 2)");
    EXPECT_ERROR("[offload.aio]\nblock_size = 5000\n", 0, NULL,
                 "@:2:1: offload.aio.block_size = 5000 is not a multiple of 4096");

    zt_recipe r;
    zt_status st = zt_recipe_load(&r, path_in("missing.toml"), 0, NULL);
    CHECK(st == ZT_EUSER && strstr(zt_errmsg(), "missing.toml': cannot open the recipe: No such file or directory"));
    st = zt_recipe_load(&r, tmp, 0, NULL);
    CHECK(st == ZT_EUSER && strstr(zt_errmsg(), "': cannot read the recipe: Is a directory"));
}

static void test_overrides(void)
{
    char *ov[] = {
        "train.learning_rate=1e-4",
        "train.max_steps=0x10",
        "model.activation_checkpointing=false",
        "model.path=rel/model",
        "data.train=[a.jsonl, b.jsonl]",
        "data.valid=one.jsonl",
        "offload.nvme_path=[\"/x y\", 'z']",
        "rlhf.reward_command=python3 reward.py --x=1",
        "model.dtype=\"fp16\"",
        "train.num_train_epochs=3",
        "offload.aio.queue_depth=64",
        "output.dir=~/out",
        " train.seed = 7 ",
        "tokenizer.chat_template=my template.jinja",
        "data.cache_dir=/tmp//c/./d/",
        "tokenizer.chat_template_kwargs={enable_thinking = true}",
    };
    zt_recipe r;
    zt_status st = load_text(&r, "[train]\nlearning_rate = 1e-3\nseed = 1\n", (int)(sizeof ov / sizeof ov[0]), ov);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(r.train.learning_rate == 1e-4 && r.train.max_steps == 16 && !r.model.activation_checkpointing);
    CHECK(!strcmp(r.model.path, joined(cwd, "rel/model")) && !strcmp(r.tokenizer.path, r.model.path));
    CHECK(r.data.train.n == 2 && !strcmp(r.data.train.items[0], joined(cwd, "a.jsonl")) &&
          !strcmp(r.data.train.items[1], joined(cwd, "b.jsonl")));
    CHECK(r.data.valid.n == 1 && !strcmp(r.data.valid.items[0], joined(cwd, "one.jsonl")));
    CHECK(r.offload.nvme_path.n == 2 && !strcmp(r.offload.nvme_path.items[0], "/x y") &&
          !strcmp(r.offload.nvme_path.items[1], joined(cwd, "z")));
    CHECK(!strcmp(r.rlhf.reward_command, "python3 reward.py --x=1") && r.model.dtype == ZT_F16);
    CHECK(r.train.num_train_epochs == 3 && r.offload.aio.queue_depth == 64 && r.train.seed == 7);
    CHECK(!strcmp(r.output.dir, joined(home, "out")));
    CHECK(r.tokenizer.chat_template == ZT_TEMPLATE_FILE &&
          !strcmp(r.tokenizer.chat_template_path, joined(cwd, "my template.jinja")));
    CHECK(!strcmp(r.data.cache_dir, "/tmp/c/d"));
    CHECK(!strcmp(r.tokenizer.chat_template_kwargs, "{\"enable_thinking\":true}"));
    zt_recipe_free(&r);

    char *empty[] = {"data.valid=[]", "data.train=[]", "data.train=[ ]"};
    st = zt_recipe_load(&r, NULL, 3, empty);
    CHECK(st == ZT_OK && r.data.valid.n == 0 && r.data.train.n == 0);
    if (!st) zt_recipe_free(&r);

    char *e1[] = {"train.lr=1"};
    EXPECT_ERROR("", 1, e1, "override 'train.lr=1': unknown key 'lr' in [train]");
    char *e2[] = {"trian.seed=1"};
    EXPECT_ERROR("", 1, e2, "override 'trian.seed=1': unknown section [trian] (did you mean [train]?)");
    char *e3[] = {"seed=1"};
    EXPECT_ERROR("", 1, e3, "override 'seed=1': expected section.key=value");
    char *e4[] = {"train.seed"};
    EXPECT_ERROR("", 1, e4, "override 'train.seed': expected section.key=value");
    char *e5[] = {"train.learning_rate=abc"};
    EXPECT_ERROR("", 1, e5, "override 'train.learning_rate=abc': expected a number");
    char *e6[] = {"train.micro_batch_size=0"};
    EXPECT_ERROR("", 1, e6, "override 'train.micro_batch_size=0': must be >= 1, got 0");
    char *e7[] = {"model.dtype=fp8"};
    EXPECT_ERROR("", 1, e7, "override 'model.dtype=fp8': 'fp8' is not one of fp32, bf16, fp16");
    char *e8[] = {"train.warmup_ratio=0.1"};
    EXPECT_ERROR("[train]\nwarmup_steps = 10\n", 1, e8,
                 "override 'train.warmup_ratio=0.1': train.warmup_steps and train.warmup_ratio are both set; use one");
    char *e9[] = {"train.learnig_rate=1"};
    EXPECT_ERROR(
        "", 1, e9,
        "override 'train.learnig_rate=1': unknown key 'learnig_rate' in [train] (did you mean 'learning_rate'?)");
    char *e10[] = {"offload.aoi.block_size=1"};
    EXPECT_ERROR("", 1, e10,
                 "override 'offload.aoi.block_size=1': unknown section [offload.aoi] (did you mean [offload.aio]?)");
    char *e11[] = {"train.seed=1.5"};
    EXPECT_ERROR("", 1, e11, "override 'train.seed=1.5': expected an integer, got a float");
    char *e12[] = {"model.activation_checkpointing=yes"};
    EXPECT_ERROR("", 1, e12, "override 'model.activation_checkpointing=yes': expected true or false");
    char *e13[] = {"train.seed=1\nx = 2"};
    EXPECT_ERROR("", 1, e13, "override 'train.seed=1\\nx = 2': expected an integer");
    char *e14[] = {"model.path=\xff"};
    EXPECT_ERROR("", 1, e14, "override 'model.path=\xff': not valid UTF-8");
    char *e15[] = {"=1"};
    EXPECT_ERROR("", 1, e15, "override '=1': expected section.key=value");
    char *e16[] = {"tokenizer.chat_template_kwargs=enable_thinking"};
    EXPECT_ERROR("", 1, e16, "override 'tokenizer.chat_template_kwargs=enable_thinking': expected a table");
}

static void test_home(void)
{
    unsetenv("HOME");
    zt_recipe r;
    zt_status st = zt_recipe_load(&r, NULL, 0, NULL);
    CHECK(st == ZT_EUSER && !strcmp(zt_errmsg(), "data.cache_dir: cannot expand '~/.cache/zt': HOME is not set"));
    char *ov[] = {"data.cache_dir=/c"};
    st = zt_recipe_load(&r, NULL, 1, ov); /* defaults are applied first: the same failure */
    CHECK(st == ZT_EUSER);
    setenv("HOME", home, 1);
}

static char *all_values(const zt_recipe *r)
{
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s.%s=", s[i].section, s[i].key);
        zt_recipe_write_value(f, r, &s[i]);
        fputc('\n', f);
    }
    fclose(f);
    return text;
}

static void test_round_trip(void)
{
    mkdir(path_in("sub"), 0755);
    char *p = path_in("sub/full.toml");
    test_write_text(p, full_recipe);
    char *ov[] = {"train.learning_rate=0.30000000000000004", "rlhf.reward_command=say \"hi\"\t\\ \x01",
                  "train.weight_decay=1e-300", "data.max_length=7", "train.num_train_epochs=1e20"};
    zt_recipe a, b;
    zt_status st = zt_recipe_load(&a, p, 5, ov);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    char *out = path_in("resolved.toml");
    st = zt_recipe_write_resolved(&a, out);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    char leftover[64];
    snprintf(leftover, sizeof leftover, "resolved.toml.tmp.%d", (int)getpid());
    CHECK(access(path_in(leftover), F_OK) != 0);
    st = zt_recipe_load(&b, out, 0, NULL);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (!st) {
        char *ta = all_values(&a), *tb = all_values(&b);
        CHECK_MSG(!strcmp(ta, tb), "\n%s\nvs\n%s", ta, tb);
        CHECK(a.train.learning_rate == b.train.learning_rate && b.train.learning_rate == 0.1 + 0.2);
        CHECK(!strcmp(b.rlhf.reward_command, "say \"hi\"\t\\ \x01"));
        CHECK(zt_recipe_data_hash(&a) == zt_recipe_data_hash(&b));
        free(ta);
        free(tb);
        zt_recipe_free(&b);
    }
    /* every key is in the file, in its section */
    FILE *f = fopen(out, "r");
    char text[16384];
    size_t n = f ? fread(text, 1, sizeof text, f) : 0;
    if (f) fclose(f);
    zt_toml *doc = zt_toml_parse(text, n, NULL, 0);
    CHECK(doc != NULL);
    int nk;
    const zt_recipe_key *s = zt_recipe_schema(&nk);
    for (int i = 0; doc && i < nk; i++) {
        char dotted[128];
        snprintf(dotted, sizeof dotted, "%s.%s", s[i].section, s[i].key);
        CHECK_MSG(zt_toml_path(doc, dotted) != NULL, "%s", dotted);
    }
    zt_toml_free(doc);
    /* defaults round trip too */
    zt_recipe_free(&a);
    st = zt_recipe_load(&a, NULL, 0, NULL);
    CHECK(st == ZT_OK && zt_recipe_write_resolved(&a, out) == ZT_OK);
    st = zt_recipe_load(&b, out, 0, NULL);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (!st) {
        char *ta = all_values(&a), *tb = all_values(&b);
        CHECK(!strcmp(ta, tb));
        free(ta);
        free(tb);
        zt_recipe_free(&b);
    }
    zt_recipe_free(&a);
    /* a directory that does not exist: an I/O error that names the file */
    st = zt_recipe_load(&a, NULL, 0, NULL);
    CHECK(st == ZT_OK && zt_recipe_write_resolved(&a, path_in("no/such/dir.toml")) == ZT_EIO);
    const char *msg = zt_errmsg();
    CHECK_MSG(strstr(msg, "cannot create '") && strstr(msg, "no/such/dir.toml.tmp."), "%s", msg);
    /* a write that fails (the file size limit stands for a full disk): an I/O error naming the
     * file, which keeps its old contents, and no temporary file left */
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = {.rlim_cur = 100, .rlim_max = old.rlim_max};
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    st = zt_recipe_write_resolved(&a, out);
    msg = zt_errmsg();
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, was);
    CHECK_MSG(st == ZT_EIO && strstr(msg, "resolved.toml' failed"), "%d %s", st, msg);
    CHECK(access(path_in(leftover), F_OK) != 0);
    zt_recipe reread;
    CHECK(zt_recipe_load(&reread, out, 0, NULL) == ZT_OK);
    zt_recipe_free(&reread);
    zt_recipe_free(&a);
}

static uint64_t hash_with(const char *override)
{
    char *ov[] = {(char *) override};
    zt_recipe r;
    zt_status st = zt_recipe_load(&r, NULL, override ? 1 : 0, ov);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return 0;
    uint64_t h = zt_recipe_data_hash(&r);
    zt_recipe_free(&r);
    return h;
}

static void test_data_hash(void)
{
    uint64_t base = hash_with(NULL);
    CHECK(base == hash_with(NULL));
    /* the batch split is not part of it: the trainer adds the global batch (micro × accumulation × world) */
    const char *same[] = {"train.learning_rate=1", "output.dir=/elsewhere",    "data.cache_dir=/c",
                          "zero.stage=1",          "train.max_steps=9",        "offload.optimizer=cpu",
                          "train.resume=never",    "train.micro_batch_size=2", "train.gradient_accumulation_steps=2"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) CHECK_MSG(hash_with(same[i]) == base, "%s", same[i]);
    const char *differ[] = {"data.train=x.jsonl",
                            "train.seed=1",
                            "model.path=/m",
                            "tokenizer.chat_template=chatml",
                            "data.max_length=100",
                            "data.shuffle=false",
                            "data.valid_split=0.1",
                            "data.format=text",
                            "data.skip_bad_lines=true",
                            "tokenizer.path=/t",
                            "tokenizer.chat_template_kwargs={enable_thinking=false}"};
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++)
        CHECK_MSG(hash_with(differ[i]) != base, "%s", differ[i]);
}

static void test_check_world(void)
{
    zt_recipe r;
    zt_status st = load_text(&r, "[zero]\nhpz_partition_size = 4\n", 0, NULL);
    CHECK_MSG(st == ZT_OK, "%s", zt_errmsg());
    if (st) return;
    CHECK(zt_recipe_check_world(&r, 8, 4) == ZT_OK);
    CHECK(zt_recipe_check_world(&r, 16, 8) == ZT_OK);
    CHECK(zt_recipe_check_world(&r, 4, 4) == ZT_OK);
    char want[PATH_MAX + 128];
    snprintf(want, sizeof want, "%s:2:1: zero.hpz_partition_size = 4 does not divide the world size 6",
             path_in("recipe.toml"));
    CHECK(zt_recipe_check_world(&r, 6, 3) == ZT_EUSER && !strcmp(zt_errmsg(), want));
    CHECK(zt_recipe_check_world(&r, 8, 2) == ZT_EUSER &&
          strstr(zt_errmsg(), "zero.hpz_partition_size = 4 does not divide the ranks per node (2)"));
    CHECK(zt_recipe_check_world(&r, 8, 6) == ZT_EUSER);
    CHECK(zt_recipe_check_world(&r, 0, 1) == ZT_EUSER);
    zt_recipe_free(&r);
    char *ov[] = {"zero.hpz_partition_size=2"};
    CHECK(zt_recipe_load(&r, NULL, 1, ov) == ZT_OK);
    CHECK(
        zt_recipe_check_world(&r, 3, 3) == ZT_EUSER &&
        !strcmp(zt_errmsg(),
                "override 'zero.hpz_partition_size=2': zero.hpz_partition_size = 2 does not divide the world size 3"));
    zt_recipe_free(&r);
    CHECK(zt_recipe_load(&r, NULL, 0, NULL) == ZT_OK);
    CHECK(zt_recipe_check_world(&r, 7, 3) == ZT_OK); /* hpZ off */
    zt_recipe_free(&r);
}

static void test_schema(void)
{
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    CHECK(n >= 70);
    for (int i = 0; i < n; i++) {
        CHECK_MSG(s[i].doc && strlen(s[i].doc) > 10, "%s.%s has no doc", s[i].section, s[i].key);
        CHECK_MSG(s[i].def != NULL, "%s.%s has no default", s[i].section, s[i].key);
        CHECK(zt_recipe_find(s[i].section, s[i].key) == &s[i]); /* unique */
        if (s[i].type == ZT_RECIPE_ENUM) CHECK(s[i].names && s[i].nnames > 0);
        if (s[i].type == ZT_RECIPE_INT) CHECK(s[i].min >= INT_MIN && s[i].max <= INT_MAX);
        /* a section's keys are together */
        for (int j = i + 2; j < n; j++)
            CHECK_MSG(strcmp(s[j].section, s[i].section) || !strcmp(s[j - 1].section, s[i].section), "%s split",
                      s[i].section);
    }
    CHECK(zt_recipe_find("train", "nope") == NULL && zt_recipe_find("offload.aio", "block_size") != NULL);
    char range[64];
    CHECK(!strcmp(zt_recipe_range_text(zt_recipe_find("train", "adam_beta2"), range, sizeof range), "[0, 1)"));
    CHECK(!strcmp(zt_recipe_range_text(zt_recipe_find("zero", "stage"), range, sizeof range), "[0, 3]"));
    CHECK(!strcmp(zt_recipe_range_text(zt_recipe_find("data", "max_length"), range, sizeof range), ">= 1"));
    CHECK(!strcmp(zt_recipe_range_text(zt_recipe_find("model", "dtype"), range, sizeof range), ""));
}

/* Every name of every enum key loads as its index and writes back as itself; a path, where a
 * key takes one, loads as the index past the names with the path beside it. */
static void test_enum_values(void)
{
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    for (int i = 0; i < n; i++) {
        if (s[i].type != ZT_RECIPE_ENUM) continue;
        for (int v = 0; v <= s[i].nnames; v++) {
            if (v == s[i].nnames && !s[i].path_suffix) break;
            char value[200], *text = NULL;
            snprintf(value, sizeof value, "%s.%s=%s", s[i].section, s[i].key,
                     v < s[i].nnames ? s[i].names[v] : "/x/a.jinja");
            /* what the key's values need: offload.param = nvme offload.optimizer = nvme, lora.quantize_base
             * LoRA, GRPO's loss types and reward scalings GRPO, KTO's loss types KTO (and train.optim
             * nothing: adamw_8bit refuses offload.optimizer = nvme) */
            int loss = !strcmp(s[i].key, "loss_type"),
                grpo = !strcmp(s[i].key, "scale_rewards") || (loss && v >= ZT_RLHF_LOSS_GRPO && v <= ZT_RLHF_LOSS_DAPO);
            char *ov[] = {!strcmp(s[i].section, "lora")   ? "lora.r=8"
                          : grpo                          ? "rlhf.algorithm=grpo"
                          : loss && v >= ZT_RLHF_LOSS_KTO ? "rlhf.algorithm=kto"
                          : loss && v == ZT_RLHF_EXO_PAIR ? "rlhf.label_smoothing=0.001"
                          : !strcmp(s[i].key, "optim")    ? "train.seed=1"
                                                          : "offload.optimizer=nvme",
                          value};
            zt_recipe r;
            CHECK_MSG(zt_recipe_load(&r, NULL, 2, ov) == ZT_OK, "%s: %s", value, zt_errmsg());
            CHECK_MSG(*(const int *)((const char *)&r + s[i].offset) == v, "%s", value);
            CHECK_MSG(!strcmp(zt_recipe_enum_text(&r, &s[i]), strchr(value, '=') + 1), "%s", value);
            size_t len;
            FILE *f = open_memstream(&text, &len);
            zt_recipe_write_value(f, &r, &s[i]);
            fclose(f);
            char want[220];
            snprintf(want, sizeof want, "\"%s\"", strchr(value, '=') + 1);
            CHECK_MSG(!strcmp(text, want), "%s wrote %s", value, text);
            free(text);
            zt_recipe_free(&r);
        }
    }
    /* Hugging Face's scheduler and optimizer names are read as what they are, and written as zt names them */
    static const char *const hf[][3] = {{"lr_scheduler_type", "constant_with_warmup", "constant"},
                                        {"lr_scheduler_type", "cosine_with_min_lr", "cosine"},
                                        {"lr_scheduler_type", "warmup_stable_decay", "wsd"},
                                        {"optim", "adamw_torch_fused", "adamw_torch"},
                                        {"optim", "paged_adamw_32bit", "adamw_torch"},
                                        {"optim", "adamw_bnb_8bit", "adamw_8bit"},
                                        {"optim", "paged_adamw_8bit", "adamw_8bit"}};
    for (size_t i = 0; i < sizeof hf / sizeof hf[0]; i++) {
        char value[96];
        snprintf(value, sizeof value, "train.%s=%s", hf[i][0], hf[i][1]);
        char *ov[] = {value};
        zt_recipe r;
        CHECK_MSG(zt_recipe_load(&r, NULL, 1, ov) == ZT_OK, "%s: %s", value, zt_errmsg());
        CHECK_MSG(!strcmp(zt_recipe_enum_text(&r, zt_recipe_find("train", hf[i][0])), hf[i][2]), "%s", value);
        zt_recipe_free(&r);
    }
    char *bad[] = {"train.lr_scheduler_type=cosine_with_hard_restarts"};
    EXPECT_ERROR("", 1, bad,
                 "override 'train.lr_scheduler_type=cosine_with_hard_restarts': 'cosine_with_hard_restarts' is not "
                 "one of cosine, linear, constant, wsd, cosine_with_restarts, polynomial, inverse_sqrt");
}

/* Every case of tests/fixtures/schedules/expected.json (transformers' get_scheduler, by Hugging
 * Face's scheduler names and lr_scheduler_kwargs): the recipe reads the name and the kwargs, and
 * the schedule gives the lr HF gave every step. The same double operations in the same order,
 * cos, pow and sqrt from the C library as Python's math takes them: within 1e-13 relative (a few
 * roundings of 2⁻⁵³ are 1e-15). zt's cosine stays at its floor past the end where HF's rises
 * again (schedule.h): those steps are not compared. */
static void test_hf_schedules(void)
{
    char *text;
    size_t len;
    ZT_ASSERT(zt_read_file("tests/fixtures/schedules/expected.json", &text, &len) == ZT_OK);
    cJSON *doc = cJSON_ParseWithLength(text, len), *c, *kv;
    free(text);
    int compared = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases"))
    {
        const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
        double lr = cJSON_GetObjectItem(c, "lr")->valuedouble;
        long W = (long)cJSON_GetObjectItem(c, "warmup_steps")->valuedouble;
        long S = (long)cJSON_GetObjectItem(c, "total_steps")->valuedouble;
        char recipe[512];
        int n = snprintf(recipe, sizeof recipe,
                         "[train]\nlr_scheduler_type = \"%s\"\nlearning_rate = %.17g\nwarmup_steps = %ld\n"
                         "lr_scheduler_kwargs = {",
                         name, lr, W);
        cJSON_ArrayForEach(kv, cJSON_GetObjectItem(c, "kwargs"))
        {
            n += snprintf(recipe + n, sizeof recipe - n, "%s%s = %.17g",
                          kv == cJSON_GetObjectItem(c, "kwargs")->child ? "" : ", ", kv->string, kv->valuedouble);
        }
        snprintf(recipe + n, sizeof recipe - n, "}\n");
        zt_recipe r;
        CHECK_MSG(load_text(&r, recipe, 0, NULL) == ZT_OK, "%s: %s", recipe, zt_errmsg());
        zt_schedule s;
        CHECK_MSG(zt_schedule_init(&s, r.train.lr_scheduler_type, r.train.learning_rate, S, r.train.warmup_steps,
                                   r.train.warmup_ratio, r.train.min_lr_ratio, r.train.decay_ratio,
                                   &r.train.lr_kwargs) == ZT_OK,
                  "%s", zt_errmsg());
        zt_recipe_free(&r);
        int cosine = strstr(name, "cosine") && !strstr(name, "restarts");
        long k = 1;
        cJSON_ArrayForEach(kv, cJSON_GetObjectItem(c, "lrs"))
        {
            double want = kv->valuedouble, got = zt_schedule_lr(&s, k);
            if (!cosine || k <= S + 1) {
                CHECK_MSG(fabs(got - want) <= 1e-13 * fabs(want), "%s %s, step %ld: zt %.17g, HF %.17g", name, recipe,
                          k, got, want);
                compared++;
            }
            k++;
        }
    }
    CHECK_MSG(compared > 500, "%d learning rates compared", compared);
    cJSON_Delete(doc);
}

/* lr_scheduler_kwargs the schedule does not take, or out of range, name the key */
static void test_schedule_kwargs_errors(void)
{
    static const char *const refused[][2] = {
        {"[train]\nlr_scheduler_kwargs = {power = 2}\n",
         "@:2:1: train.lr_scheduler_kwargs: the cosine schedule takes no 'power' (it takes: num_cycles min_lr_rate "
         "min_lr )"},
        {"[train]\nlr_scheduler_type = \"linear\"\nlr_scheduler_kwargs = {num_cycles = 2}\n",
         "@:3:1: train.lr_scheduler_kwargs: the linear schedule takes no 'num_cycles' (it takes: nothing )"},
        {"[train]\nlr_scheduler_type = \"inverse_sqrt\"\nlr_scheduler_kwargs = {timescale = 20}\n",
         "@:3:1: train.lr_scheduler_kwargs: the inverse_sqrt schedule takes no 'timescale' (it takes: nothing )"},
        {"[train]\nlr_scheduler_type = \"polynomial\"\nlr_scheduler_kwargs = {lr_end = -1}\n",
         "@:3:1: train.lr_scheduler_kwargs: 'lr_end' is out of range (a number >= 0)"},
        {"[train]\nlr_scheduler_type = \"cosine_with_restarts\"\nlr_scheduler_kwargs = {num_cycles = \"2\"}\n",
         "@:3:1: train.lr_scheduler_kwargs: 'num_cycles' is out of range (a number above 0)"},
        {"[train]\nlr_scheduler_type = \"polynomial\"\nlearning_rate = 1e-8\n",
         "@:3:1: train.lr_scheduler_kwargs: the polynomial schedule's lr_end 1e-07 (1e-7 unless set) must be below "
         "train.learning_rate 1e-08"},
        {"[train]\nmin_lr_ratio = 0.1\nlr_scheduler_kwargs = {min_lr_rate = 0.2}\n",
         "@:3:1: train.lr_scheduler_kwargs' min_lr_rate and train.min_lr_ratio are both set; use one"},
        {"[train]\nlr_scheduler_kwargs = {min_lr_rate = 0.2, min_lr = 1e-6}\n",
         "@:2:1: train.lr_scheduler_kwargs: min_lr_rate and min_lr are both set; use one"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) EXPECT_ERROR(refused[i][0], 0, NULL, refused[i][1]);
}

static void test_docs(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(zt_recipe_write_docs(f) == ZT_OK);
    fclose(f);
    int n;
    const zt_recipe_key *s = zt_recipe_schema(&n);
    for (int i = 0; i < n; i++) {
        char row[128];
        snprintf(row, sizeof row, "| `%s` |", s[i].key);
        CHECK_MSG(strstr(text, row), "%s missing from the docs", s[i].key);
    }
    CHECK(strstr(text, "## [offload.aio]") && strstr(text, "`fp32`, `bf16`, `fp16`") &&
          strstr(text, "or a `.jinja` file"));
    const char *update = getenv("ZT_UPDATE_DOCS");
    if (update && !strcmp(update, "1")) {
        FILE *out = fopen("docs/recipe.md", "w");
        CHECK_MSG(out && fwrite(text, 1, len, out) == len && fclose(out) == 0, "cannot write docs/recipe.md");
        fprintf(stderr, "  wrote docs/recipe.md\n");
    }
    FILE *in = fopen("docs/recipe.md", "r");
    CHECK_MSG(in != NULL, "docs/recipe.md not found: run from the repository root");
    if (in) {
        char *have = malloc(len + 2);
        size_t got = fread(have, 1, len + 1, in);
        fclose(in);
        CHECK_MSG(got == len && !memcmp(have, text, len),
                  "docs/recipe.md is out of date: run ZT_UPDATE_DOCS=1 build/tests/test_recipe");
        free(have);
    }
    free(text);
}

/* [lora]: the names as PEFT writes them, and the combinations refused naming the key */
static void test_lora(void)
{
    zt_recipe r;
    CHECK(load_text(&r, "[lora]\nr = 8\nalpha = 16\ntarget_modules = [\"q_proj\", \"down_proj\"]\n", 0, NULL) == ZT_OK);
    CHECK(zt_recipe_lora_on(&r) && zt_recipe_lora_targets(&r) == (1u << ZT_LORA_Q | 1u << ZT_LORA_DOWN));
    zt_recipe_free(&r);
    CHECK(load_text(&r, "[lora]\nr = 4\ntarget_modules = \"all-linear\"\n", 0, NULL) == ZT_OK);
    CHECK(zt_recipe_lora_targets(&r) == ZT_LORA_ALL && r.lora.alpha == 8); /* PEFT's default lora_alpha */
    zt_recipe_free(&r);
    CHECK(load_text(&r, "[lora]\ntarget_modules = \"nonsense\"\n", 0, NULL) == ZT_OK); /* off: not checked */
    CHECK(!zt_recipe_lora_on(&r));
    zt_recipe_free(&r);
    EXPECT_ERROR(
        "[lora]\nr = 8\ntarget_modules = [\"q_proj\", \"qproj\"]\n", 0, NULL,
        "@:3:1: lora.target_modules: 'qproj' is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, "
        "down_proj, qkv_proj, gate_up_proj, gate, shared_expert_gate, w1, w2, w3, or \"all-linear\" alone");
    EXPECT_ERROR("[lora]\nr = 8\ntarget_modules = [\"all-linear\", \"q_proj\"]\n", 0, NULL,
                 "@:3:1: lora.target_modules: 'all-linear' is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, "
                 "up_proj, down_proj, qkv_proj, gate_up_proj, gate, shared_expert_gate, w1, w2, w3, or \"all-linear\" "
                 "alone");
    EXPECT_ERROR("[lora]\nr = 8\nalpha = 0\n", 0, NULL, "@:3:9: lora.alpha: must be > 0, got 0");
    EXPECT_ERROR("[lora]\nr = 8\nadapter = \"a\"\n", 0, NULL,
                 "@:3:1: lora.adapter supplies r, alpha and target_modules from its adapter_config.json: leave lora.r "
                 "at 0 (it is 8)");
    /* trainable tokens: ids kept as their decimal text and written back as integers, tokens as strings */
    char *ids[] = {"lora.trainable_token_indices=[7, 9]"}, *bare[] = {"lora.trainable_token_indices=[<s>, 4]"},
         *one[] = {"lora.trainable_token_indices=3"};
    CHECK(load_text(&r, "[lora]\nr = 8\ntrainable_token_indices = [5, \"<|im_end|>\", 151643]\n", 0, NULL) == ZT_OK);
    CHECK(r.lora.trainable_token_indices.n == 3 && !strcmp(r.lora.trainable_token_indices.items[2], "151643") &&
          !strcmp(r.lora.trainable_token_indices.items[1], "<|im_end|>"));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    zt_recipe_write_value(f, &r, zt_recipe_find("lora", "trainable_token_indices"));
    fclose(f);
    CHECK_MSG(!strcmp(text, "[5, \"<|im_end|>\", 151643]"), "%s", text);
    free(text);
    zt_recipe_free(&r);
    CHECK(load_text(&r, "[lora]\nr = 8\n", 1, ids) == ZT_OK);
    CHECK(r.lora.trainable_token_indices.n == 2 && !strcmp(r.lora.trainable_token_indices.items[1], "9"));
    zt_recipe_free(&r);
    CHECK(load_text(&r, "[lora]\nr = 8\n", 1, bare) == ZT_OK);
    CHECK(r.lora.trainable_token_indices.n == 2 && !strcmp(r.lora.trainable_token_indices.items[0], "<s>"));
    zt_recipe_free(&r);
    CHECK(load_text(&r, "[lora]\nr = 8\nlayers_to_transform = [3, 1]\n", 0, NULL) == ZT_OK); /* integers alone */
    f = open_memstream(&text, &len);
    zt_recipe_write_value(f, &r, zt_recipe_find("lora", "layers_to_transform"));
    fclose(f);
    CHECK_MSG(!strcmp(text, "[3, 1]"), "%s", text);
    free(text);
    zt_recipe_free(&r);
    EXPECT_ERROR("[lora]\nr = 8\nlayers_to_transform = [\"1\"]\n", 0, NULL,
                 "@:3:23: lora.layers_to_transform: expected integers from 0, got a string");
    CHECK(load_text(&r, "[lora]\nr = 8\n", 1, one) == ZT_OK);
    CHECK(r.lora.trainable_token_indices.n == 1 && !strcmp(r.lora.trainable_token_indices.items[0], "3"));
    zt_recipe_free(&r);
    EXPECT_ERROR("[lora]\nr = 8\ntrainable_token_indices = [1.5]\n", 0, NULL,
                 "@:3:27: lora.trainable_token_indices: expected token ids (integers from 0) or tokens (strings), got "
                 "a float");
    EXPECT_ERROR("[lora]\nr = 8\ntrainable_token_indices = [3, -1]\n", 0, NULL,
                 "@:3:27: lora.trainable_token_indices: a token id below 0 or above 2147483647");
    EXPECT_ERROR("[lora]\nr = 8\ntrainable_token_indices = [\"12\"]\n", 0, NULL,
                 "@:3:27: lora.trainable_token_indices: '12': a token id is written as a number, not a string");
    EXPECT_ERROR("[lora]\ntrainable_token_indices = [3]\n", 0, NULL,
                 "@:2:1: lora.trainable_token_indices trains rows beside LoRA's adapters: set lora.r too");
    /* stage 3 shards the frozen base, offload.param streams it, on either backend */
    CHECK(load_text(&r, "[zero]\nstage = 3\n[lora]\nr = 8\n", 0, NULL) == ZT_OK);
    CHECK(zt_recipe_check_world(&r, 1, 1) == ZT_OK && zt_recipe_check_world(&r, 2, 2) == ZT_OK);
    zt_recipe_free(&r);
    CHECK(load_text(&r, "[model]\ndevice = \"cuda\"\n[zero]\nstage = 3\n[offload]\nparam = \"cpu\"\n[lora]\nr = 8\n", 0,
                    NULL) == ZT_OK);
    CHECK(zt_recipe_check_world(&r, 1, 1) == ZT_OK && zt_recipe_check_world(&r, 2, 2) == ZT_OK);
    zt_recipe_free(&r);
    /* the base's swap file holds it alone: the adapters' moments may stay in memory */
    CHECK(load_text(&r, "[zero]\nstage = 3\n[offload]\nparam = \"nvme\"\noptimizer = \"cpu\"\n[lora]\nr = 8\n", 0,
                    NULL) == ZT_OK);
    zt_recipe_free(&r);
    EXPECT_ERROR("[zero]\nstage = 3\nquantized_gradients = true\n[lora]\nr = 8\n", 0, NULL,
                 "@:3:1: zero.quantized_gradients (qgZ) quantizes the gradients ZeRO stage 3 reduce-scatters; with "
                 "LoRA (lora.r, lora.adapter) there are none: the frozen base has no gradient and the adapters' are "
                 "reduced exactly");
}

/* rlhf keys of one algorithm set for another name both keys' place */
static void test_algorithm_keys(void)
{
    static const char *const refused[][2] = {
        {"[rlhf]\nloss_type = \"dapo\"\n", "@:2:1: rlhf.loss_type = \"dapo\" is GRPO's, not dpo's"},
        {"[rlhf]\nalgorithm = \"grpo\"\nloss_type = \"ipo\"\n", "@:3:1: rlhf.loss_type = \"ipo\" is DPO's, not grpo's"},
        {"[rlhf]\nscale_rewards = \"none\"\nalgorithm = \"ppo\"\n", "@:3:1: rlhf.scale_rewards is GRPO's, not ppo's"},
        {"[rlhf]\ncliprange_high = 0.28\n", "@:2:1: rlhf.cliprange_high is GRPO's, not dpo's"},
        {"[rlhf]\nloss_type = \"kto\"\n", "@:2:1: rlhf.loss_type = \"kto\" is KTO's, not dpo's"},
        {"[rlhf]\nalgorithm = \"kto\"\nloss_type = \"sigmoid\"\n",
         "@:3:1: rlhf.loss_type = \"sigmoid\" is DPO's, not kto's"},
        {"[rlhf]\ndesirable_weight = 1.33\nalgorithm = \"grpo\"\n",
         "@:3:1: rlhf.desirable_weight is KTO's, not grpo's"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) EXPECT_ERROR(refused[i][0], 0, NULL, refused[i][1]);
    zt_recipe r;
    CHECK(load_text(&r,
                    "[rlhf]\nalgorithm = \"grpo\"\nloss_type = \"dr_grpo\"\nscale_rewards = \"batch\"\n"
                    "mask_truncated_completions = true\ncliprange_high = 0.28\n",
                    0, NULL) == ZT_OK);
    CHECK(r.rlhf.loss_type == ZT_RLHF_LOSS_DR_GRPO && r.rlhf.scale_rewards == ZT_RLHF_SCALE_BATCH &&
          r.rlhf.mask_truncated_completions && r.rlhf.cliprange_high == 0.28);
    zt_recipe_free(&r);
    CHECK(load_text(&r,
                    "[rlhf]\nalgorithm = \"kto\"\nloss_type = \"apo_zero_unpaired\"\ndesirable_weight = 1.33\n"
                    "undesirable_weight = 0.5\n",
                    0, NULL) == ZT_OK);
    CHECK(r.rlhf.loss_type == ZT_RLHF_LOSS_APO_ZERO_UNPAIRED && r.rlhf.desirable_weight == 1.33 &&
          r.rlhf.undesirable_weight == 0.5);
    zt_recipe_free(&r);
}

int main(void)
{
    if (!getcwd(cwd, sizeof cwd)) return 1;
    snprintf(tmp, sizeof tmp, "/tmp/zt_test_recipe_XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    snprintf(home, sizeof home, "%s/home", tmp);
    mkdir(home, 0755);
    setenv("HOME", home, 1);
    RUN(test_defaults);
    RUN(test_full_recipe);
    RUN(test_other_forms);
    RUN(test_file_errors);
    RUN(test_overrides);
    RUN(test_home);
    RUN(test_round_trip);
    RUN(test_data_hash);
    RUN(test_check_world);
    RUN(test_schema);
    RUN(test_enum_values);
    RUN(test_hf_schedules);
    RUN(test_schedule_kwargs_errors);
    RUN(test_algorithm_keys);
    RUN(test_docs);
    RUN(test_lora);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    return test_summary();
}

/* zt-test-tool: what the shell tests (tests/cli) need to know of zt's internals, computed by
 * zt's own code, so that no test works it out a second way. Built for the tests only (make
 * tests: BUILD/zt-test-tool); tests/cli/lib.sh runs it as $TEST_TOOL.
 *
 *     zt-test-tool layout MODEL_DIR [--world N] [--stage S]
 *
 * layout: the flat parameter array of MODEL_DIR/config.json (lib/model/llama_layout.c), one
 * record a line, fields separated by spaces:
 *     numel N                          the array's elements
 *     tensor NAME SHAPE OFFSET NUMEL   each tensor in the array's order; SHAPE is 64x32 or 32
 *     unit I KIND OFFSET NUMEL         each unit ZeRO stage 3 gathers on its own, KIND embedding,
 *                                      layer.L or head (the final norm and the LM head)
 * and, with --world or --stage (defaults 1 and 3, the recipe's zero.stage), what each rank of
 * the world updates at that stage (lib/zero/zero.h, zt_zero_segments):
 *     segment RANK LO HI LOCAL         elements [LO, HI) of the array, at LOCAL in the rank's own
 *     rank RANK NUMEL                  the rank's elements, all its segments together
 *     zt-test-tool moments8 MODEL_DIR CHECKPOINT_DIR [--world N] [--stage S]
 *
 * moments8: the AdamW moments of a checkpoint of train.optim = "adamw_8bit" (lib/zero/optstate8.h)
 * read as 8-bit blocks, each tensor of 4096 elements or more in blocks of 256 from its start:
 *     blocks N    the blocks
 *     exact N     those whose m and whose v are each code · absmax for one absmax (zt_adamw8_recover
 *                 gives back every value), as one process would have quantized them
 *     cut N       those that the boundaries between the ranks of world N at stage S cut
 *     zt-test-tool gguf FILE
 *
 * gguf: what a GGUF file (zt export --format gguf) holds, a line a key or tensor in the file's
 * order, its values' bytes as stored (after the type) given whole when 8 or fewer, else by their
 * CRC-32C and length:
 *     kv KEY TYPE HEX | kv KEY TYPE crc CRC len N
 *     tensor NAME TYPE DIMS crc CRC    DIMS innermost first (64x151936), TYPE GGML's number
 * Bad arguments or a bad config.json: a message, exit 2 (as zt's commands).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ckpt/state.h"
#include "lib/core/crc32c.h"
#include "lib/core/fileio.h"
#include "lib/core/status.h"
#include "lib/model/llama.h"
#include "lib/optim/adamw8bit.h"
#include "lib/zero/zero.h"

static int usage(void)
{
    fprintf(stderr, "usage: zt-test-tool layout MODEL_DIR [--world N] [--stage S]\n"
                    "       zt-test-tool moments8 MODEL_DIR CHECKPOINT_DIR [--world N] [--stage S]\n"
                    "       zt-test-tool gguf FILE\n");
    return 2;
}

static int fail(zt_status st)
{
    fprintf(stderr, "zt-test-tool: error: %s\n", zt_errmsg());
    return zt_exit_code(st);
}

/* value as an integer in [lo, hi], or -1 */
static long parse_int(const char *value, long lo, long hi)
{
    char *end;
    long v = strtol(value, &end, 10);
    return *value && !*end && v >= lo && v <= hi ? v : -1;
}

static void print_tensors(const zt_llama_config *c)
{
    zt_llama_tensor *t;
    int n;
    ZT_ASSERT(zt_llama_tensors(c, &t, &n) == ZT_OK); /* the config was checked by zt_llama_shape */
    for (int i = 0; i < n; i++) {
        size_t numel = (size_t)t[i].shape[0] * (t[i].ndim == 2 ? (size_t)t[i].shape[1] : 1);
        printf("tensor %s %lld", t[i].name, (long long)t[i].shape[0]);
        if (t[i].ndim == 2) printf("x%lld", (long long)t[i].shape[1]);
        printf(" %zu %zu\n", t[i].offset, numel);
    }
    free(t);
}

/* unit i's kind: embedding, layer.L or head */
static void unit_kind(const zt_llama *m, int i, char *out, size_t cap)
{
    if (i < zt_llama_layer_unit(m, 0)) {
        snprintf(out, cap, "embedding");
        return;
    }
    if (i >= zt_llama_head_unit(m)) {
        snprintf(out, cap, "head");
        return;
    }
    int l = 0;
    while (zt_llama_layer_unit(m, l + 1) <= i) l++;
    snprintf(out, cap, "layer.%d", l);
}

static void print_units(const zt_llama *m)
{
    for (int i = 0; i < zt_llama_units(m); i++) {
        size_t off, n;
        char kind[32];
        zt_llama_unit_range(m, i, &off, &n);
        unit_kind(m, i, kind, sizeof kind);
        printf("unit %d %s %zu %zu\n", i, kind, off, n);
    }
}

static int print_segments(const zt_llama *m, int world, int stage)
{
    zt_zero_segment *seg = malloc((size_t)zt_zero_nsegments(m, stage) * sizeof *seg);
    if (!seg) return fail(zt_fail(ZT_ENOMEM, "out of memory"));
    for (int r = 0; r < world; r++) {
        int n;
        size_t local = zt_zero_segments(m, stage, world, r, seg, &n);
        for (int i = 0; i < n; i++) printf("segment %d %zu %zu %zu\n", r, seg[i].lo, seg[i].hi, seg[i].local);
        printf("rank %d %zu\n", r, local);
    }
    free(seg);
    return 0;
}

typedef struct args {
    const char *dir[2];
    long world, stage;
    int partition; /* --world or --stage given */
} args;

/* ndir directories and the options; 0, or -1 for a bad command line */
static int parse_args(int argc, char **argv, int ndir, args *a)
{
    *a = (args){{NULL, NULL}, 1, 3, 0};
    int dirs = 0;
    for (int i = 0; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--world")) {
            if ((a->world = parse_int(argv[++i], 1, 1 << 20)) < 0) return -1;
            a->partition = 1;
        } else if (i + 1 < argc && !strcmp(argv[i], "--stage")) {
            if ((a->stage = parse_int(argv[++i], 0, 3)) < 0) return -1;
            a->partition = 1;
        } else if (dirs < ndir && argv[i][0] != '-') {
            a->dir[dirs++] = argv[i];
        } else {
            return -1;
        }
    }
    return dirs == ndir ? 0 : -1;
}

static zt_status shape_of(const char *dir, zt_llama_config *c, zt_llama *m)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    zt_status st = zt_llama_config_load(c, path);
    return st ? st : zt_llama_shape(m, c, zt_backend_cpu(), ZT_F32);
}

static int cmd_layout(int argc, char **argv)
{
    args a;
    if (parse_args(argc, argv, 1, &a)) return usage();
    zt_llama_config c;
    zt_llama m;
    zt_status st = shape_of(a.dir[0], &c, &m);
    if (st) return fail(st);
    printf("numel %zu\n", m.numel);
    print_tensors(&c);
    print_units(&m);
    return a.partition ? print_segments(&m, (int)a.world, (int)a.stage) : 0;
}

/* whether a boundary between the ranks of world at stage lies inside [lo, hi) */
static int is_cut(const zt_llama *m, int world, int stage, size_t lo, size_t hi, zt_zero_segment *seg)
{
    for (int r = 1; r < world; r++) {
        int n;
        zt_zero_segments(m, stage, world, r, seg, &n);
        for (int i = 0; i < n; i++)
            if (seg[i].lo > lo && seg[i].lo < hi) return 1;
    }
    return 0;
}

static int cmd_moments8(int argc, char **argv)
{
    args a;
    if (parse_args(argc, argv, 2, &a)) return usage();
    zt_llama_config c;
    zt_llama m;
    zt_llama_tensor *t;
    int n;
    zt_status st = shape_of(a.dir[0], &c, &m);
    if (st || (st = zt_llama_tensors(&c, &t, &n))) return fail(st);
    zt_zero_segment *seg = malloc((size_t)zt_zero_nsegments(&m, (int)a.stage) * sizeof *seg);
    if (!seg) return fail(zt_fail(ZT_ENOMEM, "out of memory"));
    size_t blocks = 0, exact = 0, cut = 0;
    for (int i = 0; i < n && !st; i++) {
        size_t numel = (size_t)t[i].shape[0] * (t[i].ndim == 2 ? (size_t)t[i].shape[1] : 1);
        if (numel < ZT_ADAMW8_MIN_NUMEL) continue;
        for (size_t b = 0; b < numel && !st; b += ZT_ADAMW8_BLOCK) {
            size_t k = numel - b < ZT_ADAMW8_BLOCK ? numel - b : ZT_ADAMW8_BLOCK, lo = t[i].offset + b;
            float mv[2][ZT_ADAMW8_BLOCK], back[ZT_ADAMW8_BLOCK];
            uint8_t q[ZT_ADAMW8_BLOCK];
            if ((st = zt_state_read_range(a.dir[1], m.numel, lo, k, NULL, mv[0], mv[1]))) break;
            int same = 1;
            for (int j = 0; j < 2; j++) {
                float absmax = zt_adamw8_recover(zt_adamw8_map(j), mv[j], k, q);
                zt_adamw8_dequantize(zt_adamw8_map(j), q, k, absmax, back);
                same &= !memcmp(back, mv[j], k * sizeof *back);
            }
            blocks++, exact += same, cut += is_cut(&m, (int)a.world, (int)a.stage, lo, lo + k, seg);
        }
    }
    free(seg), free(t);
    if (st) return fail(st);
    printf("blocks %zu\nexact %zu\ncut %zu\n", blocks, exact, cut);
    return 0;
}

/* --- gguf ---------------------------------------------------------------------------------- */

typedef struct cursor {
    const unsigned char *p;
    size_t n, at;
    int bad;
} cursor;

static const unsigned char *take(cursor *c, size_t k)
{
    if (c->bad || k > c->n - c->at) return c->bad = 1, NULL;
    c->at += k;
    return c->p + c->at - k;
}

static uint64_t take_u(cursor *c, size_t k) /* little-endian, k of 1, 4, 8 bytes */
{
    const unsigned char *q = take(c, k);
    uint64_t v = 0;
    for (size_t i = 0; q && i < k; i++) v |= (uint64_t)q[i] << (8 * i);
    return v;
}

static const char *take_str(cursor *c, int *len)
{
    uint64_t n = take_u(c, 8);
    const unsigned char *q = n < (1u << 30) ? take(c, n) : (c->bad = 1, NULL);
    *len = (int)n;
    return (const char *)q;
}

static void skip_value(cursor *c, uint32_t type, int depth)
{
    static const size_t size[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type == 8) {
        int len;
        take_str(c, &len);
    } else if (type == 9 && depth == 0) {
        uint32_t item = (uint32_t)take_u(c, 4);
        uint64_t n = take_u(c, 8);
        for (uint64_t i = 0; i < n && !c->bad; i++) skip_value(c, item, 1);
    } else if (type < 13 && size[type]) {
        take(c, size[type]);
    } else {
        c->bad = 1;
    }
}

static int cmd_gguf(int argc, char **argv)
{
    char *data;
    size_t len;
    if (argc != 1) return usage();
    zt_status st = zt_read_file(argv[0], &data, &len);
    if (st) return fail(st);
    cursor c = {(const unsigned char *)data, len, 0, 0};
    const unsigned char *magic = take(&c, 4);
    uint32_t version = (uint32_t)take_u(&c, 4);
    uint64_t nt = take_u(&c, 8), nkv = take_u(&c, 8), align = 32;
    if (!magic || memcmp(magic, "GGUF", 4) || version != 3) c.bad = 1;
    for (uint64_t i = 0; i < nkv && !c.bad; i++) {
        int klen;
        const char *k = take_str(&c, &klen);
        uint32_t type = (uint32_t)take_u(&c, 4);
        size_t from = c.at;
        skip_value(&c, type, 0);
        if (c.bad) break;
        if (klen == 17 && !memcmp(k, "general.alignment", 17)) align = c.p[from] | (uint32_t)c.p[from + 1] << 8;
        printf("kv %.*s %u ", klen, k, type);
        if (c.at - from <= 8)
            for (size_t j = from; j < c.at; j++) printf("%02x", c.p[j]);
        else printf("crc %08x len %zu", zt_crc32c(0, c.p + from, c.at - from), c.at - from);
        printf("\n");
    }
    size_t info = c.at;
    for (uint64_t i = 0; i < nt && !c.bad; i++) { /* the infos first: the data starts after the last */
        int nlen;
        take_str(&c, &nlen);
        uint32_t nd = (uint32_t)take_u(&c, 4);
        for (uint32_t d = 0; d < nd && d < 4; d++) take_u(&c, 8);
        take(&c, 12); /* type, offset */
        if (nd < 1 || nd > 4) c.bad = 1;
    }
    size_t base = (c.at + align - 1) / align * align;
    c.at = info;
    for (uint64_t i = 0; i < nt && !c.bad; i++) {
        int nlen;
        const char *name = take_str(&c, &nlen);
        uint32_t nd = (uint32_t)take_u(&c, 4);
        uint64_t dims[4], numel = 1;
        for (uint32_t d = 0; d < nd; d++) numel *= dims[d] = take_u(&c, 8);
        uint32_t type = (uint32_t)take_u(&c, 4);
        uint64_t off = take_u(&c, 8);
        uint64_t bytes = type == 0 ? 4 * numel : type == 1 || type == 30 ? 2 * numel : type == 8 ? numel / 32 * 34 : 0;
        if (!bytes || off % align || base + off + bytes > len) {
            c.bad = 1;
            break;
        }
        printf("tensor %.*s %u ", nlen, name, type);
        for (uint32_t d = 0; d < nd; d++) printf("%s%llu", d ? "x" : "", (unsigned long long)dims[d]);
        printf(" crc %08x\n", zt_crc32c(0, c.p + base + off, bytes));
    }
    free(data);
    if (c.bad) {
        fprintf(stderr, "zt-test-tool: error: '%s': not a GGUF file zt-test-tool reads (at byte %zu)\n", argv[0], c.at);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "layout")) return cmd_layout(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "moments8")) return cmd_moments8(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "gguf")) return cmd_gguf(argc - 2, argv + 2);
    return usage();
}

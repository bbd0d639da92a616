/* offload.* = "auto" (placement.h). */
#include "lib/core/log.h"
#include "placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lib/backend/backend.h"
#include "lib/core/fileio.h"
#include "lib/offload/aio.h"
#include "memory.h"

enum { PROBE_BYTES = 256 << 20 }; /* a second or so at a virtual disk's speed, each pass */

/* MemAvailable from /proc/meminfo, in bytes (0 when unreadable) */
static size_t host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (size_t)kb << 10;
}

/* What a rank has where it computes: ZT_MEMORY_AVAILABLE, else the GPU's memory, else its share of
 * the host's available memory. */
static zt_status memory_of(const zt_recipe *r, int ranks_per_node, int *gpu, size_t *have)
{
    const char *test = getenv("ZT_MEMORY_AVAILABLE");
    zt_backend *be;
    zt_status st = zt_backend_open(r->model.device, &be); /* "auto" as the run will resolve it */
    if (st) return st;
    *gpu = be->memory_bytes > 0;
    if (test && test[0]) *have = (size_t)strtoull(test, NULL, 10);
    else if (*gpu) *have = be->memory_bytes;
    else *have = host_available() / (size_t)(ranks_per_node > 0 ? ranks_per_node : 1);
    return ZT_OK;
}

/* PROBE_BYTES written, rewritten and read back through the engine in dir (O_DIRECT, the
 * recipe's blocks); the rewrite is the write speed that counts, as a swap file is filled
 * once before the first step and rewritten in place from then on. */
static zt_status measure_disk(const zt_recipe *r, const char *dir, double *rd, double *wr)
{
    zt_aio *a;
    zt_aio_file f;
    zt_aio_req q;
    char *buf = zt_aio_alloc(PROBE_BYTES), name[64];
    snprintf(name, sizeof name, "zt-probe-%ld", (long)getpid());
    zt_status st = buf ? zt_aio_open(&a, (size_t)r->offload.aio.block_size, r->offload.aio.queue_depth)
                       : zt_fail(ZT_ENOMEM, "out of memory for the disk probe");
    if (st) {
        zt_aio_free(buf);
        return st;
    }
    memset(buf, 0x5a, PROBE_BYTES);
    const char *paths[] = {dir};
    if (!(st = zt_aio_file_open(a, &f, paths, 1, name))) {
        double t0 = 0;
        if (!(st = zt_aio_file_reserve(a, &f, PROBE_BYTES)) && !(st = zt_aio_write(a, &f, buf, PROBE_BYTES, 0, &q)) &&
            !(st = zt_aio_wait(a, &q)) && (t0 = zt_now_s()) && !(st = zt_aio_write(a, &f, buf, PROBE_BYTES, 0, &q)) &&
            !(st = zt_aio_wait(a, &q))) {
            double t1 = zt_now_s();
            if (!(st = zt_aio_read(a, &f, buf, PROBE_BYTES, 0, &q)) && !(st = zt_aio_wait(a, &q))) {
                *wr = PROBE_BYTES / (t1 - t0);
                *rd = PROBE_BYTES / (zt_now_s() - t1);
            }
        }
        zt_aio_file_close(&f, 1);
    }
    zt_aio_close(a);
    zt_aio_free(buf);
    return st;
}

/* The disk under offload.nvme_path's first directory: measured once per file system, then
 * read from ~/.cache/zt/disk2-<device>.txt (2: the write is a rewrite's). */
zt_status zt_disk_bandwidth(const zt_recipe *r, double *rd, double *wr)
{
    const char *dir = r->offload.nvme_path.n ? r->offload.nvme_path.items[0] : ".", *home = getenv("HOME");
    char cache[4200] = "", *text = NULL;
    size_t len;
    struct stat sb;
    zt_status st = zt_mkdir_p(dir);
    if (st) return st;
    if (home && !stat(dir, &sb))
        snprintf(cache, sizeof cache, "%s/.cache/zt/disk2-%llx.txt", home, (unsigned long long)sb.st_dev);
    if (cache[0] && !zt_read_file(cache, &text, &len) && zt_disk_cache_parse(text, rd, wr)) {
        free(text);
        return ZT_OK;
    }
    free(text);
    if ((st = measure_disk(r, dir, rd, wr))) return st;
    char line[128], parent[4200];
    size_t n = zt_disk_cache_format(line, sizeof line, *rd, *wr);
    snprintf(parent, sizeof parent, "%s/.cache/zt", home ? home : ".");
    if (n && cache[0] && !zt_mkdir_p(parent)) zt_write_file_atomic(cache, line, n); /* a cache: failing is fine */
    return ZT_OK;
}

/* The estimate with these placements: what the rank needs where it computes. */
static zt_status need_with(const zt_recipe *r, int world, int rpn, int gpu, zt_offload_tier opt, zt_offload_tier param,
                           size_t *need)
{
    zt_recipe trial = *r; /* shares r's strings: only the enums below change */
    trial.model.device = gpu ? ZT_DEVICE_CUDA : ZT_DEVICE_CPU;
    trial.offload.optimizer = opt;
    trial.offload.param = param;
    zt_mem_estimate e;
    zt_status st = zt_memory_estimate(&trial, world, rpn, &e);
    *need = gpu ? e.device.total : e.total;
    return st;
}

zt_status zt_placement_decide(const zt_recipe *r, int world, int ranks_per_node, zt_placement *p)
{
    memset(p, 0, sizeof *p);
    p->optimizer = r->offload.optimizer, p->param = r->offload.param;
    int gpu;
    zt_status st = memory_of(r, ranks_per_node, &gpu, &p->have);
    if (st) return st;
    /* tiers, fastest first; host memory is a tier of its own only beside a GPU, the weights
     * leave only at stage 3, and go to NVMe only with the moments (they stream together) */
    zt_offload_tier opt_tiers[] = {ZT_OFFLOAD_NONE, ZT_OFFLOAD_CPU, ZT_OFFLOAD_NVME};
    zt_offload_tier param_tiers[] = {ZT_OFFLOAD_NONE, ZT_OFFLOAD_CPU, ZT_OFFLOAD_NVME};
    int nopt = 3, nparam = r->zero.stage == 3 ? 3 : 1;
    if (r->offload.optimizer != ZT_OFFLOAD_AUTO) opt_tiers[0] = r->offload.optimizer, nopt = 1;
    if (r->train.optim == ZT_OPTIM_ADAMW_8BIT) nopt = 1; /* its moments stay in memory (none) */
    if (r->offload.param != ZT_OFFLOAD_AUTO) param_tiers[0] = r->offload.param, nparam = 1;
    size_t budget = p->have / 10 * 9;
    int fits = 0;
    for (int i = 0; i < nparam && !fits; i++)
        for (int j = 0; j < nopt && !fits; j++) {
            if (!gpu &&
                ((nopt > 1 && opt_tiers[j] == ZT_OFFLOAD_CPU) || (nparam > 1 && param_tiers[i] == ZT_OFFLOAD_CPU)))
                continue; /* the same memory as none */
            if (param_tiers[i] == ZT_OFFLOAD_NVME && opt_tiers[j] != ZT_OFFLOAD_NVME) continue;
            p->param = param_tiers[i], p->optimizer = opt_tiers[j];
            if ((st = need_with(r, world, ranks_per_node, gpu, p->optimizer, p->param, &p->need))) return st;
            fits = p->need <= budget;
        }
    if (!fits)
        return zt_fail(ZT_EUSER,
                       "offload = \"auto\": even with offload.optimizer = \"%s\" and offload.param = \"%s\" a "
                       "rank needs %.1f MiB %s, and has %.1f MiB (90%% of it usable)",
                       zt_offload_tier_names[p->optimizer], zt_offload_tier_names[p->param], p->need / 1048576.0,
                       gpu ? "on its GPU" : "of memory", p->have / 1048576.0);
    return ZT_OK;
}

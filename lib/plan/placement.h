/* plan/placement: offload.optimizer / offload.param = "auto", decided from the memory each
 * placement needs (plan/memory.h) and the memory the machine has; and the disk's bandwidth.
 *
 * Tiers, fastest first: where the model computes (none), host memory (cpu; on the CPU backend
 * the same memory as none), NVMe files (nvme; the weights only at stage 3 and beside the
 * optimizer state). The optimizer
 * state and the weights each take the fastest tier with which the rank's whole estimate fits
 * in 90% of the memory available to it (MemAvailable split over the node's ranks; a GPU's
 * memory for model.device = "cuda"), the weights staying put as long as anything can move
 * instead. The disk under offload.nvme_path is measured once per file system (a short O_DIRECT
 * write, rewrite and read through the I/O engine, cached under ~/.cache/zt), so that `zt
 * validate` can show what a step moves and how long that takes.
 *
 *     zt_placement p;
 *     if ((st = zt_placement_decide(&r, world, ranks_per_node, &p))) return st;
 *     r.offload.optimizer = p.optimizer;   // none, cpu or nvme
 */
#ifndef ZT_PLAN_PLACEMENT_H
#define ZT_PLAN_PLACEMENT_H

#include <stddef.h>

#include "lib/core/status.h"
#include "lib/recipe/recipe.h"

typedef struct zt_placement {
    zt_offload_tier optimizer, param; /* the decisions (the recipe's own value where it is not auto) */
    size_t need, have;                /* bytes the chosen placement needs where it computes, and there are */
} zt_placement;

/* The disk under offload.nvme_path's first directory, bytes/s (measured once per file system). */
zt_status zt_disk_bandwidth(const zt_recipe *r, double *read, double *write);
/* Its cache file's text: 1 and the speeds when it is "read R write W" with both finite and
 * positive, else 0 (the disk is measured again). The line for it into line (size bytes);
 * its length, 0 when it does not fit. */
int zt_disk_cache_parse(const char *text, double *read, double *write);
size_t zt_disk_cache_format(char *line, size_t size, double read, double write);

/* ZT_MEMORY_AVAILABLE (bytes) stands in for the memory a rank has, for tests. */
zt_status zt_placement_decide(const zt_recipe *r, int world, int ranks_per_node, zt_placement *p);

#endif

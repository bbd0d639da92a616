/* offload/offload: what the recipe's [offload] section tells the modules that move state off
 * the device: where each kind of state lives (a tier) and how the NVMe files are written.
 *
 *     zt_offload_io io = {.nvme_paths = paths, .npaths = 1, .block_size = 1 << 20,
 *                         .queue_depth = 32, .max_pinned_bytes = (size_t)4 << 30};
 */
#ifndef ZT_OFFLOAD_OFFLOAD_H
#define ZT_OFFLOAD_OFFLOAD_H

#include <stddef.h>

/* offload.optimizer, offload.param and offload.activations (which has no auto). */
typedef enum zt_offload_tier { ZT_OFFLOAD_NONE, ZT_OFFLOAD_CPU, ZT_OFFLOAD_NVME, ZT_OFFLOAD_AUTO } zt_offload_tier;
extern const char *const zt_offload_tier_names[4]; /* "none", "cpu", "nvme", "auto": indexed by the tier */

/* offload.nvme_path, offload.aio and offload.max_pinned_bytes. */
typedef struct zt_offload_io {
    const char *const *nvme_paths; /* the files are striped across these directories */
    int npaths;
    size_t block_size; /* bytes per I/O request */
    int queue_depth;   /* requests in flight */
    size_t max_pinned_bytes;
} zt_offload_io;

#endif

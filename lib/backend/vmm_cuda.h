/* vmm_cuda: device arrays whose memory goes back to the GPU and comes again in granules
 * (2 MiB), for the CUDA backend's discard and populate: ZeRO stage 3 keeps the flat parameter
 * and gradient arrays' addresses but holds memory only for the units in use.
 *
 *     if (zt_vmm_init(device)) p = zt_vmm_alloc(bytes, stream);   // mapped and zeroed
 *     zt_vmm_release(p + lo, n, s, d); // the granules wholly inside go back once stream d's work is done
 *     zt_vmm_populate(p + lo, n, s);   // every granule it touches mapped again, new ones zeroed
 *
 * Released granules are unmapped once the work queued before the release is done (an event),
 * and kept in a pool for the next populate: nothing waits for the device, and physical memory
 * is created only when the pool is empty, so the memory held never exceeds its earlier peak.
 * zt_vmm_trim gives the pool back to the GPU (when another allocation finds it full).
 */
#ifndef ZT_BACKEND_VMM_CUDA_H
#define ZT_BACKEND_VMM_CUDA_H

#include <stddef.h>

#include <cuda_runtime.h>

/* 1 when the device supports it (then zt_vmm_alloc may be used) */
int zt_vmm_init(int device);
void *zt_vmm_alloc(size_t bytes, cudaStream_t s); /* NULL when out of memory or not ready */
int zt_vmm_owns(const void *p);
void zt_vmm_free(void *p);
/* The granules wholly inside go back after the work queued on stream done so far (which must
 * include all work on the range); the rest of the range is zeroed on stream s. */
void zt_vmm_release(void *p, size_t bytes, cudaStream_t s, cudaStream_t done);
int zt_vmm_populate(void *p, size_t bytes, cudaStream_t s); /* 0 when out of memory */
void zt_vmm_trim(void); /* waits for every release, then gives the pooled granules back */

#endif

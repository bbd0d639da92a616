/* vmm_cuda: device arrays whose memory goes back to the GPU and comes again in granules
 * (2 MiB), for the CUDA backend's discard and populate: ZeRO stage 3 keeps the flat parameter
 * and gradient arrays' addresses but holds memory only for the units in use.
 *
 *     if (zt_vmm_init(device)) p = zt_vmm_alloc(bytes, stream);   // mapped and zeroed
 *     zt_vmm_release(p + lo, n, s);  // the granules wholly inside go back (stream synchronised first)
 *     zt_vmm_populate(p + lo, n, s); // every granule it touches mapped again, new ones zeroed
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
/* The granules wholly inside go back; the rest of the range reads as zeros. Only after the
 * work that reads the range is done. */
void zt_vmm_release(void *p, size_t bytes, cudaStream_t s);
int zt_vmm_populate(void *p, size_t bytes, cudaStream_t s); /* 0 when out of memory */

#endif

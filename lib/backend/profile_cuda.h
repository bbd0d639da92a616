/* profile_cuda: GPU time per CUDA backend entry (ZT_CUDA_PROFILE=1), see profile_cuda.c.
 *
 *     zt_cuda_profile_mark("rope");   zt_cuda_rope(stream, ...);    // as an entry starts
 *     zt_cuda_profile_sync();         cudaStreamSynchronize(stream);  zt_cuda_profile_synced();
 */
#ifndef ZT_BACKEND_PROFILE_CUDA_H
#define ZT_BACKEND_PROFILE_CUDA_H

#include <cuda_runtime.h>

void zt_cuda_profile_init(cudaStream_t s);
void zt_cuda_profile_mark(const char *what);
void zt_cuda_profile_sync(void);
void zt_cuda_profile_synced(void);

#endif

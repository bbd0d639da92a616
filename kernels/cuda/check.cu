#include "kernels/cuda/device.cuh"
#include "kernels/cuda/ops.h"

void zt_cuda_check(const char *what) { zt_cuda_ok(cudaGetLastError(), what); }

/* kernels/cpu/parallel: the slice [lo, hi) of [0, n) that the calling OpenMP
 * thread owns, for column-partitioned reductions that stay deterministic. */
#ifndef ZT_KERNELS_CPU_PARALLEL_H
#define ZT_KERNELS_CPU_PARALLEL_H

#ifdef _OPENMP
#include <omp.h>
#endif

static inline void zt_thread_range(long n, long *lo, long *hi)
{
    long nt = 1, t = 0;
#ifdef _OPENMP
    nt = omp_get_num_threads();
    t = omp_get_thread_num();
#endif
    *lo = n * t / nt;
    *hi = n * (t + 1) / nt;
}

#endif

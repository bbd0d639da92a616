/* kernels/cpu/parallel: the slice [lo, hi) of [0, n) that the calling OpenMP
 * thread owns, for column-partitioned reductions that stay deterministic; and a loop over
 * fixed pieces of [0, n) on the threads. */
#ifndef ZT_KERNELS_CPU_PARALLEL_H
#define ZT_KERNELS_CPU_PARALLEL_H

#include <stddef.h>

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

/* fn(ctx, i, k) for the pieces [i, i + k) of [0, n), `piece` long (the last shorter), on the
 * OpenMP threads; one call for all of it where n < min or inside a parallel region. */
static inline void zt_parallel_pieces(size_t n, size_t piece, size_t min, void (*fn)(void *ctx, size_t i, size_t k),
                                      void *ctx)
{
#ifdef _OPENMP
    if (n >= min && !omp_in_parallel()) {
        long pieces = (long)((n + piece - 1) / piece);
#pragma omp parallel for schedule(static)
        for (long c = 0; c < pieces; c++) {
            size_t i = (size_t)c * piece;
            fn(ctx, i, n - i < piece ? n - i : piece);
        }
        return;
    }
#endif
    fn(ctx, 0, n);
}

#endif

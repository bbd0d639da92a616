/* Bus bandwidth of zt's host collectives (lib/comm) next to Open MPI's own, nccl-tests
 * style: size is all-gather's output, reduce-scatter's input and all-reduce's buffer;
 * bus bandwidth = size / time × (N-1)/N, × 2 for all-reduce; time is the slowest rank's,
 * the best of several runs after two warm-up runs. Prints a markdown table on rank 0.
 *
 *     gcc -std=gnu11 -O2 -Wall -Wextra -fopenmp -I. -DZT_HAVE_MPI $(pkg-config --cflags ompi-c) \
 *         bench/comm_bw.c lib/comm/comm_mpi.c lib/comm/comm_common.c lib/core/?*.c \
 *         $(pkg-config --libs ompi-c) -lm -lpthread -o build/comm_bw
 *     mpirun --allow-run-as-root --oversubscribe -np 4 build/comm_bw [MiB ...]   (default 1 16 64)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/comm/comm.h"

enum { ZT_AG, ZT_RS, ZT_AR, MPI_AG, MPI_RS, MPI_AR, NOPS };
static const char *const names[NOPS] = {"zt all-gather", "zt reduce-scatter", "zt all-reduce",
                                        "MPI_Allgather", "MPI_Reduce_scatter_block", "MPI_Allreduce"};

static zt_status run(zt_comm *c, int op, float *in, float *out, size_t n)
{
    int size = zt_comm_size(c), rc = MPI_SUCCESS;
    size_t per = n / (size_t)size; /* elements per rank */
    switch (op) {
    case ZT_AG: return zt_comm_allgather(c, in, out, per * sizeof(float), ZT_COMM_OTHER);
    case ZT_RS: return zt_comm_reduce_scatter_sum(c, in, out, per, n, ZT_COMM_OTHER);
    case ZT_AR: return zt_comm_allreduce_sum(c, out, n, ZT_COMM_OTHER);
    case MPI_AG: rc = MPI_Allgather(in, (int)per, MPI_FLOAT, out, (int)per, MPI_FLOAT, MPI_COMM_WORLD); break;
    case MPI_RS: rc = MPI_Reduce_scatter_block(in, out, (int)per, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case MPI_AR: rc = MPI_Allreduce(MPI_IN_PLACE, out, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    }
    return rc == MPI_SUCCESS ? ZT_OK : zt_fail(ZT_ERUNTIME, "%s failed", names[op]);
}

int main(int argc, char **argv)
{
    zt_comm *c;
    zt_status st = zt_comm_init(&c, &argc, &argv, 600);
    if (st) {
        fprintf(stderr, "comm_bw: %s\n", zt_errmsg());
        return 1;
    }
    int size = zt_comm_size(c), rank = zt_comm_rank(c);
    double mib[16] = {1, 16, 64};
    int nsizes = argc > 1 ? 0 : 3;
    for (int i = 1; i < argc && nsizes < 16; i++) mib[nsizes++] = atof(argv[i]);
    if (rank == 0) {
        printf("| %d ranks | size MiB | time ms | bus GB/s |\n|---|---:|---:|---:|\n", size);
        fflush(stdout);
    }
    for (int k = 0; k < nsizes && !st; k++) {
        size_t n = (size_t)(mib[k] * (1 << 20)) / sizeof(float) / (size_t)size * (size_t)size;
        float *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
        if (!in || !out) {
            fprintf(stderr, "comm_bw: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < n; i++) in[i] = out[i] = (float)(i % 7);
        for (int op = 0; op < NOPS && !st; op++) {
            double best = 1e30;
            int reps = n * sizeof(float) > ((size_t)16 << 20) ? 5 : 20;
            for (int r = 0; r < reps + 2 && !st; r++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t = MPI_Wtime();
                st = run(c, op, in, out, n);
                t = MPI_Wtime() - t;
                MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (r >= 2 && t < best) best = t;
            }
            double bus = (double)n * sizeof(float) / best * (size - 1) / size * (op == ZT_AR || op == MPI_AR ? 2 : 1);
            if (rank == 0 && !st) printf("| %s | %g | %.2f | %.2f |\n", names[op], mib[k], best * 1e3, bus * 1e-9);
            fflush(stdout);
        }
        free(in);
        free(out);
    }
    if (st) fprintf(stderr, "comm_bw: %s\n", zt_errmsg());
    zt_comm_finalize(c);
    return st ? 1 : 0;
}

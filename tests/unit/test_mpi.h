/* test_mpi.h: what the unit tests that also run under mpirun share (include it once, in
 * the test's own file): the world, and cases that fail on every rank when one fails.
 *
 *     int main(int argc, char **argv) {
 *         if (mpi_test_init(&argc, &argv, 120)) return 1;
 *         RUN_ALL(test_something);
 *         return mpi_test_finish();
 *     }
 */
#ifndef ZT_TESTS_UNIT_TEST_MPI_H
#define ZT_TESTS_UNIT_TEST_MPI_H

#include <stdio.h>

#include "lib/comm/comm.h"
#include "tests/unit/test.h"

static zt_comm *C;
static int R, N, RPN; /* this rank, the world size, ranks per node */

/* Open MPI leaks at MPI_Finalize: the sanitizer build skips leaks allocated under its
 * libraries, which needs full stacks (they lack frame pointers). Unused elsewhere. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "fast_unwind_on_malloc=0"; }
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libhwloc.so\nleak:libpmix.so\n"
           "leak:libevent\nleak:mca_\n";
}

/* Runs a case on every rank; it fails everywhere when it failed anywhere. */
static void run_case(const char *name, void (*fn)(void))
{
    test_case_failed = 0;
    fn();
    double failed = test_case_failed;
    if (zt_comm_allreduce_sum_f64(C, &failed, 1, ZT_COMM_OTHER)) {
        fprintf(stderr, "rank %d: %s\n", R, zt_errmsg());
        failed = 1;
    }
    if (failed) test_failed++;
    else test_passed++;
    if (R == 0) fprintf(stderr, "%s %s\n", failed ? "not ok" : "ok", name);
}
#define RUN_ALL(fn) run_case(#fn, fn)

/* comm init with a watchdog of timeout_s (a hang fails the test instead of stalling it) */
static int mpi_test_init(int *argc, char ***argv, double timeout_s)
{
    zt_status st = zt_comm_init(&C, argc, argv, timeout_s);
    if (st) {
        fprintf(stderr, "zt: error: %s\n", zt_errmsg());
        return zt_exit_code(st);
    }
    R = zt_comm_rank(C), N = zt_comm_size(C), RPN = zt_comm_ranks_per_node(C);
    return 0;
}

/* The summary (printed by rank 0) and the exit status; finalizes the world. */
static int mpi_test_finish(void)
{
    if (R == 0) test_summary(); /* before finalize: mpirun may end the job at the first rank's failing exit */
    fflush(stdout);
    zt_comm_finalize(C);
    return test_failed ? 1 : 0;
}

#endif

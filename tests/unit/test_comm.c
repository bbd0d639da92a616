/* comm: every collective against values computed locally (each rank knows every rank's
 * input from a formula), the byte counters against their formulas, the topology, and the
 * watchdog. Runs alone (a world of one) and under mpirun:
 *
 *     build/tests/test_comm
 *     mpirun --allow-run-as-root --oversubscribe -np 4 build/tests/test_comm
 *     mpirun ... -np 4 -x ZT_RANKS_PER_NODE=2 build/tests/test_comm      two "nodes"
 *     mpirun ... -np 2 build/tests/test_comm --big                        transfers past 2 GiB (~10 GB of memory)
 *     mpirun ... -np 3 build/tests/test_comm --victim 1 --timeout 3 [--kill]
 *
 * --victim R: rank R stops inside a loop of collectives (sleeps forever, or with --kill
 * dies of SIGKILL) and the job must end, every rank, non-zero. Each rank first prints
 * "rank R pid P" on stdout so a script can check that none is left.
 * Every rank checks; the ranks agree on each case's result; rank 0 prints the summary.
 */
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/unit/test_mpi.h"

typedef uint64_t counts[ZT_COMM_NPURPOSE][2];

/* the inputs: byte i of rank s's block q, and an exactly summable float */
static unsigned char byte_of(int s, int q, size_t i) { return (unsigned char)(s * 131 + q * 17 + i * 7 + 1); }
static float val(int s, int q, size_t i) { return (float)((int)((s * 7 + q * 3 + i) % 29) - 14) * 0.125f; }

static void expect_from(counts e, zt_comm_purpose p, int from, uint64_t bytes)
{
    if (from != R) e[p][from / RPN != R / RPN] += bytes;
}

static void expect_each(counts e, zt_comm_purpose p, uint64_t bytes)
{
    for (int s = 0; s < N; s++) expect_from(e, p, s, bytes);
}

static size_t block_len(size_t n, int q) { return n / N + ((size_t)q < n % N); }

static void check_counts(counts e, const char *what, size_t size)
{
    counts got;
    zt_comm_bytes(C, got);
    for (int p = 0; p < ZT_COMM_NPURPOSE; p++)
        for (int l = 0; l < 2; l++)
            CHECK_MSG(got[p][l] == e[p][l], "rank %d: %s of %zu: %s level %d: %llu bytes, expected %llu", R, what, size,
                      zt_comm_purpose_name(p), l, (unsigned long long)got[p][l], (unsigned long long)e[p][l]);
}

static void check_ok(zt_status st) { CHECK_MSG(st == ZT_OK, "rank %d: %s", R, zt_errmsg()); }

/* --- cases -------------------------------------------------------------------------- */

static void test_topology(void)
{
    /* mpirun tells each rank its place, and how many of the job's ranks share its host */
    const char *s = getenv("OMPI_COMM_WORLD_SIZE"), *r = getenv("OMPI_COMM_WORLD_RANK"),
               *host = getenv("OMPI_COMM_WORLD_LOCAL_SIZE"), *rpn = getenv("ZT_RANKS_PER_NODE");
    int want_size = s ? atoi(s) : 1, want_rpn = rpn && *rpn ? atoi(rpn) : host ? atoi(host) : 1;
    CHECK(N == want_size);
    CHECK(R == (r ? atoi(r) : 0));
    CHECK(RPN == want_rpn);
    CHECK(zt_comm_local_rank(C) == R % want_rpn);
    CHECK(zt_comm_node(C) == R / want_rpn);
    CHECK(zt_comm_nodes(C) == want_size / want_rpn);
    CHECK(strcmp(zt_comm_purpose_name(ZT_COMM_FWD_GATHER), "fwd_gather") == 0);
    CHECK(strcmp(zt_comm_purpose_name(ZT_COMM_GRAD_REDUCE), "grad_reduce") == 0);
}

static void check_gathered(const unsigned char *recv, size_t b, const char *what)
{
    size_t bad = 0;
    for (int q = 0; q < N; q++)
        for (size_t i = 0; i < b; i++) bad += recv[(size_t)q * b + i] != byte_of(q, 0, i);
    CHECK_MSG(bad == 0, "rank %d: %s of %zu bytes per rank: %zu bytes wrong", R, what, b, bad);
}

static void allgather_sizes(void)
{
    static const size_t sizes[] = {0, 1, 7, 1000, (1 << 20) + 3};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t b = sizes[k];
        zt_comm_purpose p = (zt_comm_purpose)(k % ZT_COMM_NPURPOSE);
        unsigned char *send = malloc(b + 1), *recv = malloc(N * b + 1);
        for (size_t i = 0; i < b; i++) send[i] = byte_of(R, 0, i);
        memset(recv, 0xee, N * b);
        counts e = {{0}};
        expect_each(e, p, b);
        zt_comm_bytes_reset(C);
        check_ok(zt_comm_allgather(C, send, recv, b, p));
        check_gathered(recv, b, "all-gather");
        check_counts(e, "all-gather", b);
        /* in place: the send block is the own block of recv */
        memset(recv, 0xee, N * b);
        memcpy(recv + (size_t)R * b, send, b);
        check_ok(zt_comm_allgather(C, recv + (size_t)R * b, recv, b, p));
        check_gathered(recv, b, "in-place all-gather");
        free(send);
        free(recv);
    }
}

static void test_allgather(void) { allgather_sizes(); }

/* every case again with transfers split into tiny pieces */
static void test_allgather_pieces(void)
{
    zt_comm_set_chunk_bytes(C, 333);
    allgather_sizes();
    zt_comm_set_chunk_bytes(C, 0);
}

static void allreduce_f32(size_t n, zt_comm_purpose p)
{
    float *buf = malloc(n * sizeof *buf + 1);
    for (size_t i = 0; i < n; i++) buf[i] = val(R, 0, i);
    counts e = {{0}};
    for (int s = 0; s < N; s++) expect_from(e, p, s, (block_len(n, R) + block_len(n, s)) * sizeof(float));
    zt_comm_bytes_reset(C);
    check_ok(zt_comm_allreduce_sum(C, buf, n, p));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int s = 0; s < N; s++) want += val(s, 0, i);
        bad += buf[i] != want;
    }
    CHECK_MSG(bad == 0, "rank %d: all-reduce of %zu: %zu elements wrong", R, n, bad);
    check_counts(e, "all-reduce", n);
    free(buf);
}

static void allreduce_f64(size_t n, zt_comm_purpose p)
{
    double *buf = malloc(n * sizeof *buf + 1);
    for (size_t i = 0; i < n; i++) buf[i] = val(R, 1, i) * 1e10;
    counts e = {{0}};
    for (int s = 0; s < N; s++) expect_from(e, p, s, (block_len(n, R) + block_len(n, s)) * sizeof(double));
    zt_comm_bytes_reset(C);
    check_ok(zt_comm_allreduce_sum_f64(C, buf, n, p));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        double want = 0;
        for (int s = 0; s < N; s++) want += val(s, 1, i) * 1e10;
        bad += buf[i] != want;
    }
    CHECK_MSG(bad == 0, "rank %d: f64 all-reduce of %zu: %zu elements wrong", R, n, bad);
    check_counts(e, "f64 all-reduce", n);
    free(buf);
}

static void test_allreduce(void)
{
    static const size_t sizes[] = {0, 1, 2, 3, 5, 1000, 300007};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        allreduce_f32(sizes[k], (zt_comm_purpose)(k % ZT_COMM_NPURPOSE));
        allreduce_f64(sizes[k], (zt_comm_purpose)((k + 1) % ZT_COMM_NPURPOSE));
    }
    zt_comm_set_chunk_bytes(C, 12); /* three floats a piece */
    allreduce_f32(1001, ZT_COMM_GRAD_REDUCE);
    allreduce_f64(7, ZT_COMM_OTHER);
    zt_comm_set_chunk_bytes(C, 0);
}

/* n per rank, the last cut elements of the N·n missing (ZeRO's shards of a flat buffer) */
static void reduce_scatter(size_t n, size_t cut, zt_comm_purpose p, int in_place)
{
    size_t total = N * n - cut, mine = zt_comm_cut(total, n, R);
    float *send = malloc(N * n * sizeof *send + 1),
          *recv = in_place ? send + (size_t)R * n : malloc(n * sizeof *recv + 1);
    for (int q = 0; q < N; q++)
        for (size_t i = 0; i < n; i++) send[(size_t)q * n + i] = (size_t)q * n + i < total ? val(R, q, i) : NAN;
    counts e = {{0}};
    for (int q = 0; q < N; q++) expect_from(e, p, q, zt_comm_cut(total, n, q) * sizeof(float));
    zt_comm_bytes_reset(C);
    check_ok(zt_comm_reduce_scatter_sum(C, send, recv, n, total, p));
    size_t bad = 0;
    for (size_t i = 0; i < mine; i++) {
        float want = 0;
        for (int s = 0; s < N; s++) want += val(s, R, i);
        bad += recv[i] != want;
    }
    CHECK_MSG(bad == 0, "rank %d: reduce-scatter of %zu per rank (%zu cut)%s: %zu elements wrong", R, n, cut,
              in_place ? " in place" : "", bad);
    check_counts(e, "reduce-scatter", n);
    if (!in_place) free(recv);
    free(send);
}

static void test_reduce_scatter(void)
{
    static const size_t sizes[] = {0, 1, 3, 1000, 300007};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        reduce_scatter(sizes[k], 0, (zt_comm_purpose)(k % ZT_COMM_NPURPOSE), 0);
        reduce_scatter(sizes[k], 0, ZT_COMM_GRAD_REDUCE, 1);
        reduce_scatter(sizes[k], sizes[k] + sizes[k] / 2 < N * sizes[k] ? sizes[k] + sizes[k] / 2 : 0,
                       ZT_COMM_GRAD_REDUCE, 1);
    }
    zt_comm_set_chunk_bytes(C, 20);
    reduce_scatter(1003, 0, ZT_COMM_GRAD_REDUCE, 0);
    reduce_scatter(1003, N > 1 ? 1500 : 0, ZT_COMM_GRAD_REDUCE, 1);
    zt_comm_set_chunk_bytes(C, 0);
}

/* floats whose sums round: a hash spread over exponents */
static float noisy(int s, size_t i)
{
    uint32_t h = (uint32_t)(s * 2654435761u) ^ (uint32_t)(i * 2246822519u);
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    return ((float)(h & 0xffff) / 65536.0f - 0.5f) * (float)(1 << (h >> 28));
}

/* sums are in rank order: bitwise the sequential sum, on every call and piece size */
static void test_determinism(void)
{
    size_t n = 70001, bad = 0;
    float *want = malloc(n * sizeof *want), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        want[i] = noisy(0, i);
        for (int s = 1; s < N; s++) want[i] += noisy(s, i);
    }
    for (int round = 0; round < 3; round++) {
        zt_comm_set_chunk_bytes(C, round == 2 ? 4000 : 0);
        for (size_t i = 0; i < n; i++) a[i] = noisy(R, i);
        check_ok(zt_comm_allreduce_sum(C, a, n, ZT_COMM_GRAD_REDUCE));
        bad += memcmp(a, want, n * sizeof *a) != 0;
        if (round) bad += memcmp(a, b, n * sizeof *a) != 0;
        memcpy(b, a, n * sizeof *a);
    }
    CHECK_MSG(bad == 0, "rank %d: all-reduce sums differ from the rank-order sum or between calls", R);
    /* reduce-scatter: block q of rank s is noisy(s, q*m + i) */
    size_t m = n / N;
    float *send = malloc(N * m * sizeof *send + 1), *recv = malloc(m * sizeof *recv + 1);
    for (size_t i = 0; i < N * m; i++) send[i] = noisy(R, i);
    check_ok(zt_comm_reduce_scatter_sum(C, send, recv, m, N * m, ZT_COMM_GRAD_REDUCE));
    CHECK_MSG(memcmp(recv, want + (size_t)R * m, m * sizeof *recv) == 0,
              "rank %d: reduce-scatter sums differ from the rank-order sum", R);
    zt_comm_set_chunk_bytes(C, 0);
    free(send);
    free(recv);
    free(want);
    free(a);
    free(b);
}

static void test_alltoall(void)
{
    static const size_t sizes[] = {0, 1, 13, 70001};
    for (int pieces = 0; pieces < 2; pieces++) {
        zt_comm_set_chunk_bytes(C, pieces ? 1000 : 0);
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            size_t b = sizes[k], bad = 0;
            zt_comm_purpose p = (zt_comm_purpose)(k % ZT_COMM_NPURPOSE);
            unsigned char *send = malloc(N * b + 1), *recv = malloc(N * b + 1);
            for (int q = 0; q < N; q++)
                for (size_t i = 0; i < b; i++) send[(size_t)q * b + i] = byte_of(R, q, i);
            memset(recv, 0xee, N * b);
            counts e = {{0}};
            expect_each(e, p, b);
            zt_comm_bytes_reset(C);
            check_ok(zt_comm_alltoall(C, send, recv, b, p));
            for (int s = 0; s < N; s++)
                for (size_t i = 0; i < b; i++) bad += recv[(size_t)s * b + i] != byte_of(s, R, i);
            CHECK_MSG(bad == 0, "rank %d: all-to-all of %zu bytes per rank: %zu bytes wrong", R, b, bad);
            check_counts(e, "all-to-all", b);
            free(send);
            free(recv);
        }
    }
    zt_comm_set_chunk_bytes(C, 0);
}

static void test_bcast(void)
{
    static const size_t sizes[] = {0, 1, 1000, (3 << 20) + 1};
    for (int root = 0; root < N; root++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            size_t b = sizes[k], bad = 0;
            zt_comm_purpose p = (zt_comm_purpose)((k + root) % ZT_COMM_NPURPOSE);
            zt_comm_set_chunk_bytes(C, k == 2 ? 333 : 0);
            unsigned char *buf = malloc(b + 1);
            for (size_t i = 0; i < b; i++) buf[i] = R == root ? byte_of(root, 0, i) : 0;
            counts e = {{0}};
            expect_from(e, p, root, b);
            zt_comm_bytes_reset(C);
            check_ok(zt_comm_bcast(C, buf, b, root, p));
            for (size_t i = 0; i < b; i++) bad += buf[i] != byte_of(root, 0, i);
            CHECK_MSG(bad == 0, "rank %d: broadcast of %zu bytes from %d: %zu bytes wrong", R, b, root, bad);
            check_counts(e, "broadcast", b);
            free(buf);
        }
    zt_comm_set_chunk_bytes(C, 0);
}

/* groups of k consecutive ranks, and across them: the collectives run inside, the bytes
 * land in the world's counters at the world's levels */
static void test_split(void)
{
    for (int k = 1; k <= N; k++) {
        if (N % k) continue;
        for (int across = 0; across < 2; across++) {
            zt_comm *g = NULL;
            check_ok(zt_comm_split(C, k, across, &g));
            if (!g) continue;
            int size = zt_comm_size(g);
            CHECK(size == (across ? N / k : k));
            CHECK(zt_comm_rank(g) == (across ? R / k : R % k));
            size_t b = 1001;
            unsigned char *send = malloc(b), *recv = malloc((size_t)size * b);
            for (size_t i = 0; i < b; i++) send[i] = byte_of(R, 0, i);
            counts e = {{0}};
            for (int q = 0; q < size; q++)
                expect_from(e, ZT_COMM_FWD_GATHER, across ? q * k + R % k : R / k * k + q, b);
            zt_comm_bytes_reset(C);
            check_ok(zt_comm_allgather(g, send, recv, b, ZT_COMM_FWD_GATHER));
            size_t bad = 0;
            for (int q = 0; q < size; q++)
                for (size_t i = 0; i < b; i++)
                    bad += recv[(size_t)q * b + i] != byte_of(across ? q * k + R % k : R / k * k + q, 0, i);
            CHECK_MSG(bad == 0, "rank %d: all-gather in groups of %d%s: %zu bytes wrong", R, k,
                      across ? " (across)" : "", bad);
            check_counts(e, "group all-gather", b);
            if (g != C) zt_comm_finalize(g);
            free(send), free(recv);
        }
    }
    zt_comm *g = NULL;
    CHECK(zt_comm_split(C, N + 1, 0, &g) == ZT_EUSER && g == NULL);
}

/* two gathers in flight (the second cut short: its last blocks shorter or empty), a
 * blocking collective between, waited in reverse order */
static void test_iallgather(void)
{
    for (int pieces = 0; pieces < 2; pieces++) {
        zt_comm_set_chunk_bytes(C, pieces ? 100 : 0);
        size_t b1 = 5000, b2 = 777, n = 1001, t2 = N * b2 - (N > 1 ? b2 + 5 : 5);
        unsigned char *s1 = malloc(b1), *s2 = malloc(b2), *r1 = malloc(N * b1), *r2 = malloc(N * b2);
        for (size_t i = 0; i < b1; i++) s1[i] = byte_of(R, 0, i);
        for (size_t i = 0; i < b2; i++) s2[i] = byte_of(R, 0, i);
        memset(r2, 0xee, N * b2);
        float *x = malloc(n * sizeof *x);
        for (size_t i = 0; i < n; i++) x[i] = val(R, 0, i);
        counts e = {{0}};
        expect_each(e, ZT_COMM_FWD_GATHER, b1);
        for (int q = 0; q < N; q++) expect_from(e, ZT_COMM_BWD_GATHER, q, zt_comm_cut(t2, b2, q));
        for (int s = 0; s < N; s++)
            expect_from(e, ZT_COMM_OTHER, s, (block_len(n, R) + block_len(n, s)) * sizeof(float));
        zt_comm_bytes_reset(C);
        zt_comm_req *q1 = NULL, *q2 = NULL;
        check_ok(zt_comm_iallgather(C, s1, r1, b1, N * b1, ZT_COMM_FWD_GATHER, &q1));
        check_ok(zt_comm_iallgather(C, s2, r2, b2, t2, ZT_COMM_BWD_GATHER, &q2));
        check_ok(zt_comm_allreduce_sum(C, x, n, ZT_COMM_OTHER));
        check_ok(zt_comm_wait(C, q2));
        check_ok(zt_comm_wait(C, q1));
        check_gathered(r1, b1, "iallgather");
        size_t bad = 0;
        for (size_t i = 0; i < N * b2; i++) bad += r2[i] != (i < t2 ? byte_of((int)(i / b2), 0, i % b2) : 0xee);
        CHECK_MSG(bad == 0, "rank %d: cut iallgather: %zu bytes wrong", R, bad);
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            float want = 0;
            for (int s = 0; s < N; s++) want += val(s, 0, i);
            bad += x[i] != want;
        }
        CHECK_MSG(bad == 0, "rank %d: all-reduce between iallgathers: %zu elements wrong", R, bad);
        check_counts(e, "iallgather", b1);
        free(s1), free(s2), free(r1), free(r2), free(x);
    }
    zt_comm_set_chunk_bytes(C, 0);
}

static void test_bytes_total(void)
{
    size_t b = 100;
    unsigned char *send = calloc(1, b), *recv = malloc(N * b);
    zt_comm_bytes_reset(C);
    check_ok(zt_comm_allgather(C, send, recv, b, ZT_COMM_BWD_GATHER));
    counts mine = {{0}}, total, got;
    expect_each(mine, ZT_COMM_BWD_GATHER, b);
    check_ok(zt_comm_bytes_total(C, total));
    CHECK(total[ZT_COMM_BWD_GATHER][0] == (uint64_t)N * (RPN - 1) * b);
    CHECK(total[ZT_COMM_BWD_GATHER][1] == (uint64_t)N * (N - RPN) * b);
    CHECK(total[ZT_COMM_FWD_GATHER][0] + total[ZT_COMM_FWD_GATHER][1] + total[ZT_COMM_OTHER][0] +
              total[ZT_COMM_OTHER][1] ==
          0);
    check_counts(mine, "the byte total after an all-gather", b); /* the total counted nothing */
    check_ok(zt_comm_barrier(C));
    check_counts(mine, "a barrier after an all-gather", b);
    zt_comm_bytes_reset(C);
    zt_comm_bytes(C, got);
    counts zero = {{0}};
    CHECK(memcmp(got, zero, sizeof got) == 0);
    free(send);
    free(recv);
}

static void test_errors(void)
{
    char buf[4];
    zt_status st = zt_comm_bcast(C, buf, sizeof buf, N, ZT_COMM_OTHER);
    CHECK(st != ZT_OK);
    char want[64];
    snprintf(want, sizeof want, "rank %d: broadcast: root %d", R, N);
    CHECK_MSG(strstr(zt_errmsg(), want) != NULL, "%s", zt_errmsg());
}

/* transfers past MPI's int counts: an all-gather of 2 GiB + 16 bytes per rank and a
 * reduce-scatter of 2 GiB + 4 bytes per rank, both in place to save memory */
static void test_big(void)
{
    size_t b = ((size_t)1 << 31) + 16, bad = 0;
    unsigned char *recv = malloc(N * b);
    CHECK(recv != NULL);
    if (!recv) return;
    for (size_t i = 0; i < b; i++) recv[(size_t)R * b + i] = byte_of(R, 0, i);
    check_ok(zt_comm_allgather(C, recv + (size_t)R * b, recv, b, ZT_COMM_OTHER));
    for (int q = 0; q < N; q++)
        for (size_t i = 0; i < b; i += 4093) bad += recv[(size_t)q * b + i] != byte_of(q, 0, i);
    bad += recv[N * b - 1] != byte_of(N - 1, 0, b - 1);
    free(recv);
    size_t n = ((size_t)1 << 29) + 1;
    float *send = malloc(N * n * sizeof *send);
    CHECK(send != NULL);
    if (!send) return;
    for (int q = 0; q < N; q++)
        for (size_t i = 0; i < n; i++) send[(size_t)q * n + i] = val(R, q, i);
    check_ok(zt_comm_reduce_scatter_sum(C, send, send + (size_t)R * n, n, N * n, ZT_COMM_OTHER));
    for (size_t i = 0; i < n; i += i < n - 5 ? 4093 : 1) {
        float want = 0;
        for (int s = 0; s < N; s++) want += val(s, R, i);
        bad += send[(size_t)R * n + i] != want;
    }
    free(send);
    CHECK_MSG(bad == 0, "rank %d: %zu sampled elements wrong", R, bad);
}

/* --- the harness -------------------------------------------------------------------- */

/* rank victim stops at the 5th of a loop of collectives; the others go on calling them */
static int run_victim(int victim, int kill_it)
{
    printf("rank %d pid %d\n", R, (int)getpid());
    fflush(stdout);
    float x[64] = {0};
    for (int i = 0; i < 100; i++) {
        if (i == 5 && R == victim) {
            if (kill_it) raise(SIGKILL);
            for (;;) pause();
        }
        zt_status st = zt_comm_allreduce_sum(C, x, 64, ZT_COMM_OTHER);
        if (st) {
            fprintf(stderr, "zt: error: %s\n", zt_errmsg());
            return 1;
        }
    }
    zt_comm_finalize(C);
    return 0;
}

int main(int argc, char **argv)
{
    int victim = -1, kill_it = 0, big = 0;
    double timeout = 60; /* a hang fails the test instead of stalling it */
    for (int i = 1; i < argc; i++) {
        char *end = "";
        if (!strcmp(argv[i], "--kill")) kill_it = 1;
        else if (!strcmp(argv[i], "--big")) big = 1;
        else if (!strcmp(argv[i], "--victim") && i + 1 < argc) victim = (int)strtol(argv[++i], &end, 10);
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout = strtod(argv[++i], &end);
        else end = NULL;
        if (!end || *end || !*argv[i]) {
            fprintf(stderr, "usage: test_comm [--big] [--victim RANK [--timeout SECONDS] [--kill]]\n");
            return 2;
        }
    }
    int rc = mpi_test_init(&argc, &argv, timeout);
    if (rc) return rc;
    if (victim >= 0) return run_victim(victim, kill_it);
    if (big) {
        RUN_ALL(test_big);
    } else {
        RUN_ALL(test_topology);
        RUN_ALL(test_allgather);
        RUN_ALL(test_allgather_pieces);
        RUN_ALL(test_allreduce);
        RUN_ALL(test_reduce_scatter);
        RUN_ALL(test_determinism);
        RUN_ALL(test_alltoall);
        RUN_ALL(test_bcast);
        RUN_ALL(test_iallgather);
        RUN_ALL(test_split);
        RUN_ALL(test_bytes_total);
        RUN_ALL(test_errors);
    }
    return mpi_test_finish();
}

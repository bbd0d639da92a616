/* comm over MPI. Collectives are point-to-point exchanges between the members of a
 * group: every rank posts its receives from and sends to every other member at once
 * (pairwise order), so uneven blocks, in-place buffers and sizes past MPI's int counts
 * need no special case. Reductions move a piece of every block per step into a persistent
 * scratch and sum it in rank order, with the next step's transfers already posted. On one
 * host this all-gather matches MPI_Allgather (and beats it at 3 ranks) and the
 * reduce-scatter is 3x faster than Open MPI's MPI_Reduce_scatter_block (bench/comm_bw.c).
 * A group (zt_comm_split) is a zt_comm of its own over a split of the world's communicator;
 * it borrows the world's watchdog and byte counters. */
#include "comm_internal.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/arena.h"

enum { TAG_GATHER = 1, TAG_REDUCE, TAG_ALLTOALL, TAG_QUERY, TAG_REPLY };

/* What a rank's watchdog answers another's query: its latest collective and whether it is in it. */
typedef struct progress {
    int64_t seq; /* collectives started so far (the latest is #seq) */
    int32_t in_flight;
    char op[52];
} progress;

/* A communicator and the node of each member (for the accounting). */
typedef struct group {
    MPI_Comm comm;
    int size, me;
    int *node;
    int spans_nodes; /* members on more than one node */
} group;

struct zt_comm {
    zt_comm_base base; /* first: comm_common.c reads it */
    group world;       /* the world, or a group's members */
    zt_comm *root;     /* a group (zt_comm_split): the world, whose watchdog it uses; NULL for the world */
    int did_init;      /* init called MPI_Init */
    /* one exchange: to member q send xs_len[q] bytes from xs[q], from q receive xr_len[q] into xr[q] */
    const char **xs;
    char **xr;
    size_t *xs_len, *xr_len;
    struct {
        MPI_Request *r;
        size_t cap;
        int n;
    } reqs[2];     /* two exchanges in flight: a reduction posts step k+1 before it sums step k */
    char *scratch; /* reductions: a piece per member, for each of the two steps */
    size_t scratch_bytes;
    /* the watchdog */
    int64_t timeout_ns;
    int watching; /* the thread runs */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;                 /* under mu */
    _Atomic int64_t deadline; /* CLOCK_MONOTONIC ns; 0: no collective in flight */
    _Atomic(const char *) op; /* the collective in flight */
    _Atomic int64_t seq;      /* collectives started (a group's count in the world's) */
    /* the watchdogs ask each other where they are (MPI_THREAD_MULTIPLE only) */
    MPI_Comm probe;    /* MPI_COMM_NULL when they do not */
    MPI_Request query; /* the receive of another watchdog's query */
    int64_t query_buf;
};

struct zt_comm_req {
    int n;
    MPI_Request r[];
};

typedef struct eltype {
    size_t size;
    void (*sum)(void *out, const void *slots, size_t len, int n);
} eltype;

/* out = slot 0 + slot 1 + ... + slot n-1, in this order (slots of len elements, one after another) */
#define DEFINE_SUM(name, type)                                                                                         \
    static void name(void *out_, const void *slots_, size_t len, int n)                                                \
    {                                                                                                                  \
        type *out = out_;                                                                                              \
        const type *s = slots_;                                                                                        \
        memcpy(out, s, len * sizeof *out);                                                                             \
        for (int q = 1; q < n; q++)                                                                                    \
            for (size_t i = 0; i < len; i++) out[i] += s[(size_t)q * len + i];                                         \
    }
DEFINE_SUM(sum_f32, float)
DEFINE_SUM(sum_f64, double)

static const eltype F32 = {sizeof(float), sum_f32}, F64 = {sizeof(double), sum_f64};

static zt_status fail_mpi(const zt_comm *c, const char *op, const char *call, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", rc);
    return zt_fail(ZT_ERUNTIME, "rank %d: %s: %s failed: %s", c->base.rank, op, call, s);
}

static zt_comm_members members(const group *g) { return (zt_comm_members){g->size, g->me, g->node}; }

/* --- the watchdog ------------------------------------------------------------------- */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void watch(zt_comm *c, const char *op)
{
    if (c->root) c = c->root;
    if (!c->watching) return;
    atomic_store(&c->op, op);
    atomic_fetch_add(&c->seq, 1);
    atomic_store(&c->deadline, now_ns() + c->timeout_ns);
}

static void unwatch(zt_comm *c) { atomic_store(c->root ? &c->root->deadline : &c->deadline, 0); }

static void *abort_job(void *arg)
{
    (void)arg;
    MPI_Abort(MPI_COMM_WORLD, 1);
    return NULL;
}

/* How often the watchdog wakes: a tenth of the timeout, within [10 ms, 500 ms]. */
static int64_t watchdog_period(const zt_comm *c)
{
    int64_t period = c->timeout_ns / 10;
    return period < 10000000 ? 10000000 : period > 500000000 ? 500000000 : period;
}

static progress my_progress(zt_comm *c)
{
    progress p = {.seq = atomic_load(&c->seq), .in_flight = atomic_load(&c->deadline) != 0};
    snprintf(p.op, sizeof p.op, "%s", atomic_load(&c->op) ? atomic_load(&c->op) : "none");
    return p;
}

/* Answers a query that has arrived (the sender's watchdog waits for it), and waits for the next. */
static void answer_queries(zt_comm *c)
{
    int done = 0;
    MPI_Status status;
    while (MPI_Test(&c->query, &done, &status) == MPI_SUCCESS && done) {
        progress p = my_progress(c);
        MPI_Send(&p, (int)sizeof p, MPI_BYTE, status.MPI_SOURCE, TAG_REPLY, c->probe);
        MPI_Irecv(&c->query_buf, 1, MPI_INT64_T, MPI_ANY_SOURCE, TAG_QUERY, c->probe, &c->query);
    }
}

/* Asks every other rank where it is and waits up to wait_ns for the answers (answering
 * theirs meanwhile); got[q] says who answered. */
static void ask_others(zt_comm *c, progress *answers, int *got, int64_t wait_ns)
{
    int size = c->base.size, me = c->base.rank;
    MPI_Request *reqs = calloc((size_t)size, 2 * sizeof *reqs);
    if (!reqs) return;
    int64_t seq = atomic_load(&c->seq);
    for (int q = 0; q < size; q++) {
        reqs[2 * q] = reqs[2 * q + 1] = MPI_REQUEST_NULL;
        if (q == me) continue;
        MPI_Irecv(&answers[q], (int)sizeof *answers, MPI_BYTE, q, TAG_REPLY, c->probe, &reqs[2 * q]);
        MPI_Isend(&seq, 1, MPI_INT64_T, q, TAG_QUERY, c->probe, &reqs[2 * q + 1]);
    }
    for (int64_t end = now_ns() + wait_ns, pending = size - 1; pending && now_ns() < end;) {
        answer_queries(c);
        pending = 0;
        for (int q = 0; q < size; q++) {
            if (q == me || got[q]) continue;
            MPI_Test(&reqs[2 * q], &got[q], MPI_STATUS_IGNORE);
            pending += !got[q];
        }
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    /* the job ends now: requests still pending are left to MPI_Abort */
    free(reqs);
}

/* The ranks that keep collective #seq (op) from completing: those that do not answer
 * (stopped, or stuck without progress) and those outside every collective; *n lines in
 * msg. A rank waiting in an earlier collective waits like this one and is not named. */
static int name_missing(zt_comm *c, const char *op, char *msg, size_t cap)
{
    int size = c->base.size, me = c->base.rank, named = 0;
    progress *answers = calloc((size_t)size, sizeof *answers);
    int *got = calloc((size_t)size, sizeof *got);
    if (!answers || !got) {
        free(answers), free(got);
        return 0;
    }
    /* an answering watchdog wakes once a period: a few of them and 2 s for a loaded machine */
    int64_t seq = atomic_load(&c->seq), wait_ns = 2000000000 + 4 * watchdog_period(c);
    ask_others(c, answers, got, wait_ns);
    size_t len = 0;
    double t = (double)c->timeout_ns * 1e-9;
    for (int q = 0; q < size && len < cap; q++) {
        if (q == me || (got[q] && answers[q].in_flight)) continue;
        answers[q].op[sizeof answers[q].op - 1] = 0;
        int k = got[q] ? snprintf(msg + len, cap - len,
                                  "zt: error: rank %d did not reach %s #%lld within %g s (stuck outside collectives "
                                  "since %s #%lld; seen from rank %d)\n",
                                  q, op, (long long)seq, t, answers[q].op, (long long)answers[q].seq, me)
                       : snprintf(msg + len, cap - len,
                                  "zt: error: rank %d did not reach %s #%lld within %g s (stopped or stuck: it does "
                                  "not answer; seen from rank %d)\n",
                                  q, op, (long long)seq, t, me);
        len += k > 0 ? (size_t)k : 0;
        named++;
    }
    free(answers), free(got);
    return named;
}

/* Ends the job: MPI_Abort (legal from this thread under MPI_THREAD_MULTIPLE, a last resort
 * below it) from a thread of its own, and _exit if that has not ended the process 10 s later.
 * First it names the ranks that did not reach the collective, when the others can be asked. */
static void __attribute__((noreturn)) give_up(zt_comm *c, const char *op)
{
    char msg[4096];
    int n = c->probe != MPI_COMM_NULL ? name_missing(c, op, msg, sizeof msg) : 0;
    size_t len = n ? strlen(msg)
                   : (size_t)snprintf(msg, sizeof msg,
                                      "zt: error: rank %d: %s #%lld did not complete within %g s (a rank "
                                      "failed or is stuck)\n",
                                      c->base.rank, op, (long long)atomic_load(&c->seq), (double)c->timeout_ns * 1e-9);
    if (len > sizeof msg - 1) len = sizeof msg - 1;
    if (write(STDERR_FILENO, msg, len) != (ssize_t)len) { /* nowhere to report that */
    }
    pthread_t t;
    if (pthread_create(&t, NULL, abort_job, NULL) == 0) sleep(10);
    _exit(1);
}

static void *watchdog(void *arg)
{
    zt_comm *c = arg;
    int64_t period = watchdog_period(c);
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        int64_t wake = now_ns() + period;
        struct timespec ts = {wake / 1000000000, wake % 1000000000};
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        if (c->probe != MPI_COMM_NULL) answer_queries(c);
        int64_t deadline = atomic_load(&c->deadline);
        const char *op = atomic_load(&c->op);
        if (deadline && now_ns() > deadline && atomic_load(&c->deadline) == deadline) give_up(c, op);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* The watchdogs' own communicator, when MPI runs threads freely (the watchdog calls MPI
 * while the rank is inside a collective). Called by every rank at init. */
static void probe_start(zt_comm *c)
{
    int level = MPI_THREAD_SINGLE;
    c->probe = MPI_COMM_NULL;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE || MPI_Comm_dup(c->world.comm, &c->probe) != MPI_SUCCESS) return;
    MPI_Irecv(&c->query_buf, 1, MPI_INT64_T, MPI_ANY_SOURCE, TAG_QUERY, c->probe, &c->query);
}

static void probe_stop(zt_comm *c)
{
    if (c->probe == MPI_COMM_NULL) return;
    MPI_Cancel(&c->query);
    MPI_Wait(&c->query, MPI_STATUS_IGNORE);
    MPI_Comm_free(&c->probe);
}

static zt_status watchdog_start(zt_comm *c, double timeout_s)
{
    if (!(timeout_s > 0)) return ZT_OK;
    c->timeout_ns = timeout_s > 1e9 ? (int64_t)1e18 : (int64_t)(timeout_s * 1e9);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&c->cv, &attr);
    pthread_condattr_destroy(&attr);
    if (rc || pthread_mutex_init(&c->mu, NULL))
        return zt_fail(ZT_ERUNTIME, "rank %d: comm init: watchdog setup failed", c->base.rank);
    probe_start(c);
    if (pthread_create(&c->thread, NULL, watchdog, c)) {
        probe_stop(c);
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        return zt_fail(ZT_ERUNTIME, "rank %d: comm init: cannot start the watchdog thread", c->base.rank);
    }
    c->watching = 1;
    return ZT_OK;
}

static void watchdog_stop(zt_comm *c)
{
    if (!c->watching) return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    probe_stop(c);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    c->watching = 0;
}

/* --- exchanges ---------------------------------------------------------------------- */

static size_t chunk(const zt_comm *c)
{
    return c->base.chunk < ZT_COMM_CHUNK_DEFAULT ? c->base.chunk : ZT_COMM_CHUNK_DEFAULT;
}

static size_t pieces(const zt_comm *c, size_t bytes) { return (bytes + chunk(c) - 1) / chunk(c); }

/* The requests the exchange in c->x* needs. */
static size_t exchange_requests(const zt_comm *c, const group *g)
{
    size_t n = 0;
    for (int q = 0; q < g->size; q++)
        if (q != g->me) n += pieces(c, c->xs_len[q]) + pieces(c, c->xr_len[q]);
    return n;
}

/* Posts the exchange in c->x*: receives first, then sends, each peer in pairwise order
 * (me+s, me-s), each transfer in pieces of at most chunk bytes. */
static zt_status exchange_post(zt_comm *c, const group *g, int tag, MPI_Request *reqs, int *nreq, const char *op)
{
    int n = 0, rc = MPI_SUCCESS;
    for (int s = 1; s < g->size && rc == MPI_SUCCESS; s++) {
        int q = (g->me - s + g->size) % g->size;
        for (size_t off = 0; off < c->xr_len[q] && rc == MPI_SUCCESS; off += chunk(c)) {
            size_t len = c->xr_len[q] - off < chunk(c) ? c->xr_len[q] - off : chunk(c);
            rc = MPI_Irecv(c->xr[q] + off, (int)len, MPI_BYTE, q, tag, g->comm, &reqs[n++]);
        }
    }
    if (rc != MPI_SUCCESS) return fail_mpi(c, op, "MPI_Irecv", rc);
    for (int s = 1; s < g->size && rc == MPI_SUCCESS; s++) {
        int q = (g->me + s) % g->size;
        for (size_t off = 0; off < c->xs_len[q] && rc == MPI_SUCCESS; off += chunk(c)) {
            size_t len = c->xs_len[q] - off < chunk(c) ? c->xs_len[q] - off : chunk(c);
            rc = MPI_Isend(c->xs[q] + off, (int)len, MPI_BYTE, q, tag, g->comm, &reqs[n++]);
        }
    }
    if (rc != MPI_SUCCESS) return fail_mpi(c, op, "MPI_Isend", rc);
    *nreq = n;
    return ZT_OK;
}

/* Posts the exchange in c->x* into request set k. */
static zt_status exchange_start(zt_comm *c, const group *g, int tag, int k, const char *op)
{
    size_t need = exchange_requests(c, g);
    if (need > INT_MAX) return zt_fail(ZT_ERUNTIME, "rank %d: %s: %zu transfers are too many", c->base.rank, op, need);
    if (need > c->reqs[k].cap) {
        MPI_Request *r = realloc(c->reqs[k].r, need * sizeof *r);
        if (!r) return zt_fail(ZT_ENOMEM, "rank %d: %s: out of memory for %zu requests", c->base.rank, op, need);
        c->reqs[k].r = r, c->reqs[k].cap = need;
    }
    return exchange_post(c, g, tag, c->reqs[k].r, &c->reqs[k].n, op);
}

static zt_status exchange_finish(zt_comm *c, int k, const char *op)
{
    int rc = MPI_Waitall(c->reqs[k].n, c->reqs[k].r, MPI_STATUSES_IGNORE);
    return rc == MPI_SUCCESS ? ZT_OK : fail_mpi(c, op, "MPI_Waitall", rc);
}

static zt_status exchange(zt_comm *c, const group *g, int tag, const char *op)
{
    zt_status st = exchange_start(c, g, tag, 0, op);
    return st ? st : exchange_finish(c, 0, op);
}

/* The blocks of a buffer of g->size blocks: n elements each, or (split) the balanced split
 * of n; cut off at total elements (blocks past it shorter or empty). */
typedef struct blocks {
    size_t n;
    int split;
    size_t total;
} blocks;

#define UNCUT SIZE_MAX

/* Block q's length; its first element in *start. Block 0 is never shorter than another. */
static size_t block(blocks b, const group *g, int q, size_t *start)
{
    size_t len = b.n;
    if (b.split) len = zt_comm_block(b.n, g->size, q, start);
    else *start = (size_t)q * b.n;
    if (*start >= b.total) *start = b.total, len = 0;
    return len < b.total - *start ? len : b.total - *start;
}

/* Counts the blocks received from every other member: es bytes per element. */
static void count_blocks(zt_comm *c, zt_comm_purpose p, const group *g, blocks b, size_t es)
{
    size_t start;
    for (int q = 0; q < g->size; q++) zt_comm_count_from(&c->base, p, members(g), q, block(b, g, q, &start) * es);
}

/* Sets up an all-gather of blocks of es bytes elements in place in buf: this member's
 * block goes to everyone, block q comes from q. */
static void gather_setup(zt_comm *c, const group *g, char *buf, blocks b, size_t es)
{
    size_t start, mine = block(b, g, g->me, &start);
    const char *own = buf + start * es;
    for (int q = 0; q < g->size; q++) {
        c->xs[q] = own, c->xs_len[q] = mine * es;
        c->xr_len[q] = block(b, g, q, &start) * es, c->xr[q] = buf + start * es;
    }
}

/* Sets up an all-gather of blocks b of bytes into recv, this member's block from send. */
static void gather_from(zt_comm *c, const group *g, const void *send, void *recv, blocks b)
{
    size_t start, mine = block(b, g, g->me, &start);
    char *own = (char *)recv + start;
    if (send != own && mine) memcpy(own, send, mine);
    gather_setup(c, g, recv, b, 1);
}

/* --- reductions --------------------------------------------------------------------- */

/* Elements per member and step of a reduction: each transfer moves 64 KiB to 1 MiB, or
 * up to 4 MiB when the group spans nodes (measured: 4 MiB pieces reduce 1.5x faster than
 * 1 MiB over TCP between TESTBED.md's namespaces, 0.7x as fast within a host, where the
 * scratch falls out of the cache). The scratch, two pieces per member, stays within 64 MiB
 * up to 512 members. */
static size_t reduce_piece(const zt_comm *c, const group *g, const eltype *t)
{
    size_t bytes = ((size_t)32 << 20) / (size_t)g->size, most = (size_t)(g->spans_nodes ? 4 : 1) << 20;
    if (bytes > most) bytes = most;
    if (bytes < ((size_t)64 << 10)) bytes = (size_t)64 << 10;
    if (bytes > chunk(c)) bytes = chunk(c);
    return bytes / t->size ? bytes / t->size : 1;
}

static zt_status scratch_reserve(zt_comm *c, size_t bytes, const char *op)
{
    if (bytes <= c->scratch_bytes) return ZT_OK;
    zt_free(c->scratch);
    c->scratch = zt_calloc_aligned(bytes);
    c->scratch_bytes = c->scratch ? bytes : 0; /* zeroed: the pages are in before the first exchange */
    return c->scratch
               ? ZT_OK
               : zt_fail(ZT_ENOMEM, "rank %d: %s: out of memory for %zu bytes of scratch", c->base.rank, op, bytes);
}

/* The length of the piece at off of a block of len elements. */
static size_t piece_at(size_t len, size_t off, size_t piece)
{
    return off < len ? (len - off < piece ? len - off : piece) : 0;
}

/* Posts step k of a reduction: piece k of every block of send to its owner, into the
 * scratch half k % 2 (a slot of this member's piece length per member). */
static zt_status reduce_start(zt_comm *c, const group *g, const char *send, blocks b, size_t k, size_t piece,
                              const eltype *t, const char *op)
{
    size_t start, es = t->size, off = k * piece, my = piece_at(block(b, g, g->me, &start), off, piece);
    char *slots = c->scratch + (k % 2) * (c->scratch_bytes / 2);
    for (int q = 0; q < g->size; q++) {
        c->xs_len[q] = piece_at(block(b, g, q, &start), off, piece) * es, c->xs[q] = send + (start + off) * es;
        c->xr[q] = slots + (size_t)q * my * es, c->xr_len[q] = my * es;
    }
    return exchange_start(c, g, TAG_REDUCE, (int)(k % 2), op);
}

/* out = the rank-order sum over members of their block me of send. Two steps are in flight:
 * step k+1 is posted before step k is summed. out may be send's block me. */
static zt_status reduce_blocks(zt_comm *c, const group *g, const char *send, blocks b, char *out, const eltype *t,
                               const char *op)
{
    size_t piece = reduce_piece(c, g, t), es = t->size, start, first;
    size_t mine = block(b, g, g->me, &start), largest = block(b, g, 0, &first);
    size_t steps = (largest + piece - 1) / piece;
    zt_status st = scratch_reserve(c, 2 * (size_t)g->size * (largest < piece ? largest : piece) * es, op);
    if (!st && steps) st = reduce_start(c, g, send, b, 0, piece, t, op);
    for (size_t k = 0; !st && k < steps; k++) {
        if (k + 1 < steps && (st = reduce_start(c, g, send, b, k + 1, piece, t, op))) break;
        if ((st = exchange_finish(c, (int)(k % 2), op))) break;
        size_t off = k * piece, my = piece_at(mine, off, piece);
        char *slots = c->scratch + (k % 2) * (c->scratch_bytes / 2);
        memcpy(slots + (size_t)g->me * my * es, send + (start + off) * es, my * es);
        t->sum(out + off * es, slots, my, g->size);
    }
    return st;
}

/* buf = the rank-order sum over members of their buf: a reduction over the balanced split
 * of n into this member's block, then an all-gather of the blocks. */
static zt_status allreduce(zt_comm *c, const group *g, char *buf, size_t n, const eltype *t, const char *op)
{
    if (g->size == 1 || n == 0) return ZT_OK;
    blocks b = {n, 1, UNCUT};
    size_t start;
    block(b, g, g->me, &start);
    zt_status st = reduce_blocks(c, g, buf, b, buf + start * t->size, t, op);
    if (st) return st;
    gather_setup(c, g, buf, b, t->size);
    return exchange(c, g, TAG_GATHER, op);
}

/* --- the public collectives (on the world) ------------------------------------------ */

static zt_status check_blocks(const zt_comm *c, size_t per_rank, size_t elsize, const char *op)
{
    if (per_rank > SIZE_MAX / elsize / (size_t)c->base.size)
        return zt_fail(ZT_ERUNTIME, "rank %d: %s: %zu elements per rank overflow the buffer size", c->base.rank, op,
                       per_rank);
    return ZT_OK;
}

static zt_status allreduce_world(zt_comm *c, void *buf, size_t n, const eltype *t, zt_comm_purpose p, const char *op)
{
    watch(c, op);
    zt_status st = allreduce(c, &c->world, buf, n, t, op);
    unwatch(c);
    if (!st) zt_comm_count_allreduce(&c->base, p, members(&c->world), n, t->size);
    return st;
}

void zt_comm_count_allgather(zt_comm *c, size_t bytes_per_rank, zt_comm_purpose p)
{
    zt_comm_count_each(&c->base, p, members(&c->world), bytes_per_rank);
}

void zt_comm_count_reduce_scatter(zt_comm *c, size_t n_per_rank, size_t n, zt_comm_purpose p)
{
    count_blocks(c, p, &c->world, (blocks){n_per_rank, 0, n}, sizeof(float));
}

void zt_comm_count_allreduce_f32(zt_comm *c, size_t n, zt_comm_purpose p)
{
    zt_comm_count_allreduce(&c->base, p, members(&c->world), n, sizeof(float));
}

zt_status zt_comm_allreduce_sum(zt_comm *c, float *buf, size_t n, zt_comm_purpose p)
{
    return allreduce_world(c, buf, n, &F32, p, "all-reduce");
}

zt_status zt_comm_allreduce_sum_f64(zt_comm *c, double *buf, size_t n, zt_comm_purpose p)
{
    return allreduce_world(c, buf, n, &F64, p, "all-reduce (f64)");
}

zt_status zt_comm_allgather(zt_comm *c, const void *send, void *recv, size_t bytes_per_rank, zt_comm_purpose p)
{
    zt_status st = check_blocks(c, bytes_per_rank, 1, "all-gather");
    if (st) return st;
    gather_from(c, &c->world, send, recv, (blocks){bytes_per_rank, 0, UNCUT});
    watch(c, "all-gather");
    st = exchange(c, &c->world, TAG_GATHER, "all-gather");
    unwatch(c);
    if (!st) zt_comm_count_each(&c->base, p, members(&c->world), bytes_per_rank);
    return st;
}

zt_status zt_comm_reduce_scatter_sum(zt_comm *c, const float *send, float *recv, size_t n_per_rank, size_t n,
                                     zt_comm_purpose p)
{
    zt_status st = check_blocks(c, n_per_rank, sizeof *send, "reduce-scatter");
    if (st) return st;
    blocks b = {n_per_rank, 0, n};
    watch(c, "reduce-scatter");
    st = reduce_blocks(c, &c->world, (const char *)send, b, (char *)recv, &F32, "reduce-scatter");
    unwatch(c);
    if (!st) count_blocks(c, p, &c->world, b, sizeof *send);
    return st;
}

zt_status zt_comm_alltoall(zt_comm *c, const void *send, void *recv, size_t bytes_per_rank, zt_comm_purpose p)
{
    zt_status st = check_blocks(c, bytes_per_rank, 1, "all-to-all");
    if (st) return st;
    const group *g = &c->world;
    for (int q = 0; q < g->size; q++) {
        c->xs[q] = (const char *)send + (size_t)q * bytes_per_rank, c->xs_len[q] = bytes_per_rank;
        c->xr[q] = (char *)recv + (size_t)q * bytes_per_rank, c->xr_len[q] = bytes_per_rank;
    }
    memcpy(c->xr[g->me], c->xs[g->me], bytes_per_rank);
    watch(c, "all-to-all");
    st = exchange(c, g, TAG_ALLTOALL, "all-to-all");
    unwatch(c);
    if (!st) zt_comm_count_each(&c->base, p, members(g), bytes_per_rank);
    return st;
}

zt_status zt_comm_bcast(zt_comm *c, void *buf, size_t bytes, int root, zt_comm_purpose p)
{
    const group *g = &c->world;
    zt_status st = zt_comm_check_root(&c->base, root, "broadcast");
    if (st) return st;
    int rc = MPI_SUCCESS;
    watch(c, "broadcast");
    for (size_t off = 0; off < bytes && rc == MPI_SUCCESS; off += chunk(c)) {
        size_t len = bytes - off < chunk(c) ? bytes - off : chunk(c);
        rc = MPI_Bcast((char *)buf + off, (int)len, MPI_BYTE, root, g->comm);
    }
    unwatch(c);
    if (rc != MPI_SUCCESS) return fail_mpi(c, "broadcast", "MPI_Bcast", rc);
    zt_comm_count_from(&c->base, p, members(g), root, bytes);
    return ZT_OK;
}

zt_status zt_comm_barrier(zt_comm *c)
{
    watch(c, "barrier");
    int rc = MPI_Barrier(c->world.comm);
    unwatch(c);
    return rc == MPI_SUCCESS ? ZT_OK : fail_mpi(c, "barrier", "MPI_Barrier", rc);
}

zt_status zt_comm_iallgather(zt_comm *c, const void *send, void *recv, size_t bytes_per_rank, size_t recv_bytes,
                             zt_comm_purpose p, zt_comm_req **req)
{
    *req = NULL;
    zt_status st = check_blocks(c, bytes_per_rank, 1, "all-gather");
    if (st) return st;
    const group *g = &c->world;
    blocks b = {bytes_per_rank, 0, recv_bytes};
    gather_from(c, g, send, recv, b);
    size_t need = exchange_requests(c, g);
    if (need > INT_MAX)
        return zt_fail(ZT_ERUNTIME, "rank %d: all-gather: %zu transfers are too many", c->base.rank, need);
    zt_comm_req *r = malloc(sizeof *r + need * sizeof(MPI_Request));
    if (!r) return zt_fail(ZT_ENOMEM, "rank %d: all-gather: out of memory for %zu requests", c->base.rank, need);
    if ((st = exchange_post(c, g, TAG_GATHER, r->r, &r->n, "all-gather"))) {
        free(r);
        return st;
    }
    count_blocks(c, p, g, b, 1);
    *req = r;
    return ZT_OK;
}

zt_status zt_comm_wait(zt_comm *c, zt_comm_req *req)
{
    if (!req) return ZT_OK;
    watch(c, "wait for an all-gather");
    int rc = MPI_Waitall(req->n, req->r, MPI_STATUSES_IGNORE);
    unwatch(c);
    free(req);
    return rc == MPI_SUCCESS ? ZT_OK : fail_mpi(c, "wait for an all-gather", "MPI_Waitall", rc);
}

zt_status zt_comm_bytes_total(zt_comm *c, uint64_t out[ZT_COMM_NPURPOSE][2])
{
    zt_comm_bytes(c, out);
    watch(c, "byte-count all-reduce");
    int rc = MPI_Allreduce(MPI_IN_PLACE, out, ZT_COMM_NPURPOSE * 2, MPI_UINT64_T, MPI_SUM, c->world.comm);
    unwatch(c);
    return rc == MPI_SUCCESS ? ZT_OK : fail_mpi(c, "byte-count all-reduce", "MPI_Allreduce", rc);
}

/* --- setup -------------------------------------------------------------------------- */

/* ZT_RANKS_PER_NODE: 0 when unset, -1 when not a positive integer. */
static long ranks_per_node_env(void)
{
    const char *s = getenv("ZT_RANKS_PER_NODE");
    if (!s || !*s) return 0;
    char *end;
    long v = strtol(s, &end, 10);
    return *end || v <= 0 || v > INT_MAX ? -1 : v;
}

/* A host is a host name and a network namespace: processes in two namespaces of one
 * machine talk over the network, like two hosts (TESTBED.md). */
enum { HOST_KEY = MPI_MAX_PROCESSOR_NAME + 64 };
static void host_key(char key[HOST_KEY])
{
    char name[MPI_MAX_PROCESSOR_NAME] = "", ns[64] = "";
    int len = 0;
    MPI_Get_processor_name(name, &len);
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    ns[n > 0 ? n : 0] = 0;
    memset(key, 0, HOST_KEY);
    snprintf(key, HOST_KEY, "%s %s", name, ns);
}

/* The ranks on this rank's host: how many, and how many of them come before it
 * (this rank's place), from an all-gather of host keys. Not MPI_Comm_split_type: Open MPI
 * 4.1 crashes in it across hosts (open-mpi/ompi#9010, seen on TESTBED.md's namespaces). */
static zt_status host_layout(zt_comm *c, int *on_host, int *before)
{
    const int size = c->base.size;
    char mine[HOST_KEY], *all = malloc((size_t)size * HOST_KEY);
    if (!all) return zt_fail(ZT_ENOMEM, "rank %d: comm init: out of memory", c->base.rank);
    host_key(mine);
    int rc = MPI_Allgather(mine, HOST_KEY, MPI_CHAR, all, HOST_KEY, MPI_CHAR, c->world.comm);
    *on_host = *before = 0;
    for (int q = 0; q < size && rc == MPI_SUCCESS; q++)
        if (!strcmp(all + (size_t)q * HOST_KEY, mine)) ++*on_host, *before += q < c->base.rank;
    free(all);
    return rc == MPI_SUCCESS ? ZT_OK : fail_mpi(c, "comm init", "MPI_Allgather", rc);
}

/* ranks_per_node from ZT_RANKS_PER_NODE or the hosts, checked on every rank together so
 * that all ranks fail alike. */
static zt_status topology(zt_comm *c, int *rpn)
{
    const int rank = c->base.rank, size = c->base.size;
    long env = ranks_per_node_env(), v[3] = {env < 0, env, -env}; /* the maximum over ranks; -x gives the minimum */
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_LONG, MPI_MAX, c->world.comm);
    if (rc != MPI_SUCCESS) return fail_mpi(c, "comm init", "MPI_Allreduce", rc);
    if (env < 0)
        return zt_fail(ZT_EUSER, "rank %d: comm init: ZT_RANKS_PER_NODE='%s' is not a positive integer", rank,
                       getenv("ZT_RANKS_PER_NODE"));
    if (v[0] || v[1] != -v[2])
        return zt_fail(ZT_EUSER, "rank %d: comm init: ZT_RANKS_PER_NODE differs between ranks", rank);
    if (env > 0) {
        if (size % env)
            return zt_fail(ZT_EUSER, "rank %d: comm init: ZT_RANKS_PER_NODE=%ld does not divide the world size %d",
                           rank, env, size);
        *rpn = (int)env;
        return ZT_OK;
    }
    int on_host, before;
    zt_status st = host_layout(c, &on_host, &before);
    if (st) return st;
    /* the hosts' ranks are consecutive and as many on each: host = rank / on_host */
    long h[3] = {on_host, -on_host, before != rank % on_host};
    rc = MPI_Allreduce(MPI_IN_PLACE, h, 3, MPI_LONG, MPI_MAX, c->world.comm);
    if (rc != MPI_SUCCESS) return fail_mpi(c, "comm init", "MPI_Allreduce", rc);
    if (h[0] != -h[1])
        return zt_fail(ZT_EUSER,
                       "rank %d: comm init: the hosts hold different numbers of ranks (%ld to %ld); "
                       "set ZT_RANKS_PER_NODE to override",
                       rank, -h[1], h[0]);
    if (h[2])
        return zt_fail(ZT_EUSER,
                       "rank %d: comm init: the ranks of a host are not consecutive; place them by slot "
                       "(mpirun --map-by slot) or set ZT_RANKS_PER_NODE to override",
                       rank);
    *rpn = on_host;
    return ZT_OK;
}

/* The topology and the world's nodes: collectives, under the watchdog. */
static zt_status groups(zt_comm *c)
{
    int rpn = 1, size = c->base.size, rank = c->base.rank;
    zt_status st = topology(c, &rpn);
    if (st) return st;
    c->base.ranks_per_node = rpn;
    c->world.size = size, c->world.me = rank;
    if (!(c->world.node = malloc((size_t)size * sizeof *c->world.node)))
        return zt_fail(ZT_ENOMEM, "rank %d: comm init: out of memory", rank);
    for (int q = 0; q < size; q++) c->world.node[q] = q / rpn;
    c->world.spans_nodes = rpn < size;
    return ZT_OK;
}

/* The per-member arrays of an exchange. */
static zt_status exchange_alloc(zt_comm *c)
{
    size_t size = (size_t)c->base.size;
    c->xs = calloc(size, sizeof *c->xs);
    c->xr = calloc(size, sizeof *c->xr);
    c->xs_len = calloc(size, sizeof *c->xs_len);
    c->xr_len = calloc(size, sizeof *c->xr_len);
    if (!c->xs || !c->xr || !c->xs_len || !c->xr_len)
        return zt_fail(ZT_ENOMEM, "rank %d: comm: out of memory", c->base.rank);
    return ZT_OK;
}

static zt_status setup(zt_comm *c, double timeout_s)
{
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &c->world.comm);
    if (rc != MPI_SUCCESS) return zt_fail(ZT_ERUNTIME, "comm init: MPI_Comm_dup failed (error %d)", rc);
    MPI_Comm_set_errhandler(c->world.comm, MPI_ERRORS_RETURN); /* splits inherit it */
    MPI_Comm_size(c->world.comm, &c->base.size);
    MPI_Comm_rank(c->world.comm, &c->base.rank);
    c->base.chunk = ZT_COMM_CHUNK_DEFAULT;
    c->base.bytes = c->base.counts;
    zt_status st = watchdog_start(c, timeout_s);
    if (st) return st;
    watch(c, "comm init");
    st = groups(c);
    unwatch(c);
    if (st) return st;
    return exchange_alloc(c);
}

zt_status zt_comm_init(zt_comm **out, int *argc, char ***argv, double timeout_s)
{
    *out = NULL;
    int initialised = 0, level;
    MPI_Initialized(&initialised);
    if (!initialised) {
        int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &level);
        if (rc != MPI_SUCCESS) return zt_fail(ZT_ERUNTIME, "comm init: MPI_Init_thread failed (error %d)", rc);
    }
    zt_comm *c = calloc(1, sizeof *c);
    if (!c) {
        if (!initialised) MPI_Finalize();
        return zt_fail(ZT_ENOMEM, "comm init: out of memory");
    }
    c->did_init = !initialised;
    c->world.comm = MPI_COMM_NULL;
    zt_status st = setup(c, timeout_s);
    if (st) {
        zt_comm_finalize(c);
        return st;
    }
    *out = c;
    return ZT_OK;
}

static void group_free(group *g)
{
    if (g->comm != MPI_COMM_NULL) MPI_Comm_free(&g->comm);
    free(g->node);
}

zt_status zt_comm_split(zt_comm *c, int k, int across, zt_comm **out)
{
    *out = NULL;
    const int me = c->base.rank, size = c->base.size;
    if (k < 1 || size % k) return zt_fail(ZT_EUSER, "rank %d: %d ranks do not split into groups of %d", me, size, k);
    zt_comm *g = calloc(1, sizeof *g);
    if (!g) return zt_fail(ZT_ENOMEM, "rank %d: comm split: out of memory", me);
    g->root = c->root ? c->root : c;
    g->world.comm = MPI_COMM_NULL;
    watch(c, "comm split");
    int rc = MPI_Comm_split(c->world.comm, across ? me % k : me / k, me, &g->world.comm);
    unwatch(c);
    zt_status st = rc == MPI_SUCCESS ? ZT_OK : fail_mpi(c, "comm split", "MPI_Comm_split", rc);
    group *w = &g->world;
    if (!st) {
        MPI_Comm_size(w->comm, &w->size);
        MPI_Comm_rank(w->comm, &w->me);
        if (!(w->node = malloc((size_t)w->size * sizeof *w->node)))
            st = zt_fail(ZT_ENOMEM, "rank %d: comm split: out of memory", me);
    }
    int on_first = 0; /* members on member 0's node */
    for (int q = 0; !st && q < w->size; q++) {
        w->node[q] = c->world.node[across ? q * k + me % k : me / k * k + q];
        on_first += w->node[q] == w->node[0];
        w->spans_nodes |= w->node[q] != w->node[0];
    }
    if (!st) {
        g->base = (zt_comm_base){.rank = w->me,
                                 .size = w->size,
                                 .ranks_per_node = on_first,
                                 .chunk = c->base.chunk,
                                 .bytes = g->root->base.counts};
        st = exchange_alloc(g);
    }
    if (st) {
        zt_comm_finalize(g);
        return st;
    }
    *out = g;
    return ZT_OK;
}

void zt_comm_finalize(zt_comm *c)
{
    if (!c) return;
    watchdog_stop(c);
    group_free(&c->world);
    free(c->xs);
    free(c->xr);
    free(c->xs_len);
    free(c->xr_len);
    free(c->reqs[0].r);
    free(c->reqs[1].r);
    zt_free(c->scratch);
    if (c->did_init) MPI_Finalize();
    free(c);
}

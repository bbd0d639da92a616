/* ZT_CUDA_PROFILE=1: GPU time per backend entry, printed when the process exits.
 *
 * Everything runs in order on one stream, so events recorded as each entry starts queuing
 * its work split the stream's time into consecutive pieces: the piece from one event to the
 * next belongs to the entry that recorded the first. An event recorded just before each
 * synchronisation ends the last piece; the piece from it to the next entry's event is time
 * the GPU waited for the host ("host gaps"). Events come from a fixed pool and are read back
 * whenever the backend synchronises the stream anyway. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile_cuda.h"

enum { POOL = 8192, OPS = 64 };

static struct {
    int on;
    cudaStream_t stream;
    cudaEvent_t ev[POOL];
    const char *what[POOL]; /* the entry that starts at this event; NULL: a synchronisation */
    int n;
    cudaEvent_t last; /* the previous harvest's final event, and what started there */
    const char *last_what;
    const char *op[OPS];
    double ms[OPS], gap_ms;
    long calls[OPS];
} P;

static int slot(const char *what)
{
    for (int i = 0; i < OPS - 1; i++) {
        if (!P.op[i]) P.op[i] = what;
        if (!strcmp(P.op[i], what)) return i;
    }
    P.op[OPS - 1] = "(other)";
    return OPS - 1;
}

static void harvest(void)
{
    if (!P.n) return;
    cudaEventSynchronize(P.ev[P.n - 1]);
    for (int i = 0; i < P.n; i++) {
        cudaEvent_t prev = i ? P.ev[i - 1] : P.last;
        const char *what = i ? P.what[i - 1] : P.last_what;
        float ms = 0;
        if (!prev || cudaEventElapsedTime(&ms, prev, P.ev[i]) != cudaSuccess) ms = 0;
        if (what) {
            int k = slot(what);
            P.ms[k] += ms;
            P.calls[k]++;
        } else {
            P.gap_ms += ms;
        }
    }
    /* the final event starts the next harvest's first piece: keep it in the pool's last slot */
    cudaEvent_t keep = P.ev[P.n - 1];
    P.ev[P.n - 1] = P.ev[POOL - 1];
    P.ev[POOL - 1] = keep;
    P.last = keep;
    P.last_what = P.what[P.n - 1];
    P.n = 0;
}

static void record(const char *what)
{
    if (P.n == POOL - 1) harvest(); /* the last slot holds the previous harvest's final event */
    P.what[P.n] = what;
    cudaEventRecord(P.ev[P.n++], P.stream);
}

static void report(void)
{
    record(NULL);
    harvest();
    double total = P.gap_ms;
    for (int i = 0; i < OPS && P.op[i]; i++) total += P.ms[i];
    fprintf(stderr, "zt: CUDA profile (ZT_CUDA_PROFILE=1): %.1f ms of stream time\n", total);
    fprintf(stderr, "  %-26s %8s %11s %7s\n", "entry", "calls", "ms", "share");
    for (;;) { /* largest first */
        int best = -1;
        for (int i = 0; i < OPS && P.op[i]; i++)
            if (P.calls[i] > 0 && (best < 0 || P.ms[i] > P.ms[best])) best = i;
        if (best < 0) break;
        fprintf(stderr, "  %-26s %8ld %11.2f %6.1f%%\n", P.op[best], P.calls[best], P.ms[best],
                100 * P.ms[best] / (total > 0 ? total : 1));
        P.calls[best] = 0;
    }
    fprintf(stderr, "  %-26s %8s %11.2f %6.1f%%\n", "(host gaps)", "", P.gap_ms, 100 * P.gap_ms / (total > 0 ? total : 1));
}

void zt_cuda_profile_init(cudaStream_t s)
{
    const char *v = getenv("ZT_CUDA_PROFILE");
    if (!v || strcmp(v, "1")) return;
    P.stream = s;
    for (int i = 0; i < POOL; i++)
        if (cudaEventCreate(&P.ev[i]) != cudaSuccess) return;
    P.on = 1;
    atexit(report);
}

void zt_cuda_profile_mark(const char *what)
{
    if (P.on) record(what);
}

void zt_cuda_profile_sync(void)
{
    if (P.on) record(NULL);
}

void zt_cuda_profile_synced(void)
{
    if (P.on) harvest();
}

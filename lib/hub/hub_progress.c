/* hub: download progress. On a terminal one status line (files, bytes, rate, ETA and the files in
 * flight with their percentage) redrawn five times a second; elsewhere a plain line every 10 s.
 * Each finished file gets its own line either way. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hub_internal.h"
#include "lib/core/log.h"

double hub_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void hub_format_bytes(long long bytes, char *out, size_t n)
{
    static const char *unit[] = {"B", "kB", "MB", "GB", "TB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1000 && u < 4) v /= 1000, u++;
    snprintf(out, n, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

void hub_progress_start(hub_progress *p, long long total, int nfiles)
{
    *p = (hub_progress){.start = hub_now(), .total = total, .nfiles = nfiles};
    p->last_line = p->start;
}

static void eta(double secs, char *out, size_t n)
{
    if (!(secs < 1e7)) snprintf(out, n, "--");
    else if (secs < 60) snprintf(out, n, "%.0fs", secs);
    else if (secs < 3600) snprintf(out, n, "%dm%02ds", (int)secs / 60, (int)secs % 60);
    else snprintf(out, n, "%dh%02dm", (int)secs / 3600, (int)secs / 60 % 60);
}

void hub_progress_draw(hub_progress *p, const hub_progress_item *active, int n)
{
    double now = hub_now(), secs = now - p->start;
    if (now - p->last_draw < 0.2) return;
    p->last_draw = now;
    char done[32], total[32], rate[32], left[32];
    double bps = secs > 0 ? (double)p->done / secs : 0;
    hub_format_bytes(p->done, done, sizeof done);
    hub_format_bytes(p->total, total, sizeof total);
    hub_format_bytes((long long)bps, rate, sizeof rate);
    eta(bps > 0 ? (double)(p->total - p->done) / bps : 1e9, left, sizeof left);
    size_t o = (size_t)snprintf(p->line, sizeof p->line, "[%d/%d files] %s / %s  %s/s  ETA %s", p->files_done,
                                p->nfiles, done, total, rate, left);
    for (int i = 0; i < n && o < 120; i++) {
        const char *base = strrchr(active[i].path, '/') ? strrchr(active[i].path, '/') + 1 : active[i].path;
        double pct = active[i].size > 0 ? 100.0 * (double)active[i].done / (double)active[i].size : 100;
        o += (size_t)snprintf(p->line + o, sizeof p->line - o, "  %.24s %.0f%%", base, pct);
        if (o >= sizeof p->line) o = sizeof p->line - 1;
    }
    if (zt_log_status(p->line) || now - p->last_line < 10) return;
    p->last_line = now;
    zt_log_info("%s", p->line);
}

void hub_progress_file_done(hub_progress *p, const char *path, long long bytes, double secs)
{
    char size[32], rate[32];
    p->files_done++;
    hub_format_bytes(bytes, size, sizeof size);
    hub_format_bytes(secs > 0 ? (long long)((double)bytes / secs) : 0, rate, sizeof rate);
    zt_log_info("downloaded %s (%s in %.1fs, %s/s)", path, size, secs, rate);
}

void hub_progress_end(hub_progress *p) { zt_log_status(NULL); }

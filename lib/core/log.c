#include "log.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>
#include <unistd.h>

static FILE *mirror;
static int log_rank; /* 0, or this process's rank when it is not the first */

void zt_log_set_rank(int rank) { log_rank = rank; }
int zt_log_rank(void) { return log_rank; }
static char status[512]; /* the status line shown on a terminal, "" when none */

int zt_log_status(const char *line)
{
    static int tty = -1;
    if (tty < 0) tty = isatty(2);
    if (!tty) return 0;
    snprintf(status, sizeof status, "%s", line ? line : "");
    fprintf(stderr, "\r\033[K%s", status);
    fflush(stderr);
    return 1;
}

static zt_log_level current_level(void)
{
    static int level = -1;
    if (level < 0) {
        const char *s = getenv("ZT_LOG");
        level = ZT_LOG_INFO;
        if (s && !strcmp(s, "error")) level = ZT_LOG_ERROR;
        if (s && !strcmp(s, "warn")) level = ZT_LOG_WARN;
        if (s && !strcmp(s, "debug")) level = ZT_LOG_DEBUG;
    }
    return (zt_log_level)level;
}

int zt_log_enabled(zt_log_level level) { return level <= current_level() && (!log_rank || level <= ZT_LOG_WARN); }

void zt_log_set_mirror(FILE *f) { mirror = f; }

void zt_log(zt_log_level level, const char *fmt, ...)
{
    static const char *prefix[] = {"zt: error: ", "zt: warning: ", "", "zt: debug: "};
    if (!zt_log_enabled(level) && !mirror) return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (zt_log_enabled(level)) {
        if (status[0]) fprintf(stderr, "\r\033[K"); /* the log line replaces the status line... */
        if (log_rank) fprintf(stderr, "%srank %d: %s\n", prefix[level], log_rank, line);
        else fprintf(stderr, "%s%s\n", prefix[level], line);
        if (status[0]) fprintf(stderr, "%s", status); /* ...which is drawn again below it */
        fflush(stderr);
    }
    if (mirror) {
        fprintf(mirror, "%s%s\n", prefix[level], line);
        fflush(mirror);
    }
}

double zt_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

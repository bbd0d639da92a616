/* core/log: leveled logging to stderr (human output; machine output goes to stdout).
 *
 *     zt_log_info("loaded %d tensors from '%s'", n, path);
 *
 * The level comes from ZT_LOG (error|warn|info|debug), default info. An optional
 * mirror file (train.log of a run) receives every line as well. On a terminal a
 * status line (a progress bar) can stay at the bottom: log lines print above it.
 */
#ifndef ZT_CORE_LOG_H
#define ZT_CORE_LOG_H

#include <stdio.h>

typedef enum { ZT_LOG_ERROR, ZT_LOG_WARN, ZT_LOG_INFO, ZT_LOG_DEBUG } zt_log_level;

void zt_log(zt_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void zt_log_set_mirror(FILE *f); /* NULL to stop mirroring */
int zt_log_enabled(zt_log_level level);
/* In a job of several ranks: rank R > 0 prints only warnings and errors, prefixed "rank R: ". */
void zt_log_set_rank(int rank);
int zt_log_rank(void); /* 0 until set */
/* Draws (or with NULL clears) the status line when stderr is a terminal; 0 elsewhere. */
int zt_log_status(const char *line);

#define zt_log_error(...) zt_log(ZT_LOG_ERROR, __VA_ARGS__)
#define zt_log_warn(...) zt_log(ZT_LOG_WARN, __VA_ARGS__)
#define zt_log_info(...) zt_log(ZT_LOG_INFO, __VA_ARGS__)
#define zt_log_debug(...) zt_log(ZT_LOG_DEBUG, __VA_ARGS__)

/* Seconds on the monotonic clock (for durations). */
double zt_now_s(void);

#endif

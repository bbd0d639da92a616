#include "log.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static FILE *mirror;

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

int zt_log_enabled(zt_log_level level) { return level <= current_level(); }

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
    if (zt_log_enabled(level)) fprintf(stderr, "%s%s\n", prefix[level], line);
    if (mirror) {
        fprintf(mirror, "%s%s\n", prefix[level], line);
        fflush(mirror);
    }
}

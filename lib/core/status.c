#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char errbuf[1024];

/* An error is one line: a newline or another control character a message quotes (a file
 * name, a value the user gave) is written as \n, \t, \r or \xHH. */
static void escape_controls(char *s, size_t cap)
{
    size_t i = 0;
    while (s[i] && (unsigned char)s[i] >= 0x20 && s[i] != 0x7f) i++;
    if (!s[i]) return;
    char out[sizeof errbuf];
    size_t n = 0;
    cap = cap < sizeof out ? cap : sizeof out;
    for (const unsigned char *c = (const unsigned char *)s; *c && n + 5 < cap; c++) {
        if (*c == '\n') n += (size_t)snprintf(out + n, cap - n, "\\n");
        else if (*c == '\t') n += (size_t)snprintf(out + n, cap - n, "\\t");
        else if (*c == '\r') n += (size_t)snprintf(out + n, cap - n, "\\r");
        else if (*c < 0x20 || *c == 0x7f) n += (size_t)snprintf(out + n, cap - n, "\\x%02x", *c);
        else out[n++] = (char)*c;
    }
    out[n] = 0;
    memcpy(s, out, n + 1);
}

zt_status zt_fail(zt_status code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    escape_controls(errbuf, sizeof errbuf);
    return code;
}

zt_status zt_fail_context(zt_status code, const char *fmt, ...)
{
    char prefix[512], old[sizeof errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    escape_controls(prefix, sizeof prefix);
    memcpy(old, errbuf, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof errbuf - 3) n = sizeof errbuf - 3;
    memcpy(errbuf, prefix, n);
    memcpy(errbuf + n, ": ", 2);
    size_t room = sizeof errbuf - n - 3, m = strlen(old);
    if (m > room) m = room;
    memcpy(errbuf + n + 2, old, m);
    errbuf[n + 2 + m] = 0;
    return code;
}

const char *zt_errmsg(void) { return errbuf[0] ? errbuf : "unknown error"; }

void zt_errclear(void) { errbuf[0] = 0; }

int zt_exit_code(zt_status st)
{
    switch (st) {
    case ZT_OK: return 0;
    case ZT_EUSER: return 2;
    default: return 1;
    }
}

void zt_assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "zt: internal error: assertion '%s' failed at %s:%d\n", expr, file, line);
    abort();
}

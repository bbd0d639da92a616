/* core/status: error codes and the last error message.
 *
 * The library never exits: a function that can fail returns a zt_status and
 * leaves a message that the command layer prints. Broken invariants (bugs,
 * not user errors) use ZT_ASSERT, which prints file:line and aborts.
 *
 *     if (n < 0) return zt_fail(ZT_EUSER, "%s: negative size %d", path, n);
 *     ...
 *     zt_status st = zt_llama_load(&m, dir);
 *     if (st) { fprintf(stderr, "zt: error: %s\n", zt_errmsg()); return zt_exit_code(st); }
 */
#ifndef ZT_CORE_STATUS_H
#define ZT_CORE_STATUS_H

typedef enum zt_status {
    ZT_OK = 0,
    ZT_EUSER,    /* bad input from the user: usage, recipe, data, model files (exit 2) */
    ZT_EIO,      /* the system failed us: I/O error, disk full (exit 1) */
    ZT_ENOMEM,   /* out of memory (exit 1) */
    ZT_ERUNTIME, /* any other runtime failure (exit 1) */
} zt_status;

/* Sets the message (printf-style) and returns code, so a function fails in one line. */
zt_status zt_fail(zt_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends "prefix: " to the current message (context added on the way up). */
zt_status zt_fail_context(zt_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

const char *zt_errmsg(void);
void zt_errclear(void);
int zt_exit_code(zt_status st);

void zt_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define ZT_ASSERT(x) ((x) ? (void)0 : zt_assert_fail(#x, __FILE__, __LINE__))

#endif

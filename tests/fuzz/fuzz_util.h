/* What the harnesses share: the files a parser reads, written into a scratch
 * directory of this process (removed at exit), and the check that a failure is
 * the expected kind with a message. */
#ifndef ZT_TESTS_FUZZ_UTIL_H
#define ZT_TESTS_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/status.h"

/* Warnings about bad input are expected by the million: errors only. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    setenv("ZT_LOG", "error", 0);
    return 0;
}

enum { FUZZ_MAX_FILES = 8 };
static char fuzz_root[64], fuzz_files[FUZZ_MAX_FILES][128];

static void fuzz_cleanup(void)
{
    for (int i = 0; i < FUZZ_MAX_FILES && fuzz_files[i][0]; i++) unlink(fuzz_files[i]);
    rmdir(fuzz_root);
}

/* The scratch directory, made on first use. */
static const char *fuzz_dir(void)
{
    if (!fuzz_root[0]) {
        snprintf(fuzz_root, sizeof fuzz_root, "/tmp/zt-fuzz-%ld", (long)getpid());
        if (mkdir(fuzz_root, 0700)) abort();
        atexit(fuzz_cleanup);
    }
    return fuzz_root;
}

/* Writes data to <scratch>/name and returns the path (valid until the next call with that name). */
static const char *fuzz_write(const char *name, const void *data, size_t size)
{
    int i = 0;
    char path[128];
    snprintf(path, sizeof path, "%s/%s", fuzz_dir(), name);
    while (i < FUZZ_MAX_FILES && fuzz_files[i][0] && strcmp(fuzz_files[i], path)) i++;
    if (i == FUZZ_MAX_FILES) abort();
    strcpy(fuzz_files[i], path);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) abort();
    return fuzz_files[i];
}

/* A failure must be `want` with a message that names `what` (when not NULL). */
static void fuzz_check_failure(zt_status st, zt_status want, const char *what)
{
    if (st != want || !zt_errmsg()[0] || (what && !strstr(zt_errmsg(), what))) {
        fprintf(stderr, "unexpected failure %d (want %d naming '%s'): %s\n", st, want, what ? what : "", zt_errmsg());
        abort();
    }
}

/* Splits data at NUL bytes into up to n NUL-terminated parts (missing ones are ""); free(*buf). */
static void fuzz_split(const unsigned char *data, size_t size, char **buf, const char **parts, int n)
{
    *buf = malloc(size + 1);
    if (!*buf) abort();
    memcpy(*buf, data, size);
    (*buf)[size] = 0;
    char *at = *buf;
    for (int i = 0; i < n; i++) {
        parts[i] = at;
        at += strlen(at);
        if (at < *buf + size) at++; /* past its NUL byte; at the end, the rest are "" */
    }
}

#endif

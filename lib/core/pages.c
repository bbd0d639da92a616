#define _GNU_SOURCE
#include "pages.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arena.h"

#if defined(__SANITIZE_ADDRESS__)
#define ZT_PAGES_CALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZT_PAGES_CALLOC 1
#endif
#endif

#ifndef ZT_PAGES_CALLOC
/* The mapping's length sits in a header page before the memory handed out. */
static size_t page(void) { return (size_t)sysconf(_SC_PAGESIZE); }
#endif

void *zt_pages_alloc(size_t bytes)
{
#ifdef ZT_PAGES_CALLOC
    return zt_calloc_aligned(bytes);
#else
    size_t pg = page(), len = pg + ((bytes + pg - 1) / pg) * pg;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    /* huge pages where the kernel offers them: a gathered 100 MB layer then faults in 50
     * times instead of 25000 (THP "madvise" mode, the usual default, needs the hint) */
    madvise(base, len, MADV_HUGEPAGE);
    memcpy(base, &len, sizeof len);
    return base + pg;
#endif
}

void zt_pages_free(void *p)
{
    if (!p) return;
#ifdef ZT_PAGES_CALLOC
    zt_free(p);
#else
    char *base = (char *)p - page();
    size_t len;
    memcpy(&len, base, sizeof len);
    munmap(base, len);
#endif
}

void zt_pages_discard(void *p, size_t bytes)
{
#ifdef ZT_PAGES_CALLOC
    memset(p, 0, bytes);
#else
    uintptr_t a = (uintptr_t)p, b = a + bytes, pg = page();
    uintptr_t ia = (a + pg - 1) / pg * pg, ib = b / pg * pg; /* the whole pages inside */
    if (ia >= ib) {
        memset(p, 0, bytes);
        return;
    }
    memset(p, 0, ia - a);
    memset((void *)ib, 0, b - ib);
    madvise((void *)ia, ib - ia, MADV_DONTNEED); /* private anonymous pages: zero-filled when touched again */
#endif
}

static size_t status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0, n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n)) {
            kb = strtoull(line + n, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}

size_t zt_peak_rss_bytes(void) { return status_kb("VmHWM:"); }

size_t zt_rss_bytes(void) { return status_kb("VmRSS:"); }

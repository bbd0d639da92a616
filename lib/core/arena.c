#include "arena.h"

#include <stdlib.h>
#include <string.h>

void *zt_calloc_aligned(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, ZT_ALIGN, bytes ? zt_align_up(bytes) : ZT_ALIGN)) return NULL;
    memset(p, 0, bytes);
    return p;
}

void zt_free(void *p) { free(p); }

zt_status zt_arena_init(zt_arena *a, size_t bytes)
{
    a->size = zt_align_up(bytes);
    a->used = 0;
    a->base = zt_calloc_aligned(a->size);
    if (!a->base) return zt_fail(ZT_ENOMEM, "out of memory allocating %zu bytes", a->size);
    return ZT_OK;
}

void *zt_arena_alloc(zt_arena *a, size_t bytes)
{
    size_t n = zt_align_up(bytes);
    ZT_ASSERT(a->used + n <= a->size);
    void *p = a->base + a->used;
    a->used += n;
    return p;
}

void zt_arena_free(zt_arena *a)
{
    zt_free(a->base);
    a->base = NULL;
    a->size = a->used = 0;
}

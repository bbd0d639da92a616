/* core/arena: one allocation carved into many aligned pieces (llm.c style:
 * sizes first, then one malloc, then pointers into it).
 *
 *     zt_arena a;
 *     if (zt_arena_init(&a, bytes)) return ...;
 *     float *x = zt_arena_alloc(&a, n * sizeof(float));
 *     ...
 *     zt_arena_free(&a);
 *
 * Pieces are 64-byte aligned and zeroed. zt_arena_alloc asserts that the
 * arena was sized right (running out is a bug in the size computation).
 */
#ifndef ZT_CORE_ARENA_H
#define ZT_CORE_ARENA_H

#include <stddef.h>

#include "status.h"

#define ZT_ALIGN 64

typedef struct zt_arena {
    char *base;
    size_t size; /* bytes */
    size_t used; /* bytes */
} zt_arena;

zt_status zt_arena_init(zt_arena *a, size_t bytes);
void *zt_arena_alloc(zt_arena *a, size_t bytes);
void zt_arena_free(zt_arena *a);

/* bytes rounded up to the alignment: for computing arena sizes */
static inline size_t zt_align_up(size_t bytes) { return (bytes + ZT_ALIGN - 1) & ~(size_t)(ZT_ALIGN - 1); }

/* Aligned, zeroed allocation outside an arena; NULL on failure. Free with zt_free. */
void *zt_calloc_aligned(size_t bytes);
void zt_free(void *p);

#endif

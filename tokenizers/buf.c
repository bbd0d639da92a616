#include <stdlib.h>
#include <string.h>

#include "tokenizers/tok_internal.h"

zt_status zt_ivec_push(zt_ivec *v, int32_t x)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        int32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p) return zt_fail(ZT_ENOMEM, "out of memory for %zu token ids", cap);
        v->v = p;
        v->cap = cap;
    }
    v->v[v->n++] = x;
    return ZT_OK;
}

zt_status zt_buf_append(zt_buf *b, const void *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) return zt_fail(ZT_ENOMEM, "out of memory for %zu bytes of text", cap);
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
    return ZT_OK;
}

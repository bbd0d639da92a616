/* AdamW with 8-bit moments (adamw8bit.h). */
#include "lib/optim/adamw8bit.h"

#include <math.h>
#include <string.h>

#include "lib/core/status.h"

const zt_dyn8 *zt_adamw8_map(int unsigned_map) { return unsigned_map ? zt_dyn8_unsigned() : zt_dyn8_signed(); }

float zt_adamw8_absmax(const float *x, size_t n)
{
    /* |x| orders as its bits do (for numbers): an integer maximum, which vectorizes */
    uint32_t a = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &x[i], sizeof b);
        b &= 0x7FFFFFFFu;
        a = b > a ? b : a;
    }
    float f;
    memcpy(&f, &a, sizeof f);
    return f;
}

void zt_adamw8_quantize(const zt_dyn8 *map, const float *x, size_t n, float absmax, uint8_t *q)
{
    if (!(absmax > 0.0f)) {
        memset(q, zt_dyn8_index(map, 0.0f), n);
        return;
    }
    for (size_t i0 = 0; i0 < n; i0 += ZT_ADAMW8_BLOCK) { /* the divisions apart, where they vectorize */
        size_t k = n - i0 < ZT_ADAMW8_BLOCK ? n - i0 : ZT_ADAMW8_BLOCK;
        float s[ZT_ADAMW8_BLOCK];
        for (size_t i = 0; i < k; i++) s[i] = x[i0 + i] / absmax;
        for (size_t i = 0; i < k; i++) q[i0 + i] = (uint8_t)zt_dyn8_index(map, s[i]);
    }
}

void zt_adamw8_dequantize(const zt_dyn8 *map, const uint8_t *q, size_t n, float absmax, float *x)
{
    for (size_t i = 0; i < n; i++) x[i] = map->code[q[i]] * absmax;
}

void zt_adamw8_update(const zt_adamw_consts *c, zt_adamw_kernel *kernel, float *param, const float *grad,
                      const uint8_t *q1, const uint8_t *q2, float a1, float a2, size_t n, uint16_t *param_bf16,
                      float *m, float *v)
{
    ZT_ASSERT(n <= ZT_ADAMW8_BLOCK);
    zt_adamw8_dequantize(zt_adamw8_map(0), q1, n, a1, m);
    zt_adamw8_dequantize(zt_adamw8_map(1), q2, n, a2, v);
    kernel(c, param, grad, m, v, n, param_bf16);
}

static int reproduces(const zt_dyn8 *map, const float *x, size_t n, float absmax, uint8_t *q)
{
    zt_adamw8_quantize(map, x, n, absmax, q);
    for (size_t i = 0; i < n; i++)
        if (map->code[q[i]] * absmax != x[i]) return 0;
    return 1;
}

float zt_adamw8_recover(const zt_dyn8 *map, const float *x, size_t n, uint8_t *q)
{
    float pos = 0.0f, neg = 0.0f;
    for (size_t i = 0; i < n; i++) {
        pos = x[i] > pos ? x[i] : pos;
        neg = -x[i] > neg ? -x[i] : neg;
    }
    if (pos == 0.0f && neg == 0.0f) return zt_adamw8_quantize(map, x, n, 0.0f, q), 0.0f;
    /* The largest |x| had the code 1 (exactly absmax) when positive, the smallest code map->code[0]
       when negative; neg / -map->code[0] is then within an ulp or two of the absmax it came from. */
    float a = pos > neg || map->code[0] == 0.0f ? pos : neg / -map->code[0]; /* the unsigned map: no negatives */
    float tries[5] = {a, nextafterf(a, 0.0f), nextafterf(a, INFINITY), nextafterf(nextafterf(a, 0.0f), 0.0f),
                      nextafterf(nextafterf(a, INFINITY), INFINITY)};
    for (int i = 0; i < 5; i++)
        if (reproduces(map, x, n, tries[i], q)) return tries[i];
    a = pos > neg ? pos : neg;
    zt_adamw8_quantize(map, x, n, a, q);
    return a;
}

/* Block j of piece p, whole here (cut NULL) or its part (cut, at held index k). */
static void block_step(const zt_adamw8_piece *p, uint32_t j, const zt_adamw8_cut *cut, size_t k,
                       zt_adamw_kernel *kernel, float *param, const float *grad, uint8_t *const q[2], float *const a[2],
                       uint16_t *param16, float *held, float *slots)
{
    uint32_t n;
    uint64_t l = p->local + zt_adamw8_block_at(p, j, &n), f = p->flat + (l - p->local);
    float mv[2][ZT_ADAMW8_BLOCK];
    zt_adamw8_update(&p->c, kernel, param + l, grad + l, q[0] + l, q[1] + l, a[0][p->absmax + j], a[1][p->absmax + j],
                     n, param16 ? param16 + f : NULL, mv[0], mv[1]);
    for (int m = 0; m < 2; m++) {
        float x = zt_adamw8_absmax(mv[m], n);
        if (!cut) {
            a[m][p->absmax + j] = x;
            zt_adamw8_quantize(zt_adamw8_map(m), mv[m], n, x, q[m] + l);
            continue;
        }
        memcpy(held + k * 2 * ZT_ADAMW8_BLOCK + (size_t)m * ZT_ADAMW8_BLOCK, mv[m], n * sizeof(float));
        for (int e = 0; e < 2; e++)
            if (cut->slot[e] >= 0) slots[cut->slot[e] + m] = x;
    }
}

void zt_adamw8_step(const zt_adamw8_piece *pieces, const zt_adamw8_block *blocks, size_t nb, const zt_adamw8_cut *cut,
                    size_t nc, float *param, const float *grad, uint8_t *q1, uint8_t *q2, float *a1, float *a2,
                    uint16_t *param16, float *held, float *slots)
{
    zt_adamw_kernel *kernel = zt_adamw_kernel_dispatch();
    uint8_t *const q[2] = {q1, q2};
    float *const a[2] = {a1, a2};
#pragma omp parallel for schedule(static) if (nb + nc > 16)
    for (size_t i = 0; i < nb + nc; i++) {
        const zt_adamw8_cut *c = i < nb ? NULL : &cut[i - nb];
        uint32_t piece = c ? c->piece : blocks[i].piece, j = c ? c->j : blocks[i].j;
        block_step(&pieces[piece], j, c, i - nb, kernel, param, grad, q, a, param16, held, slots);
    }
}

void zt_adamw8_finish(const zt_adamw8_release *r, size_t nr, uint8_t *q1, uint8_t *q2, float *a1, float *a2,
                      const float *held, const float *slots)
{
    uint8_t *q[2] = {q1, q2};
    float *a[2] = {a1, a2};
    for (size_t j = 0; j < nr; j++)
        for (int k = 0; k < 2; k++) {
            float x = 0.0f;
            for (uint32_t i = 0; i < r[j].nslots; i++) {
                float y = slots[r[j].first + 2 * i + (uint32_t)k];
                x = y > x ? y : x;
            }
            a[k][r[j].absmax] = x;
            zt_adamw8_quantize(zt_adamw8_map(k),
                               held + (size_t)r[j].held * 2 * ZT_ADAMW8_BLOCK + (size_t)k * ZT_ADAMW8_BLOCK, r[j].n, x,
                               q[k] + r[j].local);
        }
}

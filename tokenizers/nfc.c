/* NFC (Unicode Standard Annex #15), the normalizer of Qwen2's tokenizer.json:
 * a quick check first (most text is NFC already), else decompose canonically,
 * put combining marks in canonical order, and compose again. */
#include <stdlib.h>

#include "tokenizers/tok_internal.h"
#include "tokenizers/unicode.h"

/* Hangul syllables are composed by arithmetic (Unicode 3.12) */
enum {
    S_BASE = 0xAC00,
    L_BASE = 0x1100,
    V_BASE = 0x1161,
    T_BASE = 0x11A7,
    L_COUNT = 19,
    V_COUNT = 21,
    T_COUNT = 28,
    N_COUNT = V_COUNT * T_COUNT,
    S_COUNT = L_COUNT * N_COUNT,
};

/* a byte of invalid UTF-8, carried through as a starter that never composes */
#define RAW_BYTE 0x110000u

static int ccc_of(uint32_t cp) { return cp < 0x300 ? 0 : zt_uni_lookup(zt_uni_ccc, zt_uni_ccc_n, cp); }

static int is_nfc(const char *t, size_t n)
{
    int last = 0;
    for (size_t i = 0; i < n;) {
        if ((unsigned char)t[i] < 0x80) {
            last = 0;
            i++;
            continue;
        }
        uint32_t cp;
        i += zt_utf8_next(t + i, n - i, &cp);
        if (cp == ZT_UNI_INVALID || cp < 0x300) {
            last = 0;
            continue;
        }
        int ccc = ccc_of(cp);
        if ((ccc && last > ccc) || zt_uni_lookup(zt_uni_nfc_qc, zt_uni_nfc_qc_n, cp) != ZT_UNI_QC_YES) return 0;
        last = ccc;
    }
    return 1;
}

static const zt_uni_decomp *decomp_of(uint32_t cp)
{
    int lo = 0, hi = zt_uni_decomps_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (zt_uni_decomps[mid].cp == cp) return &zt_uni_decomps[mid];
        if (zt_uni_decomps[mid].cp < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* The primary composite of a + b, or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= L_BASE && a < L_BASE + L_COUNT && b >= V_BASE && b < V_BASE + V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a >= S_BASE && a < S_BASE + S_COUNT && (a - S_BASE) % T_COUNT == 0 && b > T_BASE && b < T_BASE + T_COUNT)
        return a + (b - T_BASE);
    int lo = 0, hi = zt_uni_comps_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const zt_uni_comp *c = &zt_uni_comps[mid];
        if (c->first == a && c->second == b) return c->composite;
        if (c->first < a || (c->first == a && c->second < b)) lo = mid + 1;
        else hi = mid - 1;
    }
    return 0;
}

/* Decomposes text into cp[] (room for 4 per byte: no decomposition is longer); returns the count. */
static size_t decompose(const char *t, size_t n, uint32_t *cp)
{
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t k = zt_utf8_next(t + i, n - i, &c);
        if (c == ZT_UNI_INVALID) {
            for (size_t j = 0; j < k; j++) cp[m++] = RAW_BYTE + (unsigned char)t[i + j];
        } else if (c >= S_BASE && c < S_BASE + S_COUNT) {
            uint32_t s = c - S_BASE;
            cp[m++] = L_BASE + s / N_COUNT;
            cp[m++] = V_BASE + (s % N_COUNT) / T_COUNT;
            if (s % T_COUNT) cp[m++] = T_BASE + s % T_COUNT;
        } else {
            const zt_uni_decomp *d = c < 0xC0 ? NULL : decomp_of(c);
            if (!d) cp[m++] = c;
            for (int j = 0; d && j < d->len; j++) cp[m++] = zt_uni_decomp_pool[d->offset + j];
        }
        i += k;
    }
    return m;
}

zt_status zt_nfc(const char *text, size_t len, zt_buf *out)
{
    if (is_nfc(text, len)) return zt_buf_append(out, text, len);
    uint32_t *cp = malloc((4 * len + 1) * sizeof *cp);
    uint8_t *ccc = malloc(4 * len + 1);
    if (!cp || !ccc) {
        free(cp);
        free(ccc);
        return zt_fail(ZT_ENOMEM, "out of memory normalizing %zu bytes", len);
    }
    size_t n = decompose(text, len, cp);
    for (size_t i = 0; i < n; i++) ccc[i] = cp[i] >= RAW_BYTE ? 0 : (uint8_t)ccc_of(cp[i]);
    /* canonical order: a stable sort of each run of marks by combining class */
    for (size_t i = 1; i < n; i++) {
        if (!ccc[i]) continue;
        uint32_t c = cp[i];
        uint8_t k = ccc[i];
        size_t j = i;
        for (; j > 0 && ccc[j - 1] > k; j--) {
            cp[j] = cp[j - 1];
            ccc[j] = ccc[j - 1];
        }
        cp[j] = c;
        ccc[j] = k;
    }
    /* compose: each character with the last starter unless something in between blocks it */
    size_t m = 0, starter = 0;
    int have_starter = 0, last = 0; /* last: class of the last character kept (0: the starter) */
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp[i];
        int k = ccc[i];
        if (have_starter && (last == 0 || last < k)) {
            uint32_t both = c < RAW_BYTE && cp[starter] < RAW_BYTE ? compose(cp[starter], c) : 0;
            if (both) {
                cp[starter] = both;
                continue;
            }
        }
        if (k == 0) {
            starter = m;
            have_starter = 1;
        }
        last = k;
        cp[m++] = c;
    }
    zt_status st = ZT_OK;
    for (size_t i = 0; i < m && !st; i++) {
        char u[4];
        if (cp[i] >= RAW_BYTE) {
            u[0] = (char)(cp[i] - RAW_BYTE);
            st = zt_buf_append(out, u, 1);
        } else {
            st = zt_buf_append(out, u, zt_utf8_put(u, cp[i]));
        }
    }
    free(cp);
    free(ccc);
    return st;
}

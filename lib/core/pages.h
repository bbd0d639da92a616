/* core/pages: memory straight from the kernel, for the big arrays (parameters,
 * gradients, activations). Pages cost nothing until first written, and a range whose
 * contents are no longer needed goes back to the system while the addresses stay valid:
 * ZeRO stage 3 keeps the flat parameter array's addresses and holds memory only for the
 * layers gathered at the moment.
 *
 *     float *p = zt_pages_alloc(n * sizeof(float));   // zeroed, page aligned
 *     ...
 *     zt_pages_discard(p + lo, (hi - lo) * sizeof(float));  // reads as zeros again
 *     zt_pages_free(p);
 *
 * Under AddressSanitizer the memory comes from zt_calloc_aligned (so overruns are caught) and discard
 * writes zeros: the same results, without the memory saving.
 */
#ifndef ZT_CORE_PAGES_H
#define ZT_CORE_PAGES_H

#include <stddef.h>

void *zt_pages_alloc(size_t bytes); /* NULL when out of memory */
void zt_pages_free(void *p);        /* NULL is fine */
/* The whole pages inside [p, p + bytes) return to the system; the bytes of the range
 * read as zeros afterwards (the partial pages at its ends are zeroed in place). */
void zt_pages_discard(void *p, size_t bytes);

/* This process's peak resident memory (VmHWM) and its resident memory now (VmRSS), in bytes; 0 if
 * unknown. */
size_t zt_peak_rss_bytes(void);
size_t zt_rss_bytes(void);

#endif

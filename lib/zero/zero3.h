/* zero3: ZeRO stage 3's part of zt_zero (zero.h), for zero.c. */
#ifndef ZT_ZERO3_H
#define ZT_ZERO3_H

#include "zero.h"

zt_status zt_zero3_init(zt_zero *z, int prefetch_layers);
void zt_zero3_free(zt_zero *z);
/* The first collective that failed inside the model's hooks since the last call. */
zt_status zt_zero3_error(zt_zero *z);
size_t zt_zero3_gathered_peak(const zt_zero *z);

#endif

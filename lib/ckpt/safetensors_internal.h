/* ckpt/safetensors_internal: helpers shared by the safetensors reader and writer
 * (not part of the public API). */
#ifndef ZT_CKPT_SAFETENSORS_INTERNAL_H
#define ZT_CKPT_SAFETENSORS_INTERNAL_H

#include <stddef.h>

#include "lib/core/dtype.h"

#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"

/* zt_convert for a src at any byte address (file data need not be aligned); dst must be
 * aligned. Large conversions run on the OpenMP threads. */
void zt_st_convert(void *dst, zt_dtype dt, const void *src, zt_dtype st, size_t n);

/* Offset of the first byte of s that is not valid UTF-8, or a control byte that JSON
 * text may not hold raw (anything below 0x20 but tab, newline, return); len if none. */
size_t zt_st_utf8_check(const unsigned char *s, size_t len);

#endif

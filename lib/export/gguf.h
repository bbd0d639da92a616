/* export/gguf: a GGUF file (version 3, what llama.cpp, Ollama and LM Studio load): typed
 * key-value metadata, then tensors in f32, f16, bf16 or Q8_0, written in bounded chunks from
 * fp32 that a fill function supplies, into a temporary file renamed when complete.
 *
 *     zt_gguf *g = zt_gguf_new();
 *     zt_gguf_str(g, "general.architecture", "llama");
 *     zt_gguf_u32(g, "llama.block_count", 16);
 *     zt_gguf_add(g, "blk.0.attn_q.weight", ZT_GGUF_Q8_0, shape, 2, unit, fill, ctx);
 *     st = zt_gguf_finish(g, "out/model.gguf");
 *     zt_gguf_free(g);
 *
 * Shapes are given as Hugging Face writes them (rows first); the file stores them innermost
 * first, as GGML does. Q8_0: blocks of 32 elements along a row, each an f16 scale d = max|x| / 127
 * and 32 int8 codes round(x / d) (halves away from zero), computed in fp32 as llama.cpp's
 * reference quantizer does, so that the same weights give the same bytes. */
#ifndef ZT_EXPORT_GGUF_H
#define ZT_EXPORT_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

/* GGML's type numbers */
typedef enum { ZT_GGUF_F32 = 0, ZT_GGUF_F16 = 1, ZT_GGUF_Q8_0 = 8, ZT_GGUF_BF16 = 30 } zt_gguf_type;

/* "fp32", "fp16", "bf16", "q8_0" (-1 if none of them) */
int zt_gguf_type_parse(const char *s, zt_gguf_type *t);
const char *zt_gguf_type_name(zt_gguf_type t);
/* llama.cpp's file type number for a model whose matrices are t (general.file_type) */
uint32_t zt_gguf_file_type(zt_gguf_type t);

typedef struct zt_gguf zt_gguf;

zt_gguf *zt_gguf_new(void); /* NULL when out of memory */
void zt_gguf_free(zt_gguf *g);

/* Metadata, in the order added; a key added twice is an error (ZT_EUSER). */
zt_status zt_gguf_str(zt_gguf *g, const char *key, const char *value);
zt_status zt_gguf_u32(zt_gguf *g, const char *key, uint32_t value);
zt_status zt_gguf_f32(zt_gguf *g, const char *key, float value);
zt_status zt_gguf_bool(zt_gguf *g, const char *key, int value);
zt_status zt_gguf_str_array(zt_gguf *g, const char *key, const char *const *values, size_t n);
zt_status zt_gguf_i32_array(zt_gguf *g, const char *key, const int32_t *values, size_t n);
zt_status zt_gguf_f32_array(zt_gguf *g, const char *key, const float *values, size_t n);

/* Supplies n elements of a tensor from element offset on (row-major, Hugging Face's layout) as
 * fp32 into dst; offset and n are multiples of the tensor's unit. */
typedef zt_status (*zt_gguf_fill_fn)(void *ctx, float *dst, size_t offset, size_t n);

/* Records a tensor (1 to 4 dimensions) of type t, its data asked of fill while finish writes it,
 * unit elements or a multiple at a time (a row, or a permuted group of rows; 0: a row). Q8_0 on a
 * tensor whose rows are not a multiple of 32 is written f16, as llama.cpp's converter does. */
zt_status zt_gguf_add(zt_gguf *g, const char *name, zt_gguf_type t, const int64_t *shape, int ndim, size_t unit,
                      zt_gguf_fill_fn fill, void *ctx);

/* Writes the file at path (a temporary name, fsynced, renamed). */
zt_status zt_gguf_finish(const zt_gguf *g, const char *path);

/* Q8_0 of n elements (a multiple of 32) of x into out (n / 32 blocks of 34 bytes). */
void zt_gguf_q8_0(const float *x, size_t n, unsigned char *out);

#endif

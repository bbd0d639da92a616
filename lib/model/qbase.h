/* model/qbase: a frozen base model's linear weights held quantized (QLoRA), and the products that
 * use them. The q/k/v, o, gate/up and down weights of every layer are encoded (kernels/cpu/nf4.h):
 * NF4 in 64-element blocks with an fp32 absmax each (or, with double_quant, the absmax values in 8
 * bits), or int8 with an fp32 absmax per row. The embedding, the norms and the LM head stay as they
 * are. Once encoded, the weights' fp32 (and bf16) copies in m->params go back to the system.
 *
 * A product with a quantized weight dequantizes it a tile of rows at a time into a small fp32 buffer
 * and multiplies that (forward, and the input's gradient in backward): the weight is never whole in
 * fp32. The encoding is cached in cache_dir under a content key (the encoding, the shapes and a
 * CRC-32C of each weight), checked whole by a CRC-32C when mapped; a bad entry is built again with
 * a warning.
 *
 *     zt_qbase_open(&m, ZT_QBASE_NF4, 1, "~/.cache/zt", &hit);   // after zt_lora_attach
 *     ... zt_llama_forward_backward(&m, ...)                     // linear layers go through qbase
 *     zt_llama_free(&m);                                          // frees it
 */
#ifndef ZT_MODEL_QBASE_H
#define ZT_MODEL_QBASE_H

#include <stdint.h>

#include "llama.h"

typedef enum zt_qbase_kind { ZT_QBASE_NONE, ZT_QBASE_NF4, ZT_QBASE_INT8 } zt_qbase_kind;
extern const char *const zt_qbase_kind_names[3]; /* "none", "nf4", "int8" (lora.quantize_base) */

/* One encoded weight [rows, cols] at element off of the flat array; byte offsets into the data. */
typedef struct zt_qbase_matrix {
    uint64_t off;
    uint32_t rows, cols;
    uint64_t codes;   /* NF4: (n + 1) / 2 bytes; int8: n bytes */
    uint64_t scales;  /* fp32 absmax per block or row; with double_quant the 8-bit codes of those */
    uint64_t scales2; /* double_quant: fp32 absmax per 256 absmax values */
    float offset;     /* double_quant: the mean subtracted from the absmax values */
    uint32_t zero;
} zt_qbase_matrix;

typedef struct zt_qbase {
    zt_qbase_kind kind;
    int double_quant;
    int n;                       /* matrices: 4 a layer (q/k/v, o, gate/up, down) */
    const zt_qbase_matrix *mats; /* in the mapping or in own */
    const unsigned char *data;
    size_t bytes;         /* the encoding's size: header, matrices and data */
    void *map, *own;      /* the cache file's mapping, or the encoding built in memory */
    size_t cap;           /* elements of a tile: whole rows of any matrix fit */
    float *tile, *absmax; /* a tile of dequantized rows, and its blocks' absmax values */
    zt_real *tile_real;   /* the tile in zt_real (the double-precision build only) */
} zt_qbase;

/* Encodes m's linear weights (from m->params, the base frozen: m->lora attached), or maps the
 * cached encoding from cache_dir (*hit = 1; NULL: no cache), and frees their fp32 copies. ZT_EUSER
 * on a backend other than the CPU's, or for a weight that is NaN or infinite. */
zt_status zt_qbase_open(zt_llama *m, zt_qbase_kind kind, int double_quant, const char *cache_dir, int *hit);
void zt_qbase_free(zt_llama *m);
/* What zt_qbase_open holds for m, without encoding it (zt validate): the encoding and its tile
 * buffers, in bytes (0 when out of memory); *weights: the elements encoded, whose fp32 and bf16
 * copies go back to the system. */
size_t zt_qbase_bytes(const zt_llama *m, zt_qbase_kind kind, int double_quant, size_t *weights);
/* m->params' linear weights replaced by their quantized-then-dequantized values (what a model
 * trained on the quantized base computed with: zt export --merge, zt eval). Nothing is cached. */
zt_status zt_qbase_round_trip(zt_llama *m, zt_qbase_kind kind, int double_quant);

/* The products of llama.c's linear layers when the weight at element w of the flat array is
 * encoded (they return 0, doing nothing, when it is not): y[N, O] (rows ldy apart) = x[N, I]·Wᵀ +
 * beta·y, and dx[N, I] = dy[N, O]·W + dx_beta·dx, W the O rows of the weight from w on. */
int zt_qbase_forward(zt_llama *m, zt_real *y, int ldy, const zt_real *x, size_t w, int N, int O, int I, zt_real beta);
int zt_qbase_backward(zt_llama *m, zt_real *dx, zt_real dx_beta, const zt_real *dy, int ldy, size_t w, int N, int O,
                      int I);

/* Tiles of at most n elements (or one row) for zt_qbase_open calls from now on: for tests that need
 * many tiles of a small model. Not thread-safe. */
void zt_qbase_set_tile_elems(size_t n);

/* A LoRA adapter directory notes the base its adapters were trained on (zt_quantization.json):
 * write it, and read it back (ZT_QBASE_NONE when the file is absent). */
zt_status zt_qbase_note_write(const char *dir, zt_qbase_kind kind, int double_quant);
zt_status zt_qbase_note_read(const char *dir, zt_qbase_kind *kind, int *double_quant);

#endif

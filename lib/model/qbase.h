/* model/qbase: a frozen base model whose linear weights are held quantized (QLoRA), and the
 * products that use them.
 *
 * A quantized base is a model of its own layout (zt_qbase_init): in its flat array each Hugging
 * Face linear weight of a layer (q, k, v, o, gate, up, down; Phi-3's fused qkv and gate_up as one
 * each; a mixture of experts' router and every expert's gate, up and down), the tensors
 * bitsandbytes quantizes, is its encoding in place of its values; the embedding, the norms, the
 * biases and the LM head stay fp32. So a layer is still one contiguous
 * block of the flat array, and ZeRO stage 3 shards, gathers and streams the base (offload.param)
 * as any model's, the encodings travelling with the norms beside them: nothing of the base is
 * ever whole in fp32. An encoding (kernels/cpu/nf4.h): a 64-byte header (its kind, shape and,
 * with double_quant, the mean taken off the absmax values), then NF4 codes with an fp32 absmax per
 * 64-element block (double_quant: those in 8 bits, an fp32 absmax per 256 of them), or int8 codes
 * with an fp32 absmax per row; each part 64-byte aligned. qbase_read.h fills the flat array from a
 * model directory.
 *
 * A product with a quantized weight dequantizes it a tile of rows at a time into a small fp32 buffer
 * and multiplies that (forward, and the input's gradient in backward), from the model's array as
 * it is (a gathered unit at stage 3).
 *
 *     zt_qbase_init(&m, &cfg, zt_backend_cpu(), ZT_F32, ZT_QBASE_NF4, 1);  // the layout, unloaded
 *     zt_qbase_reader *r; zt_qbase_reader_open(&m, "model", &r);          // qbase_read.h
 *     zt_qbase_read(r, 0, m.numel, m.params);                           // or unit by unit
 *     ... zt_lora_attach(&m, ...); zt_llama_forward_backward(&m, ...)   // linear layers go through qbase
 */
#ifndef ZT_MODEL_QBASE_H
#define ZT_MODEL_QBASE_H

#include <stdint.h>

#include "llama.h"

typedef enum zt_qbase_kind { ZT_QBASE_NONE, ZT_QBASE_NF4, ZT_QBASE_INT8 } zt_qbase_kind;
extern const char *const zt_qbase_kind_names[3]; /* "none", "nf4", "int8" (lora.quantize_base) */

/* One encoded tensor of a layer; every layer's are laid out alike. */
typedef struct zt_qbase_part {
    size_t off;                    /* elements of the flat array from the layer block's start */
    uint32_t rows, cols, row0;     /* its shape; its first row in the layer's matrix (q, k, v stacked) */
    size_t codes, scales, scales2; /* byte offsets from its start: the codes, the absmax values (or
                                      their 8-bit codes), double_quant's absmax of those */
} zt_qbase_part;

typedef struct zt_qbase {
    zt_qbase_kind kind;
    int double_quant;
    int nparts, nmats;
    zt_qbase_part *part; /* a layer's encoded tensors, in layout order */
    /* a layer's matrix k: parts [first[k], first[k + 1]); the matrices are q/k/v, o, then gate/up
       and down, or a mixture's router, then each expert's gate/up and down */
    int *first;
    size_t cap;           /* elements of a tile: whole rows of any matrix fit */
    float *tile, *absmax; /* a tile of dequantized rows, and its blocks' absmax values (the model's backend's memory) */
    zt_real *tile_real;   /* the tile in zt_real (the double-precision build only) */
    /* double_quant: each layer's parts' offsets (layer · nparts + part), read from their headers
     * at first use (on a device a download; the base is frozen, so they never change); NaN: unread */
    float *offsets;
} zt_qbase;

/* A quantized base of config c, its weights not read (zeros): m's layout has the encodings in
 * place of the linear weights, and m has no gradient array. Its products dequantize a tile at a
 * time on the model's backend (the backend's nf4/int8 entries) and multiply it there. */
zt_status zt_qbase_init(zt_llama *m, const zt_llama_config *c, zt_backend *be, zt_dtype dtype, zt_qbase_kind kind,
                        int double_quant);
void zt_qbase_free(zt_llama *m);
/* What a quantized base of m's shape holds beside its flat array, without making it (zt
 * validate): the tile buffers and, while it is read, the pieces qbase_read.h converts, in bytes. */
size_t zt_qbase_buffer_bytes(const zt_llama *m);
/* GFLOP/s of zt_qbase_forward's tiled product (each tile of a weight dequantized, then multiplied)
 * for x [M, I] and a weight of I columns encoded as kind says: measured on the spot, a fraction of
 * a second; 0 when out of memory. */
double zt_qbase_gflops(zt_qbase_kind kind, int double_quant, int M, int I);
/* The model's parameters: m->numel, or for a quantized base its weights', not its encodings'. */
size_t zt_qbase_params(const zt_llama *m);
/* The elements a [rows, cols] weight's encoding takes in the flat array (llama_layout.c). */
size_t zt_qbase_tensor_elems(const zt_qbase *q, size_t rows, size_t cols);
/* Whether name is a linear weight a quantized base encodes (model.layers.N.mlp.down_proj.weight). */
int zt_qbase_is_linear(const char *name);

/* Encoding one [rows, cols] tensor into its place (zt_qbase_tensor_elems of them, zeroed first)
 * from its values in order, in pieces: NF4 pieces of whole 64-element blocks, int8 pieces of whole
 * rows (the last may be shorter); end checks them (name: the tensor, for messages) and writes the
 * header. Pieces of any size encode to the same bytes. */
typedef struct zt_qbase_encoder {
    const zt_qbase *q;
    unsigned char *part;
    size_t rows, cols, done, bad; /* elements encoded; of them NaN or infinite */
    float *absmax;                /* double_quant: every block's absmax, quantized at the end */
} zt_qbase_encoder;
zt_status zt_qbase_encode_begin(zt_qbase_encoder *e, const zt_qbase *q, size_t rows, size_t cols, void *part);
void zt_qbase_encode_piece(zt_qbase_encoder *e, const float *x, size_t n);
zt_status zt_qbase_encode_end(zt_qbase_encoder *e, const char *name);
/* ZT_OK when the encoding at part (its bytes in `bytes`) is one of q's for a [rows, cols] tensor
 * (its header); else ZT_EUSER saying what differs. */
zt_status zt_qbase_check_part(const zt_qbase *q, const void *part, size_t rows, size_t cols);
/* The encoding's header (bitsandbytes' serialization keeps the same facts elsewhere). */
void zt_qbase_write_header(const zt_qbase *q, void *part, size_t rows, size_t cols, float offset);
float zt_qbase_part_offset(const void *part);
/* Byte offsets of a [rows, cols] encoding's codes, absmax values and their absmax; its bytes. */
size_t zt_qbase_part_layout(const zt_qbase *q, size_t rows, size_t cols, size_t *codes, size_t *scales,
                            size_t *scales2);

/* m->params' linear weights replaced by their quantized-then-dequantized values (what a model
 * trained on the quantized base computed with: zt export --merge, zt eval), m an unquantized model. */
zt_status zt_qbase_round_trip(zt_llama *m, zt_qbase_kind kind, int double_quant);

/* One encoded weight [rows, cols] (enc: its zt_qbase_tensor_elems elements) decoded into y (a
 * bitsandbytes checkpoint opened unquantized: qbase_decode.h). */
zt_status zt_qbase_decode_tensor(const zt_qbase *q, const void *enc, size_t rows, size_t cols, float *y);

/* The products of llama.c's linear layers when the weight at element w of the flat array is
 * encoded (they return 0, doing nothing, when it is not): y[N, O] (rows ldy apart) = x[N, I]·Wᵀ +
 * beta·y, and dx[N, I] = dy[N, O]·W + dx_beta·dx, W the layer's whole matrix [O, I] at w. */
int zt_qbase_forward(zt_llama *m, zt_real *y, int ldy, const zt_real *x, size_t w, int N, int O, int I, zt_real beta);
int zt_qbase_backward(zt_llama *m, zt_real *dx, zt_real dx_beta, const zt_real *dy, int ldy, size_t w, int N, int O,
                      int I);

/* Tiles of at most n elements (or one row) for zt_qbase_init calls from now on: for tests that need
 * many tiles of a small model. Not thread-safe. */
void zt_qbase_set_tile_elems(size_t n);

/* A LoRA adapter directory notes the base its adapters were trained on (zt_quantization.json):
 * write it, and read it back (ZT_QBASE_NONE when the file is absent). */
zt_status zt_qbase_note_write(const char *dir, zt_qbase_kind kind, int double_quant);
zt_status zt_qbase_note_read(const char *dir, zt_qbase_kind *kind, int *double_quant);

#endif

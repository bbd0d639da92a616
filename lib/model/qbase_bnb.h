/* model/qbase_bnb: the bitsandbytes 4-bit serialization of a quantized base, what transformers'
 * save_pretrained writes for a model loaded with load_in_4bit (the "-bnb-4bit" checkpoints of the
 * Hub). config.json carries quantization_config {"quant_method": "bitsandbytes", "load_in_4bit":
 * true, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": ...}; each linear weight W
 * (q, k, v, o, gate, up, down) is stored as
 *   W                              U8 [(n + 1) / 2, 1]  the NF4 codes, two a byte, the first high
 *   W.absmax                       F32 [blocks], or with double quantization U8 [blocks]
 *   W.quant_map                    F32 [16]   the NF4 code table
 *   W.nested_absmax                F32 [ceil(blocks / 256)]   (double quantization)
 *   W.nested_quant_map             F32 [256]  the signed dynamic code (double quantization)
 *   W.quant_state.bitsandbytes__nf4  U8: JSON {"quant_type": "nf4", "blocksize": 64, "dtype",
 *                                  "shape": [rows, cols], "nested_blocksize": 256, "nested_offset"}
 * and the rest (embedding, norms, LM head) as floats. The encoding is qbase.h's NF4 byte for byte,
 * so these are read into a quantized base as they are, and zt init writes them.
 *
 *     int nf4, dq;
 *     zt_qbase_bnb_config("model/config.json", &nf4, &dq);       // nf4 = 1: a bitsandbytes 4-bit checkpoint
 *     zt_qbase_bnb_read(q, reader, "model.layers.0.mlp.down_proj.weight", C, F, part);
 */
#ifndef ZT_MODEL_QBASE_BNB_H
#define ZT_MODEL_QBASE_BNB_H

#include "lib/ckpt/safetensors.h"
#include "qbase.h"

/* config.json's quantization_config: *nf4 = 1 and *double_quant for a bitsandbytes 4-bit NF4
 * checkpoint, *nf4 = 0 when the model is not quantized; ZT_EUSER naming the file and key for a
 * quantization zt cannot read (8-bit, fp4, another method). */
zt_status zt_qbase_bnb_config(const char *config_path, int *nf4, int *double_quant);
/* Adds quantization_config to config.json at path (zt init --quantize nf4). */
zt_status zt_qbase_bnb_write_config(const char *path, int double_quant);
/* Whether name is one of a linear weight's serialized tensors besides the weight itself. */
int zt_qbase_bnb_is_state(const char *name);
/* The linear weight `name` [rows, cols] of the checkpoint r as q's encoding at part (its
 * zt_qbase_tensor_elems elements): every tensor's dtype and shape and the quant_state checked
 * against q (NF4, the double quantization, the code tables). */
zt_status zt_qbase_bnb_read(const zt_qbase *q, zt_st_reader *r, const char *name, size_t rows, size_t cols, void *part);

/* Writing: the tensors of each linear weight added to a safetensors writer, their bytes taken
 * from its encoding, which encode makes (into a part of zt_qbase_tensor_elems elements) when the
 * writer first asks for them: weight after weight, one encoding in memory at a time. */
typedef zt_status (*zt_qbase_encode_fn)(void *ctx, const char *name, size_t rows, size_t cols, void *part);
typedef struct zt_qbase_bnb_writer zt_qbase_bnb_writer;
zt_status zt_qbase_bnb_writer_new(zt_qbase_bnb_writer **out, const zt_qbase *q, zt_st_writer *w,
                                  zt_qbase_encode_fn encode, void *ctx);
/* Adds weight `name` [rows, cols]. */
zt_status zt_qbase_bnb_add(zt_qbase_bnb_writer *b, const char *name, size_t rows, size_t cols);
void zt_qbase_bnb_writer_free(zt_qbase_bnb_writer *b);

/* A model of config c initialised as zt_llama_init_weights does (seed, std), its normal values drawn
 * by the ziggurat method (other values, 6 times faster), written to dir in this serialization (zt
 * init --quantize nf4): the linear weights NF4 (with double_quant), quantized from their fp32
 * values, the rest in dtype; config.json with quantization_config. Tensor by tensor, a layer's
 * linear weights drawn and quantized in parallel: memory holds one layer's encodings. */
zt_status zt_qbase_bnb_write_init(const zt_llama_config *c, const char *dir, zt_dtype dtype, int double_quant,
                                  uint64_t seed, double std, size_t max_shard_bytes);

#endif

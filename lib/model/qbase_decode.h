/* model/qbase_decode: a bitsandbytes 4-bit checkpoint read as an unquantized model's flat array,
 * each linear weight decoded (bitsandbytes' own dequantization, bit for bit) when a read first
 * reaches it: one weight's values in memory at a time. What opens such a checkpoint without
 * quantizing it again reads it this way: zt eval, zt generate and a full fine-tune (whole, or
 * unit by unit into the stage-3 slices with offload.param = "nvme"), zt export a tensor at a time.
 *
 *     zt_qbase_decoder *d;
 *     zt_qbase_decoder_open(&d, &m, "model", double_quant);   // m: the unquantized model's layout
 *     zt_qbase_decoder_read(d, off, n, dst);                    // elements [off, off + n) of m's array
 *     zt_qbase_decoder_close(d);
 */
#ifndef ZT_MODEL_QBASE_DECODE_H
#define ZT_MODEL_QBASE_DECODE_H

#include "llama.h"

typedef struct zt_qbase_decoder zt_qbase_decoder;

/* The NF4 checkpoint in dir (its config.json's quantization_config: NF4, double_quant as given)
 * for m, a model of its config laid out unquantized (m's tensors at least: zt_llama_shape). */
zt_status zt_qbase_decoder_open(zt_qbase_decoder **out, const zt_llama *m, const char *dir, int double_quant);
/* Elements [off, off + n) of m's flat array, any range, into dst (host memory). */
zt_status zt_qbase_decoder_read(zt_qbase_decoder *d, size_t off, size_t n, zt_real *dst);
void zt_qbase_decoder_close(zt_qbase_decoder *d);

#endif

/* model/open: a Hugging Face model directory (or an hf:// snapshot in the Hub cache)
 * opened on a device, for training and for generation.
 *
 *     zt_llama m;
 *     if ((st = zt_model_open(&m, "models/llama3", ZT_BF16, ZT_DEVICE_AUTO))) return st;
 *     ...
 *     zt_llama_free(&m);
 */
#ifndef ZT_MODEL_OPEN_H
#define ZT_MODEL_OPEN_H

#include "lib/model/llama.h"
#include "lib/model/qbase.h"

/* Loads config.json and the weights of an HF model directory into m, on the backend of
 * `device`. */
zt_status zt_model_open(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device);
/* The same with a score head (score_head = 1: a reward or value model; a causal LM's
 * checkpoint then gives the backbone, its LM head dropped and the score head new). */
zt_status zt_model_open_head(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device, int score_head);
/* The config of a score-head model as zt_model_open_head makes it from c (zt validate shapes
 * such models without opening them): a causal LM's gets one label, its LM head untied. */
void zt_model_score_config(zt_llama_config *c);
/* The same without reading the weights: *weights is left open for zt_llama_weights_read
 * (offload.param = "nvme" streams them unit by unit), to be closed with zt_st_close; for a
 * bitsandbytes 4-bit checkpoint *weights is NULL and *decoded reads it decoded instead
 * (qbase_decode.h; zt_qbase_decoder_close), else *decoded is NULL. */
struct zt_st_reader;
struct zt_qbase_decoder;
zt_status zt_model_open_unloaded(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device, int score_head,
                                 struct zt_st_reader **weights, struct zt_qbase_decoder **decoded);
/* A frozen base whose linear weights are held quantized (qbase.h), not read: *weights
 * (qbase_read.h) reads its flat array, quantizing an unquantized checkpoint's linear weights as
 * they come, or as a bitsandbytes 4-bit checkpoint stores them; zt_qbase_reader_close closes it.
 * Opened any other way a bitsandbytes checkpoint is decoded (qbase_decode.h). */
struct zt_qbase_reader;
zt_status zt_model_open_quantized(zt_llama *m, const char *dir, zt_dtype dtype, zt_device device, int score_head,
                                  zt_qbase_kind kind, int double_quant, struct zt_qbase_reader **weights);

#endif

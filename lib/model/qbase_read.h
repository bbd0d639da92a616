/* model/qbase_read: a quantized base's flat array (qbase.h) filled from a Hugging Face model
 * directory, a unit at a time or whole, so that a model larger than memory is quantized with
 * bounded memory: from an unquantized checkpoint (fp32, bf16, fp16) each linear weight is read a
 * tile's worth at a time (safetensors are read by tensor, the pages dropped after each piece) and
 * quantized as it comes; a bitsandbytes 4-bit checkpoint (qbase_bnb.h) is read as it is stored.
 * Read in pieces of any size, a weight's encoding is the bytes the whole weight quantized at once
 * makes.
 *
 * zt_qbase_load fills the whole array for a base held in memory, through a content-addressed
 * cache file in cache_dir (base-nf4-dq-KEY.bin: the layers' part of the array, KEY a hash of the
 * encoding, the shapes and a CRC-32C of every layer tensor as read): the next run with the same
 * base reads it instead of quantizing again. A file is checked whole by a CRC-32C of every byte
 * and its header; a bad one is a warning naming it and built again, never used. A lock serialises
 * the ranks and runs that build the same entry.
 *
 *     zt_qbase_reader *r;
 *     zt_qbase_reader_open(&m, "model", &r);      // m: zt_qbase_init
 *     zt_qbase_read(r, off, n, dst);              // elements [off, off + n) of m's flat array
 *     zt_qbase_reader_close(r);
 */
#ifndef ZT_MODEL_QBASE_READ_H
#define ZT_MODEL_QBASE_READ_H

#include "qbase.h"

typedef struct zt_qbase_reader zt_qbase_reader;

/* The weights of the model directory dir (config.json read and checked against m already) for m,
 * a quantized base: ZT_EUSER naming the file and tensor for an unexpected tensor, and for a
 * bitsandbytes checkpoint whose quantization is not m's. */
zt_status zt_qbase_reader_open(const zt_llama *m, const char *dir, zt_qbase_reader **out);
void zt_qbase_reader_close(zt_qbase_reader *r);
/* Whether the directory holds the linear weights quantized already (bitsandbytes 4-bit). */
int zt_qbase_reader_prequantized(const zt_qbase_reader *r);
/* Elements [off, off + n) of m's flat array into dst: any range that cuts no encoded weight (a
 * unit of ZeRO stage 3, the whole array). */
zt_status zt_qbase_read(zt_qbase_reader *r, size_t off, size_t n, zt_real *dst);
/* The content key of the layers r reads (the cache's): a hash of m's encoding and shapes and of a
 * CRC-32C of every layer tensor's values as read. */
zt_status zt_qbase_reader_key(zt_qbase_reader *r, uint64_t key[2]);
/* The whole array of m from r, the layers through the cache in cache_dir (NULL or a
 * bitsandbytes checkpoint: read as it is); *hit: they came from the cache. */
zt_status zt_qbase_load(zt_llama *m, zt_qbase_reader *r, const char *cache_dir, int *hit);

#endif

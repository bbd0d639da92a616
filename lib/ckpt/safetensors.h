/* ckpt/safetensors: reading and writing the safetensors format of Hugging Face
 * checkpoints: one model.safetensors, or shards model-00001-of-0000N.safetensors
 * listed in model.safetensors.index.json.
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {..}}) and the data section the offsets point into.
 * The reader maps files read-only and checks every header field against the
 * file before handing out a pointer; a bad file is ZT_EUSER with a message that
 * names the file and the tensor.
 *
 *     zt_st_reader *r;
 *     if ((st = zt_st_open(&r, "models/tiny-llama"))) return st;
 *     const zt_st_tensor *t = zt_st_find(r, "model.embed_tokens.weight");
 *     int64_t shape[2] = {vocab, dim};
 *     st = t ? zt_st_read_into(t, emb, ZT_F32, shape, 2) : zt_fail(ZT_EUSER, "...");
 *     zt_st_close(r);
 *
 *     zt_st_writer *w = zt_st_writer_new();
 *     zt_st_writer_add(w, "lm_head.weight", ZT_BF16, shape, 2, logits_w, ZT_F32);
 *     zt_st_writer_add_fn(w, "model.norm.weight", ZT_BF16, &dim, 1, fill, ctx);  // data on demand
 *     st = zt_st_writer_finish(w, "out/final", 5000000000);  // 5 GB shards
 *     zt_st_writer_free(w);
 */
#ifndef ZT_CKPT_SAFETENSORS_H
#define ZT_CKPT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/dtype.h"
#include "lib/core/status.h"

#define ZT_ST_MAX_DIMS 8

/* Every dtype the format defines. Only the float ones can be loaded. */
typedef enum zt_st_dtype {
    ZT_ST_BOOL,
    ZT_ST_U8,
    ZT_ST_I8,
    ZT_ST_F8_E5M2,
    ZT_ST_F8_E4M3,
    ZT_ST_I16,
    ZT_ST_U16,
    ZT_ST_F16,
    ZT_ST_BF16,
    ZT_ST_I32,
    ZT_ST_U32,
    ZT_ST_F32,
    ZT_ST_F64,
    ZT_ST_I64,
    ZT_ST_U64,
} zt_st_dtype;

const char *zt_st_dtype_name(zt_st_dtype t); /* "BF16", as the file spells it */
size_t zt_st_dtype_size(zt_st_dtype t);      /* bytes per element */

typedef struct zt_st_tensor {
    const char *name;
    const char *file; /* path of the file that holds it */
    zt_st_dtype dtype;
    int ndim; /* 0 for a scalar */
    int64_t shape[ZT_ST_MAX_DIMS];
    const void *data; /* in the read-only mapping; may be unaligned */
    size_t nbytes;
} zt_st_tensor;

typedef struct zt_st_reader zt_st_reader;

/* Opens a .safetensors file, a model.safetensors.index.json, or a directory
 * (its index if present, else model.safetensors, else its only *.safetensors).
 * Tensors come file by file, each file's in data order. */
zt_status zt_st_open(zt_st_reader **out, const char *path);
int zt_st_count(const zt_st_reader *r);
const zt_st_tensor *zt_st_get(const zt_st_reader *r, int i);
const zt_st_tensor *zt_st_find(const zt_st_reader *r, const char *name); /* NULL if absent */
void zt_st_close(zt_st_reader *r);
/* Drops the tensor's pages of the mapping from memory (read again from the file if used). */
void zt_st_release(const zt_st_tensor *t);

/* Checks the shape (when expect_shape is not NULL) and converts the F32/BF16/F16/F64
 * data into dst (aligned, numel elements of dst_dtype; NULL: the checks alone). A NaN or
 * infinite element is ZT_EUSER naming it (its index from t->data on). Thread-safe:
 * tensors can be loaded in parallel. */
zt_status zt_st_read_into(const zt_st_tensor *t, void *dst, zt_dtype dst_dtype, const int64_t *expect_shape,
                          int expect_ndim);

/* The checks of zt_st_read_into on the data alone (a float dtype, every element finite),
 * without converting it anywhere: for a copy that goes straight to a writer. */
zt_status zt_st_check_finite(const zt_st_tensor *t);

typedef struct zt_st_writer zt_st_writer;

zt_st_writer *zt_st_writer_new(void); /* NULL when out of memory */

/* Records a tensor: src (numel elements of src_dtype, any alignment) must stay valid
 * until finish, which converts it to out_dtype in bounded chunks while writing. */
zt_status zt_st_writer_add(zt_st_writer *w, const char *name, zt_dtype out_dtype, const int64_t *shape, int ndim,
                           const void *src, zt_dtype src_dtype);

/* Supplies n elements of a tensor, from element offset on, as fp32 into dst (aligned). */
typedef zt_status (*zt_st_fill_fn)(void *ctx, float *dst, size_t offset, size_t n);

/* Records a tensor whose data finish asks fill for, in order and in bounded chunks, so
 * that a model larger than memory can be written (zt export reads checkpoint shards).
 * A failing fill fails finish with its status and message. */
zt_status zt_st_writer_add_fn(zt_st_writer *w, const char *name, zt_dtype out_dtype, const int64_t *shape, int ndim,
                              zt_st_fill_fn fill, void *ctx);

/* Supplies bytes [offset, offset + n) of a tensor's data as the file stores it into dst. */
typedef zt_status (*zt_st_bytes_fn)(void *ctx, void *dst, size_t offset, size_t n);

/* Records a tensor of any dtype (U8 codes of a quantized weight, its F32 tables) whose bytes fill
 * supplies as stored, in order and in bounded chunks. */
zt_status zt_st_writer_add_bytes_fn(zt_st_writer *w, const char *name, zt_st_dtype dtype, const int64_t *shape,
                                    int ndim, zt_st_bytes_fn fill, void *ctx);

/* Writes the tensors in insertion order into the existing directory dir: model.safetensors
 * when their bytes fit in max_shard_bytes (0: no limit), else model-0000i-of-0000N.safetensors
 * and model.safetensors.index.json. Each file goes to a temporary name, is fsynced and
 * renamed; shards and index of an earlier save that this one does not overwrite are
 * removed. ZT_EIO names the failing step and file. */
zt_status zt_st_writer_finish(const zt_st_writer *w, const char *dir, size_t max_shard_bytes);
/* Writes every tensor into the one file dir/name (PEFT's adapter_model.safetensors), atomically. */
zt_status zt_st_writer_finish_file(const zt_st_writer *w, const char *dir, const char *name);
void zt_st_writer_free(zt_st_writer *w);

/* The recorded tensors, for a writer of another format (export/gguf): how many, tensor i's name
 * with its shape (ZT_ST_MAX_DIMS) and dimensions, and elements [offset, offset + n) of its data
 * as fp32 (the source's values, before any conversion to the output dtype; a tensor recorded as
 * stored bytes is ZT_EUSER). */
int zt_st_writer_count(const zt_st_writer *w);
const char *zt_st_writer_tensor(const zt_st_writer *w, int i, int64_t *shape, int *ndim);
zt_status zt_st_writer_read(const zt_st_writer *w, int i, float *dst, size_t offset, size_t n);

#endif

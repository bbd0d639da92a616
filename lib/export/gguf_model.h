/* export/gguf_model: a Llama-family model as llama.cpp reads it from GGUF: its architecture's
 * hyperparameters (gguf_hparams.c), its tensors renamed (blk.N.attn_q.weight, ...), a mixture's
 * experts stacked and, for the "llama" architecture, q and k's rows reordered from transformers'
 * rotary layout (a head's two halves) to llama.cpp's (pairs of neighbours); and the tokenizer
 * (gguf_tokenizer.c). docs/export.md lists what maps where and what is refused. */
#ifndef ZT_EXPORT_GGUF_MODEL_H
#define ZT_EXPORT_GGUF_MODEL_H

#include "lib/ckpt/safetensors.h"
#include "lib/export/gguf.h"
#include "lib/model/llama.h"

/* gguf_hparams.c: llama.cpp's architecture for cfg (NULL: none that zt writes), and whether its
 * rotary embedding pairs neighbours (q and k rows reordered) rather than a head's halves. */
const char *zt_gguf_arch(const zt_llama_config *cfg, int *pairs);

/* The architecture's keys (general.*, ARCH.*) and its rope scaling's tensors, for a model whose
 * matrices are t, named name. */
zt_status zt_gguf_add_hparams(zt_gguf *g, const zt_llama_config *cfg, zt_gguf_type t, const char *name);

/* Checks that llama.cpp has cfg's architecture and every feature it uses (ZT_EUSER naming the
 * config.json key otherwise), before anything is read or written. */
zt_status zt_gguf_check_model(const zt_llama_config *cfg);

/* Writes path: the model of cfg whose tensors (Hugging Face names) w holds, matrices in t
 * (norms, biases and other vectors in fp32), named name (general.name), with the tokenizer
 * files of tokenizer_dir. */
zt_status zt_gguf_write_model(const zt_llama_config *cfg, const zt_st_writer *w, const char *tokenizer_dir,
                              zt_gguf_type t, const char *name, const char *path);

/* Writes path: a LoRA adapter for the model of cfg (llama.cpp's --lora, Ollama's ADAPTER), w
 * holding each adapted matrix's A [r, in] and B [out, r] as "HF_NAME.lora_a" and "HF_NAME.lora_b",
 * scaled by alpha / r (adapter.lora.alpha), in t (B's rows of q and k reordered as the model's). */
zt_status zt_gguf_write_adapter(const zt_llama_config *cfg, const zt_st_writer *w, double alpha, zt_gguf_type t,
                                const char *name, const char *path);

/* The tokenizer's metadata (tokenizer.ggml.*, tokenizer.chat_template) from dir's
 * tokenizer.json, tokenizer_config.json (and chat_template.jinja) and cfg's special ids. */
zt_status zt_gguf_add_tokenizer(zt_gguf *g, const char *dir, const zt_llama_config *cfg);

#endif

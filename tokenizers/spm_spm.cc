// A thin C shim over sentencepiece::SentencePieceProcessor (tokenizer.model).
// User-defined symbols are the processor's own business; control symbols
// (<s>, </s>) and <unk> go to the added-token set as special tokens, so that
// encode with parse_special cuts them out of the text and encodes the pieces
// between them (each with SentencePiece's dummy prefix, as Hugging Face's
// Llama tokenizers do).
#include <sentencepiece_processor.h>

#include <new>
#include <string>
#include <vector>

#include "tokenizers/tok_internal.h"

namespace {

typedef sentencepiece::SentencePieceProcessor processor;

zt_status spm_encode(const void *m, const char *text, size_t len, int, zt_ivec *out)
{
    std::vector<int> ids;
    try {
        auto s = static_cast<const processor *>(m)->Encode(absl::string_view(text, len), &ids);
        if (!s.ok()) return zt_fail(ZT_ERUNTIME, "sentencepiece encode: %s", s.ToString().c_str());
    } catch (const std::bad_alloc &) {
        return zt_fail(ZT_ENOMEM, "out of memory in sentencepiece encode");
    }
    for (int id : ids) {
        zt_status st = zt_ivec_push(out, id);
        if (st) return st;
    }
    return ZT_OK;
}

zt_status spm_decode(const void *m, const int32_t *ids, size_t n, zt_buf *out)
{
    std::string text;
    try {
        std::vector<int> v(ids, ids + n);
        auto s = static_cast<const processor *>(m)->Decode(v, &text);
        if (!s.ok()) return zt_fail(ZT_ERUNTIME, "sentencepiece decode: %s", s.ToString().c_str());
    } catch (const std::bad_alloc &) {
        return zt_fail(ZT_ENOMEM, "out of memory in sentencepiece decode");
    }
    return zt_buf_append(out, text.data(), text.size());
}

int32_t spm_vocab_size(const void *m) { return static_cast<const processor *>(m)->GetPieceSize(); }

int32_t spm_piece_to_id(const void *m, const char *piece, size_t len)
{
    auto p = static_cast<const processor *>(m);
    absl::string_view s(piece, len);
    int id = p->PieceToId(s);
    // PieceToId answers unk_id for pieces it does not know
    return id == p->unk_id() && p->IdToPiece(id) != s ? -1 : id;
}

const char *spm_id_to_piece(const void *m, int32_t id) { return static_cast<const processor *>(m)->IdToPiece(id).c_str(); }

void spm_free(void *m) { delete static_cast<processor *>(m); }

const zt_tok_ops spm_ops = {
    "sentencepiece", spm_encode, spm_decode, spm_vocab_size, spm_piece_to_id, spm_id_to_piece, spm_free,
};

} // namespace

extern "C" zt_status zt_spm_open(zt_tokenizer *tok, const char *path)
{
    processor *p = new (std::nothrow) processor();
    if (!p) return zt_fail(ZT_ENOMEM, "out of memory loading '%s'", path);
    try {
        auto s = p->Load(path);
        if (!s.ok()) {
            delete p;
            return zt_fail(ZT_EUSER, "'%s': not a SentencePiece model: %s", path, s.ToString().c_str());
        }
    } catch (const std::bad_alloc &) {
        delete p;
        return zt_fail(ZT_ENOMEM, "out of memory loading '%s'", path);
    }
    tok->ops = &spm_ops;
    tok->model = p;
    for (int id = 0; id < p->GetPieceSize(); id++) {
        if (!p->IsControl(id) && !p->IsUnknown(id)) continue;
        const std::string &piece = p->IdToPiece(id);
        if (piece.empty()) continue;
        zt_status st = zt_added_put(&tok->added, piece.data(), piece.size(), id, ZT_ADDED_SPECIAL);
        if (st) return st; // the caller frees tok, p with it
    }
    tok->bos = p->bos_id();
    tok->eos = p->eos_id();
    tok->pad = p->pad_id();
    tok->unk = p->unk_id();
    if (tok->bos >= 0) tok->before = {{tok->bos}, 1};
    return ZT_OK;
}

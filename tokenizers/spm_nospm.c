/* Stands in for spm_spm.cc when zt is built without libsentencepiece. */
#include "tokenizers/tok_internal.h"

zt_status zt_spm_open(struct zt_tokenizer *tok, const char *path)
{
    return zt_fail(ZT_EUSER, "'%s': this zt was built without sentencepiece (install libsentencepiece-dev and rebuild)",
                   path);
}

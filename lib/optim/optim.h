/* optim/optim: the optimizer a recipe names (train.optim): AdamW with fp32 moments (optim/adamw.h)
 * or with 8-bit ones (optim/adamw8bit.h). */
#ifndef ZT_OPTIM_OPTIM_H
#define ZT_OPTIM_OPTIM_H

typedef enum zt_optim_kind { ZT_OPTIM_ADAMW, ZT_OPTIM_ADAMW_8BIT } zt_optim_kind;
extern const char *const zt_optim_names[2]; /* Hugging Face's names: adamw_torch, adamw_8bit */

#endif

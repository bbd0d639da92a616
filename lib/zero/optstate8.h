/* zero/optstate8: internal to zero/optstate: AdamW's 8-bit moments (train.optim = "adamw_8bit",
 * optim/adamw8bit.h) for the elements this rank updates, where z.be keeps its arrays (the CPU's
 * memory or a device's). A step is the backend's adamw8 over a table of blocks laid out once
 * (zt_adamw8_block), then, where blocks are cut, adamw8_finish.
 *
 * Each tensor's part in one of this rank's segments is a piece. The blocks of 256 count from the
 * tensor's start, as when the whole tensor is on one rank, so a block that a rank boundary cuts
 * is updated in parts on two ranks: each keeps its part's fp32 moments until the ranks have
 * summed their parts' maxima (one small all-reduce a step, each boundary's slots filled by its
 * two sides alone) and then quantizes with the block's absmax. Any world size and stage
 * therefore gives the one-process result bit for bit.
 *
 * Checkpoints hold the moments dequantized (code · absmax, the values a step starts from) in
 * the fp32 arrays of ckpt/state.h; a restore takes each block's absmax back from them (the
 * largest value, or the most negative one over the signed map's smallest code) and its codes,
 * so that a resumed run continues bit for bit, on any world size. */
#ifndef ZT_ZERO_OPTSTATE8_H
#define ZT_ZERO_OPTSTATE8_H

#include "lib/optim/adamw.h"
#include "lib/zero/zero.h"

typedef struct zt_optstate8 zt_optstate8;

zt_status zt_optstate8_open(zt_optstate8 **out, const zt_zero *z);
void zt_optstate8_close(zt_optstate8 *q);
/* The bytes zt_optstate8_open takes for the tensors of m in segments seg. */
size_t zt_optstate8_bytes(const zt_llama *m, const zt_zero_segment *seg, int nseg);
/* AdamW on z.master with z.grad (a collective when a rank boundary can cut a block). */
zt_status zt_optstate8_step(zt_optstate8 *q, const zt_adamw *h, float coef);
/* The moments into their host mirrors (a device's; on the CPU they are the arrays), before reads. */
void zt_optstate8_pull(zt_optstate8 *q);
/* Moment 0 (m) or 1 (v) of local elements [first, first + n), dequantized from the mirrors. */
void zt_optstate8_read(const zt_optstate8 *q, int moment, size_t first, size_t n, float *dst);
/* The moments of this rank's elements from a checkpoint's fp32 arrays. */
zt_status zt_optstate8_restore(zt_optstate8 *q, const char *ckpt_dir, size_t numel);

#endif

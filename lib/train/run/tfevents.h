/* train/run/tfevents: TensorBoard scalars in events.out.tfevents.* files: TFRecord
 * framing (length, masked CRC-32C of the length, data, masked CRC-32C of the data)
 * around hand-encoded Event protocol buffers.
 *
 *     zt_tfevents *tb;
 *     if ((st = zt_tfevents_open(&tb, run_dir))) return st;
 *     zt_tfevents_scalar(tb, "train/loss", step, loss);
 *     zt_tfevents_close(tb);
 */
#ifndef ZT_TRAIN_RUN_TFEVENTS_H
#define ZT_TRAIN_RUN_TFEVENTS_H

#include <stdint.h>

#include "lib/core/status.h"

typedef struct zt_tfevents zt_tfevents;

zt_status zt_tfevents_open(zt_tfevents **out, const char *dir);
zt_status zt_tfevents_scalar(zt_tfevents *tb, const char *tag, int64_t step, double value);
zt_status zt_tfevents_close(zt_tfevents *tb);

#endif

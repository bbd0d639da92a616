/* model/generation_config: the generation_config.json saved beside a model. The
 * source's file is carried over and only extended: the end-of-turn ids zt trained
 * turns to end with are appended to eos_token_id once each, every other key (sampling
 * settings, pad id, transformers_version) stays as written. A source without one gets
 * one made of its config.json's bos_token_id and eos_token_id (lists kept).
 *
 *     int32_t end[2] = {151645, 151643};
 *     st = zt_generation_config_write("model", &cfg, end, 2, "run/final/generation_config.json");
 */
#ifndef ZT_MODEL_GENERATION_CONFIG_H
#define ZT_MODEL_GENERATION_CONFIG_H

#include <stdint.h>

#include "llama.h"

/* ids < 0 in end are ignored; n_end may be 0 */
zt_status zt_generation_config_write(const char *model_dir, const zt_llama_config *cfg, const int32_t *end, int n_end,
                                     const char *out_path);

#endif

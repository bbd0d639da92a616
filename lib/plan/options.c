/* The recipe's settings on ZeRO and the model (options.h). */
#include "options.h"

#include <stdlib.h>
#include <string.h>

#include "lib/zero/optstate.h"
#include "tokenizers/tokenizer.h"

zt_zero_options zt_plan_zero_options(const zt_recipe *r)
{
    zt_param_place param = r->offload.param == ZT_OFFLOAD_NVME   ? ZT_PARAM_NVME
                           : r->offload.param == ZT_OFFLOAD_NONE ? ZT_PARAM_DEVICE
                                                                 : ZT_PARAM_HOST;
    zt_offload_io io = zt_recipe_offload_io(r);
    return (zt_zero_options){
        .stage = r->zero.stage,
        .prefetch_layers = r->zero.prefetch_layers,
        .checkpointing = r->model.activation_checkpointing,
        .quantized_weights = r->zero.quantized_weights,
        .quant_block = r->zero.quant_block_size,
        .hpz = r->zero.hpz_partition_size,
        .quantized_gradients = r->zero.quantized_gradients,
        .error_feedback = r->zero.quantized_gradients_error_feedback,
        .measure_quant = r->zero.measure_quantization,
        .host_optimizer = r->offload.optimizer != ZT_OFFLOAD_NONE,
        .device_collectives = r->zero.device_collectives,
        .params_at = param,
        .nvme_paths = io.nvme_paths,
        .nvme_npaths = io.npaths,
        .swap_kind = "params",
        .aio_block = io.block_size,
        .aio_depth = io.queue_depth,
        .swap_chunk = zt_optstate_chunk_bytes(&io, 0, 4),
    };
}

zt_zero_options zt_plan_adapter_zero_options(const zt_recipe *r)
{
    zt_zero_options o = zt_plan_zero_options(r);
    o.stage = r->zero.stage < 2 ? r->zero.stage : 2;
    o.params_at = ZT_PARAM_DEVICE;
    o.quantized_weights = o.quantized_gradients = o.error_feedback = o.measure_quant = 0;
    o.hpz = 1;
    o.swap_kind = NULL;
    return o;
}

zt_actstore_options zt_plan_actstore_options(const zt_recipe *r)
{
    return (zt_actstore_options){.tier = r->offload.activations,
                                 .checkpointing = r->model.activation_checkpointing,
                                 .tokens = (size_t)r->train.micro_batch_size * r->data.max_length,
                                 .io = zt_recipe_offload_io(r)};
}

void zt_plan_tile_model(const zt_recipe *r, zt_llama *m)
{
    m->embed_tiles = r->zero.embedding_tiles, m->mlp_tiles = r->zero.mlp_tiles, m->head_tiles = r->zero.head_tiles;
}

zt_status zt_plan_lora_config(const zt_recipe *r, int score, const zt_tokenizer *tok, zt_lora_config *c)
{
    *c = (zt_lora_config){.r = r->lora.r,
                          .alpha = r->lora.alpha,
                          .dropout = r->lora.dropout,
                          .targets = zt_recipe_lora_targets(r),
                          .rslora = r->lora.use_rslora,
                          .init = r->lora.init_lora_weights,
                          .method = r->lora.method,
                          .score = score,
                          .save = zt_recipe_lora_saved(r)};
    const zt_strlist *ids = &r->lora.trainable_token_indices; /* ids in digits, or tokens (the recipe checked) */
    c->n_tokens = ids->n < ZT_LORA_MAX_TOKENS ? ids->n : ZT_LORA_MAX_TOKENS + 1; /* more: zt_lora_attach refuses */
    for (int i = 0; i < ids->n && i < ZT_LORA_MAX_TOKENS; i++) {
        const char *s = ids->items[i];
        c->tokens[i] = strspn(s, "0123456789") == strlen(s) ? (int32_t)atol(s)
                       : tok                                ? zt_tokenizer_piece_to_id(tok, s)
                                                            : -1;
        if (tok && c->tokens[i] < 0)
            return zt_fail(ZT_EUSER,
                           "lora.trainable_token_indices: '%.100s' is not a token of the tokenizer (give a token "
                           "as the tokenizer holds it whole, or its id)",
                           s);
    }
    const zt_strlist *layers = &r->lora.layers_to_transform; /* integers (the recipe checked) */
    c->n_layers =
        layers->n < ZT_LORA_MAX_LAYERS ? layers->n : ZT_LORA_MAX_LAYERS + 1; /* more: zt_lora_attach refuses */
    for (int i = 0; i < layers->n && i < ZT_LORA_MAX_LAYERS; i++) c->layers[i] = (int32_t)atol(layers->items[i]);
    zt_status st = r->lora.adapter[0] ? zt_lora_read_config(r->lora.adapter, c) : ZT_OK;
    c->loraplus_lr_ratio = r->lora.loraplus_lr_ratio; /* the optimizer's setting: no adapter file holds it */
    return st;
}

const char *zt_plan_reference_dir(const zt_recipe *r)
{
    zt_rlhf_algorithm a = r->rlhf.algorithm;
    if (a == ZT_RLHF_REWARD || (a == ZT_RLHF_GRPO && !(r->rlhf.beta > 0))) return NULL;
    if (r->rlhf.reference[0]) return r->rlhf.reference;
    return a == ZT_RLHF_DPO || a == ZT_RLHF_KTO || zt_recipe_lora_on(r) ? NULL : r->model.path;
}

const char *zt_plan_critic_dir(const zt_recipe *r)
{
    return r->rlhf.reward_model[0] ? r->rlhf.reward_model : r->model.path;
}

zt_lora_config zt_plan_critic_lora(zt_lora_config c)
{
    c.score = 1, c.save &= ZT_LORA_SAVE_EMBED;
    return c;
}

int zt_plan_rollout_streams(const zt_recipe *r, int world)
{
    zt_zero_options o = zt_plan_zero_options(r);
    return o.params_at != ZT_PARAM_DEVICE && zt_zero_effective_stage(&o, world) == 3;
}

int zt_plan_rollout_slots(const zt_recipe *r, int world)
{
    if (zt_plan_rollout_streams(r, world)) /* a spare slot for the passes of a rank with nothing left */
        return r->train.micro_batch_size * r->train.gradient_accumulation_steps + (world > 1);
    return r->rlhf.algorithm == ZT_RLHF_GRPO ? r->rlhf.num_generations : 1;
}

int zt_plan_rollout_chunk(const zt_recipe *r, int world)
{
    int slots = zt_plan_rollout_slots(r, world);
    return slots > ZT_PLAN_ROLLOUT_CHUNK ? slots : ZT_PLAN_ROLLOUT_CHUNK;
}

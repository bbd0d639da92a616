#!/usr/bin/env bash
# lora.trainable_token_indices: rows of the embedding trained beside the adapters, the rest frozen,
# as PEFT's trainable_token_indices (a tied LM head's rows with them). 10 AdamW steps from PEFT's
# adapters log PEFT's losses; a chat template whose tokens the vocabulary lacks trains their rows
# on a tied model, final/ is PEFT's layout, the merged export keeps the head tied, and zt eval and
# zt generate of the adapter agree with it (t2420-lora-zero3.sh: stage 3 and the streamed base);
# what cannot work exits 2 naming the key.
. "$(dirname "$0")/lib.sh"
need_cmd spm_train sentencepiece
export ROOT

# 10 steps from tests/fixtures/lora/tokens (make_saved_fixture.py: PEFT 0.15.2 with t2400-lora.sh's
# settings; the first losses agree within 2.9e-8, test_lora_peft.c). The rows take AdamW steps of
# 1e-2 as the adapters do: their gradients' fp32 roundings drift the losses as in t2440 (1e-4)
F=$ROOT/tests/fixtures/lora
for kind in tied untied; do
  base=$F/base
  [ $kind = tied ] && base=$F/saved/tied/base
  printf '[model]\npath = "%s"\ndtype = "fp32"\n[data]\ntrain = "%s/tokens/%s/data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\nshuffle = false\n[train]\nmax_steps = 10\nmicro_batch_size = 2\nlogging_steps = 1\nlearning_rate = 1e-2\nlr_scheduler_type = "constant"\nweight_decay = 0.01\nadam_beta1 = 0.9\nadam_beta2 = 0.999\nadam_epsilon = 1e-8\nmax_grad_norm = 1.0\n[lora]\nadapter = "%s/tokens/%s/adapter"\n' \
    "$base" "$F" $kind "$F" $kind > peft-$kind.toml
  expect_ok "10 steps from PEFT's $kind adapter with trainable tokens" "$ZT" pretrain peft-$kind.toml output.dir=peft-$kind
  peft_losses peft-$kind "$F/tokens/$kind/expected.json" "$kind"
done

# a chat template (ChatML) whose two tokens a tied model's tokenizer lacks, named as trainable
# tokens: the template adds them as V and V + 1
chat_reverse_task
make_tiny tied vocab_size=$V bos_token_id=1 eos_token_id=2 tie_word_embeddings=true \
  && $PY "$ROOT/tests/cli/llama_ref.py" perturb tied && cp chat.model tied/tokenizer.model
make_tiny untied vocab_size=$V bos_token_id=1 eos_token_id=2 && cp chat.model untied/tokenizer.model
printf '[model]\npath = "tied"\ndtype = "fp32"\n[tokenizer]\nchat_template = "chatml"\n[data]\ntrain = "chat.jsonl"\nvalid = "chat.jsonl"\nformat = "chat"\nmax_length = 64\n[train]\nmax_steps = 60\nsave_steps = 30\nmicro_batch_size = 4\nlearning_rate = 1e-2\nlr_scheduler_type = "constant"\nlogging_steps = 1\n[eval]\ngenerate = true\nmax_new_tokens = 8\n[lora]\nr = 8\nalpha = 16\ntarget_modules = "all-linear"\ntrainable_token_indices = ["<|im_start|>", "<|im_end|>"]\n' \
  > chat.toml
expect_ok "zt validate (the tokens counted, not looked up)" "$ZT" validate chat.toml
expect_ok "sft with the template's tokens trainable" "$ZT" sft chat.toml output.dir=run
$PY - "$V" <<'PY' && say "ok - final/ is PEFT's layout: the adapters and the two trained rows" || fail "final/"
import json, os, sys
import numpy as np
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
V = int(sys.argv[1])
c = json.load(open("run/final/adapter_config.json"))
assert c["trainable_token_indices"] == [V, V + 1] and c["modules_to_save"] is None, c
A = read_st("run/final/adapter_model.safetensors")
T = A["base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta"]
assert T.shape == (2, 32) and len(A) == 2 * 7 * 2 + 1, (T.shape, len(A))
mean = read_st("tied/model.safetensors")["model.embed_tokens.weight"].mean(axis=0)  # where the new rows start
assert np.abs(T - mean).max() > 1e-3
rows = [json.loads(l) for l in open("run/metrics.jsonl") if '"split"' not in l]
assert rows[-1]["loss"] < 0.1 * rows[0]["loss"], (rows[0], rows[-1])
PY
cp -r run cut && rm -rf cut/final cut/summary.json cut/checkpoints/step-000060
expect_ok "resume" "$ZT" sft chat.toml output.dir=cut
cmp -s run/final/adapter_model.safetensors cut/final/adapter_model.safetensors \
  && say "ok - the resumed run's adapters and rows are bitwise the same" || fail "resumed files differ"

# the merged export: the rows in the one matrix, still tied; zt eval and zt generate agree with it
expect_ok "export --merge" "$ZT" export run --merge --out merged
$PY - "$V" <<'PY' && say "ok - the merged model is tied, the trained rows in its embedding" || fail "merged"
import json, os, sys
import numpy as np
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
V = int(sys.argv[1])
c = json.load(open("merged/config.json"))
assert c["tie_word_embeddings"] is True and c["vocab_size"] == V + 2, c
M, A = read_st("merged/model.safetensors"), read_st("run/final/adapter_model.safetensors")
assert "lm_head.weight" not in M
assert np.array_equal(M["model.embed_tokens.weight"][V:], A["base_model.model.model.embed_tokens.token_adapter.trainable_tokens_delta"])
PY
adapter_is_merge run merged lora.r=0 'lora.trainable_token_indices=[]'

# on a device (the CPU posing as one: the positions' rows uploaded) bitwise as on the CPU; bf16
# (the base's products on bf16 operands, 2^-9 relative a rounding; the rows' own in fp32) against
# fp32 over 4 steps of 1e-3, so that the roundings are not amplified by steps that halve the loss:
# measured 0.19%, 0.43%, 0.51%, 0.15% on AVX2 and with the scalar kernels alike; 2e-2, 4x that.
# On an NF4 base (PEFT's tied fixture) the rows and the adapters train
short='train.max_steps=4 train.save_steps=0 eval.generate=false data.valid=[]'
expect_ok "4 steps" "$ZT" sft chat.toml output.dir=c4 $short
expect_ok "4 steps as a device" env ZT_CPU_AS_DEVICE=1 "$ZT" sft chat.toml output.dir=d4 $short
cmp -s c4/final/adapter_model.safetensors d4/final/adapter_model.safetensors \
  && say "ok - on a device bitwise as on the CPU" || fail "the device path differs"
expect_ok "4 steps of 1e-3 in fp32" "$ZT" sft chat.toml output.dir=f4 train.learning_rate=1e-3 $short
expect_ok "4 steps of 1e-3 in bf16" "$ZT" sft chat.toml output.dir=b4 model.dtype=bf16 train.learning_rate=1e-3 $short
paste <(grep -oE '"loss":[0-9.e+-]+' f4/metrics.jsonl | cut -d: -f2) <(grep -oE '"loss":[0-9.e+-]+' b4/metrics.jsonl | cut -d: -f2) \
  | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 2e-2 * $1) bad = 1 } END { exit bad || NR != 4 }' \
  && say "ok - bf16 within 2e-2 of fp32" || fail "bf16 losses"
expect_ok "an NF4 base" "$ZT" pretrain peft-tied.toml output.dir=nf4 lora.quantize_base=nf4
# refusals
expect_exit 2 "a token the vocabulary lacks" "lora: trainable_token_indices: $((V + 2)) is not a token of the vocabulary \($((V + 2)) tokens\)" \
  "$ZT" sft chat.toml output.dir=x "lora.trainable_token_indices=[$V, $((V + 1)), $((V + 2))]"
expect_exit 2 "a token twice" "lora: trainable_token_indices names 3 twice" \
  "$ZT" sft chat.toml output.dir=x "lora.trainable_token_indices=[$V, 3, $((V + 1)), 3]"
expect_exit 2 "a token the tokenizer lacks" "lora.trainable_token_indices: '<\|nope\|>' is not a token of the tokenizer" \
  "$ZT" sft chat.toml output.dir=x 'lora.trainable_token_indices=["<|im_start|>", "<|nope|>"]'
expect_exit 2 "the embedding trained whole too" "with modules_to_save = embed_tokens: the embedding is trained whole already" \
  "$ZT" sft chat.toml output.dir=x model.path=untied 'lora.modules_to_save=[embed_tokens, lm_head]'
expect_exit 2 "the new rows of an untied model without its LM head" \
  "or lora.trainable_token_indices holds the new ids and modules_to_save lm_head" \
  "$ZT" sft chat.toml output.dir=x model.path=untied
expect_ok "an untied model: the new rows and the LM head" "$ZT" sft chat.toml output.dir=u model.path=untied \
  'lora.modules_to_save=[lm_head]' $short
expect_exit 2 "without lora.r" "lora.trainable_token_indices trains rows beside LoRA's adapters: set lora.r too" \
  "$ZT" sft chat.toml output.dir=x lora.r=0
expect_exit 2 "with lora.adapter" "lora.adapter supplies trainable_token_indices from its adapter_config.json" \
  "$ZT" sft chat.toml output.dir=x lora.r=0 lora.adapter=run/final
done_testing

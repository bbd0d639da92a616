#!/usr/bin/env bash
# lora.modules_to_save: the embedding and the LM head trained whole beside the adapters, as PEFT's
# modules_to_save. 10 AdamW steps from PEFT's adapter with both on a vocabulary grown to 66 tokens
# log PEFT's losses; a chat template whose tokens the vocabulary lacks trains with both (refused
# without), its new rows trained: final/ is PEFT's layout (names, shapes, modules_to_save), a run cut
# after a checkpoint resumes bitwise, and zt eval, zt generate and the merged export agree; on a model
# whose LM head is its embedding the two copies train apart, as PEFT's; what cannot work exits 2
# naming the key.
. "$(dirname "$0")/lib.sh"
need_cmd spm_train sentencepiece
export ROOT  # the Python checks read safetensors with llama_ref.py's reader

# 10 AdamW steps from tests/fixtures/lora/saved (make_saved_fixture.py: torch and PEFT with
# t2400-lora.sh's settings; the first loss agrees to 7.7e-8, test_lora_peft.c). The copies of the
# embedding and the LM head take AdamW steps of 1e-2 too, which the losses follow down to a tenth
# of the first; the fp32 roundings of their gradients drift (measured: 2.3e-6 relative at most,
# at step 7): 1e-4 relative, as for the adapters alone
F=$ROOT/tests/fixtures/lora
printf '[model]\npath = "%s/base"\ndtype = "fp32"\n[data]\ntrain = "%s/saved/data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\nshuffle = false\n[train]\nmax_steps = 10\nmicro_batch_size = 2\nlogging_steps = 1\nlearning_rate = 1e-2\nlr_scheduler_type = "constant"\nweight_decay = 0.01\nadam_beta1 = 0.9\nadam_beta2 = 0.999\nadam_epsilon = 1e-8\nmax_grad_norm = 1.0\n[lora]\nadapter = "%s/saved/adapter"\n' "$F" "$F" "$F" > peft.toml
expect_ok "10 steps from PEFT's adapter with modules_to_save" "$ZT" pretrain peft.toml output.dir=peft
peft_losses peft "$F/saved/expected.json" "a grown vocabulary"
# the same on a model whose LM head is its embedding (tests/fixtures/lora/saved/tied): PEFT copies
# the one matrix twice, and the embedding's copy and the LM head's train apart
sed -e "s#$F/base#$F/saved/tied/base#" -e "s#$F/saved/data.jsonl#$F/saved/tied/data.jsonl#" \
  -e "s#$F/saved/adapter#$F/saved/tied/adapter#" peft.toml > tied_peft.toml
expect_ok "10 steps from PEFT's adapter on a tied model" "$ZT" pretrain tied_peft.toml output.dir=tied_peft
peft_losses tied_peft "$F/saved/tied/expected.json" "a tied embedding and LM head"

# a chat template (ChatML) whose two tokens the tokenizer lacks
chat_reverse_task
make_tiny base vocab_size=$V bos_token_id=1 eos_token_id=2 && $PY "$ROOT/tests/cli/llama_ref.py" perturb base \
  && cp chat.model base/tokenizer.model  # weights larger than init: a frozen model the adapters can steer
printf '[model]\npath = "base"\ndtype = "fp32"\n[tokenizer]\nchat_template = "chatml"\n[data]\ntrain = "chat.jsonl"\nvalid = "chat.jsonl"\nformat = "chat"\nmax_length = 64\n[train]\nmax_steps = 60\nsave_steps = 30\nmicro_batch_size = 4\nlearning_rate = 1e-2\nlr_scheduler_type = "constant"\nlogging_steps = 1\n[eval]\ngenerate = true\nmax_new_tokens = 8\n[lora]\nr = 8\nalpha = 16\ndropout = 0.1\ntarget_modules = "all-linear"\nmodules_to_save = ["embed_tokens", "lm_head"]\n' > chat.toml
expect_exit 2 "added tokens without modules_to_save" \
  "the chat template's tokens are not in the vocabulary \($V tokens, $((V + 2)) needed\): LoRA freezes the embedding and the LM head unless modules_to_save \(lora.modules_to_save\) holds embed_tokens and lm_head" \
  "$ZT" sft chat.toml output.dir=frozen 'lora.modules_to_save=[]'
expect_exit 2 "added tokens with the LM head alone" "holds embed_tokens and lm_head" \
  "$ZT" sft chat.toml output.dir=frozen 'lora.modules_to_save=[lm_head]'
expect_ok "sft with modules_to_save" "$ZT" sft chat.toml output.dir=run
$PY - "$V" <<'PY' && say "ok - final/ is PEFT's layout: the adapters, the embedding and the LM head of $((V + 2)) rows, trained" || fail "final/"
import json, os, sys
import numpy as np
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
V = int(sys.argv[1])
c = json.load(open("run/final/adapter_config.json"))
assert c["modules_to_save"] == ["embed_tokens", "lm_head"] and c["task_type"] == "CAUSAL_LM", c
A, W = read_st("run/final/adapter_model.safetensors"), read_st("base/model.safetensors")
E, H = A["base_model.model.model.embed_tokens.weight"], A["base_model.model.lm_head.weight"]
assert E.shape == H.shape == (V + 2, 32) and len(A) == 2 * 7 * 2 + 2, (E.shape, H.shape, len(A))
for new, old in ((E, W["model.embed_tokens.weight"]), (H, W["lm_head.weight"])):
    mean = old.mean(axis=0)  # where zt starts the new rows
    assert np.abs(new[:V] - old).max() > 1e-3 and np.abs(new[V:] - mean).max() > 1e-3  # old and new rows trained
rows = [json.loads(l) for l in open("run/metrics.jsonl") if '"split"' not in l]
assert rows[-1]["loss"] < 0.1 * rows[0]["loss"], (rows[0], rows[-1])
PY
grep -q '"<|im_start|>"' run/final/tokenizer_config.json && say "ok - final/ carries the added tokens" \
  || fail "final/tokenizer_config.json lacks the added tokens"

# resume: cut after the step-30 checkpoint, the same files bit for bit (dropout masks follow the step)
cp -r run cut && rm -rf cut/final cut/summary.json cut/checkpoints/step-000060
expect_ok "resume" "$ZT" sft chat.toml output.dir=cut
cmp -s run/final/adapter_model.safetensors cut/final/adapter_model.safetensors \
  && say "ok - the resumed run's adapters, embedding and LM head are bitwise the same" || fail "resumed files differ"

# zt eval (loss and answers) of the adapter on the base, grown as it was in training, against its merged export
expect_ok "export --merge" "$ZT" export run --merge --out merged
grep -q "\"vocab_size\":[[:space:]]*$((V + 2))" merged/config.json && say "ok - the merged model has $((V + 2)) tokens" \
  || fail "merged config.json: $(grep vocab merged/config.json)"
adapter_is_merge run merged lora.r=0 'lora.modules_to_save=[]'

# a tied model: the chat template's tokens train in both copies of its embedding, and the merged
# export keeps the two apart (tie_word_embeddings false, an lm_head.weight of its own), as zt eval of
# the adapter computes
make_tiny tied vocab_size=$V bos_token_id=1 eos_token_id=2 tie_word_embeddings=true \
  && $PY "$ROOT/tests/cli/llama_ref.py" perturb tied && cp chat.model tied/tokenizer.model
expect_ok "sft of a tied model with modules_to_save" "$ZT" sft chat.toml output.dir=tied_run model.path=tied \
  train.max_steps=30 eval.generate=false
expect_ok "export --merge of a tied model's adapter" "$ZT" export tied_run --merge --out tied_merged
$PY - "$V" <<'PY' && say "ok - the merged tied model has its embedding and LM head apart, the adapter's copies" || fail "tied merge"
import json, os, sys
import numpy as np
exec(open(os.environ["ROOT"] + "/tests/cli/llama_ref.py").read().split("def inv_freq")[0])
V = int(sys.argv[1])
assert json.load(open("tied/config.json"))["tie_word_embeddings"] is True
assert json.load(open("tied_merged/config.json"))["tie_word_embeddings"] is False
A, M = read_st("tied_run/final/adapter_model.safetensors"), read_st("tied_merged/model.safetensors")
E, H = A["base_model.model.model.embed_tokens.weight"], A["base_model.model.lm_head.weight"]
assert E.shape == H.shape == (V + 2, 32) and np.abs(E - H).max() > 1e-3, (E.shape, H.shape)
assert np.array_equal(M["model.embed_tokens.weight"], E) and np.array_equal(M["lm_head.weight"], H)
PY
adapted=$("$ZT" eval chat.toml --checkpoint tied_run/final model.path=tied lora.r=0 'lora.modules_to_save=[]') \
  && merged=$("$ZT" eval chat.toml --checkpoint tied_merged lora.r=0 'lora.modules_to_save=[]') && $PY -c "
import json; a, m = json.loads('$adapted'), json.loads('$merged')
assert abs(a['loss'] - m['loss']) <= 1e-4 * a['loss'] and a['accuracy'] == m['accuracy'], (a, m)" \
  && say "ok - zt eval of the tied model's adapter is the merged model's: $adapted" || fail "tied eval: adapter $adapted, merged $merged"

# refusals
expect_exit 2 "an unknown module" "lora.modules_to_save: 'norm' is not embed_tokens or lm_head" \
  "$ZT" sft chat.toml output.dir=u 'lora.modules_to_save=[embed_tokens, norm]'
expect_exit 2 "modules_to_save with lora.adapter" "lora.adapter supplies modules_to_save from its adapter_config.json" \
  "$ZT" sft chat.toml output.dir=a lora.r=0 lora.adapter=run/final
$PY "$ROOT/tests/cli/llama_ref.py" adapter base plain 4 8 false q_proj v_proj
expect_exit 2 "zt eval of an adapter without the new rows" "not in the vocabulary \($V tokens, $((V + 2)) needed\): LoRA freezes" \
  "$ZT" eval chat.toml --checkpoint plain lora.r=0 'lora.modules_to_save=[]'
done_testing

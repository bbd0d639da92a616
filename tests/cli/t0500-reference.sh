#!/usr/bin/env bash
# zt's forward pass against an independent NumPy implementation of the Hugging Face
# models (tests/cli/llama_ref.py), on small models with every feature zt reads from
# config.json (Llama, Mistral, Qwen2/3, OLMo 2, Gemma 2/3, Phi-3, SmolLM3, Granite); and packed sequences
# give the same loss as one sequence per row.
. "$(dirname "$0")/lib.sh"

$PY - <<'PY'
import json, random
r = random.Random(11)
with open("data.jsonl", "w") as f:
    for n in (5, 17, 9, 30, 2, 12):
        f.write(json.dumps({"input_ids": [r.randrange(64) for _ in range(n)]}) + "\n")
PY
printf '[model]\npath = "m"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\nshuffle = false\n[train]\nmicro_batch_size = 2\nmax_steps = 1\n' > recipe.toml

check() { # check NAME [config_key=value ...] (rope_scaling=llama3|linear|longrope is written into config.json)
  local name=$1; shift
  local args=() scaling=""
  for a in "$@"; do case $a in rope_scaling=*) scaling=${a#*=} ;; *) args+=("$a") ;; esac; done
  rm -rf m && make_tiny m "${args[@]}" && $PY "$ROOT/tests/cli/llama_ref.py" perturb m || { fail "$name: setup"; return; }
  if [ -n "$scaling" ]; then
    $PY - "$scaling" <<'PY'
import json, sys
c = json.load(open("m/config.json"))
c["rope_scaling"] = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16},
    "longrope": {"type": "longrope", "short_factor": [1.0, 1.5, 2.5], "long_factor": [2.0, 3.0, 5.0]}}[sys.argv[1]]
json.dump(c, open("m/config.json", "w"))
PY
  fi
  local ref zt_packed zt_rows
  ref=$($PY "$ROOT/tests/cli/llama_ref.py" loss m data.jsonl)
  zt_rows=$("$ZT" eval recipe.toml data.packing=false) || { fail "$name: zt eval"; return; }
  zt_packed=$("$ZT" eval recipe.toml data.packing=true) || { fail "$name: zt eval (packed)"; return; }
  # zt in fp32 against float64: every dot product has at most 64 terms (hidden 32, intermediate
  # and vocabulary 64), so it is within 64·2^-24 ≈ 4e-6 of the sum of its terms' magnitudes
  # whatever order the BLAS kernels and target clones sum in; the norms renormalise what the
  # residual stream carries, and the loss (≈ 8 with these weights) is within twice the largest
  # logit error of exact. With sums of magnitude below 10 through about three products in series
  # that is 3e-5 relative if every rounding went one way, under 2e-6 for roundings of random
  # sign (sqrt(64)·2^-24 a product): 1e-5 sits between. Measured with OpenBLAS's Prescott,
  # Haswell and Cooperlake kernels: at most 1.4e-7.
  $PY - "$ref" "$zt_rows" "$zt_packed" <<'PY' && say "ok - $name: $ref" || fail "$name: reference $ref, zt $zt_rows, packed $zt_packed"
import json, sys
ref, rows, packed = (json.loads(a) for a in sys.argv[1:])
assert ref["tokens"] == rows["target_tokens"] == packed["target_tokens"]
assert abs(ref["loss"] - rows["loss"]) < 1e-5 * ref["loss"]
assert abs(ref["loss"] - packed["loss"]) < 1e-5 * ref["loss"]
PY
}

check "llama, GQA"
check "llama, tied head, attention_bias" tie_word_embeddings=true attention_bias=true
check "qwen2 (q/k/v bias)" model_type=qwen2
check "mistral with a sliding window of 4" model_type=mistral sliding_window=4
check "qwen3 (q/k norms, head_dim 16, attention_bias)" model_type=qwen3 head_dim=16 attention_bias=true
# rope scaling: zt init writes none, so edit config.json
check "llama3 rope scaling" rope_theta=500000 rope_scaling=llama3
check "linear rope scaling" rope_scaling=linear
check "olmo2 (post norms, q/k norms over the projections, attention_bias)" model_type=olmo2 head_dim=16 \
  attention_bias=true
check "gemma2 ((1 + w) norms, GeGLU, windows of 4 on even layers, soft-capping)" model_type=gemma2 head_dim=16 \
  query_pre_attn_scalar=12 sliding_window=4 attn_logit_softcapping=5 final_logit_softcapping=3 num_hidden_layers=3
check "gemma3 (q/k norms, windows and local rotary on 2 of 3 layers, linear rope scaling on the other)" \
  model_type=gemma3_text head_dim=16 sliding_window=4 sliding_window_pattern=3 rope_local_base_freq=100 \
  num_hidden_layers=3 rope_scaling=linear
# longrope's short factors: zt takes the long ones for a run longer than the original length, transformers
# for a sequence longer than it (docs/architecture.md), so every sequence and the run stay under 64
check "phi3 (fused projections, rotary on 6 of 8, longrope, a window of 8)" model_type=phi3 \
  partial_rotary_factor=0.75 sliding_window=8 original_max_position_embeddings=64 max_position_embeddings=128 \
  rope_scaling=longrope
check "smollm3 (no rotary on layer 1)" model_type=smollm3 no_rope_layer_interval=2
check "granite (its four multipliers, attention_bias)" model_type=granite embedding_multiplier=3 \
  attention_multiplier=0.2 residual_multiplier=0.4 logits_scaling=1.5 attention_bias=true
done_testing

#!/usr/bin/env bash
# ZeRO stage 3 on the families with their own ops: Qwen3 (per-head q/k norms, q/k/v biases,
# head_dim apart from hidden / heads, an untied head) and Gemma 3 (1 + w norms around each
# block, q/k norms, GeGLU, embeddings scaled by sqrt(hidden), windows on every other layer,
# local rotary tables on those and linear rope scaling on the others, a tied head) and GLM-4 (one
# gate_up_proj beside q, k, v with biases, interleaved rotary pairs on half of each head, norms on
# the blocks' outputs under GLM-4's names, an untied head). On 2
# ranks each trains like one rank; in tiles (the MLP's, and Qwen3's embedding and head;
# Gemma 3's tied ones cannot be tiled) like in whole units, on 1 and 2 ranks; with the
# weights, gradients and moments in a swap file, or the moments in host memory, bitwise as
# in memory.
. "$(dirname "$0")/lib.sh"
need_mpi

# norms and biases away from their initial values (llama_ref.py perturb), so that a q/k norm
# or a (1 + w) scale that went to the wrong rank or tile would change the result
make_tiny qwen3 model_type=qwen3 num_hidden_layers=3 head_dim=16 attention_bias=true &&
  $PY "$ROOT/tests/cli/llama_ref.py" perturb qwen3 || fail "qwen3 model"
make_tiny gemma3 model_type=gemma3_text num_hidden_layers=4 head_dim=16 query_pre_attn_scalar=16 sliding_window=8 \
  sliding_window_pattern=2 && $PY "$ROOT/tests/cli/llama_ref.py" perturb gemma3 && $PY - <<'PY' || fail "gemma3 model"
import json
c = json.load(open("gemma3/config.json"))
c["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}  # zt init writes none
json.dump(c, open("gemma3/config.json", "w"))
PY
make_tiny glm4 model_type=glm4 num_hidden_layers=3 head_dim=16 attention_bias=true tie_word_embeddings=false &&
  $PY "$ROOT/tests/cli/llama_ref.py" perturb glm4 || fail "glm4 model"
random_tokens data.jsonl 7 60
printf '[model]\ndtype = "fp32"\nactivation_checkpointing = false\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\npacking = false\n[train]\nmax_steps = 4\nmicro_batch_size = 1\nlearning_rate = 1e-2\nadam_epsilon = 1\nlogging_steps = 1\n[zero]\nstage = 3\n' > recipe.toml

# Why 1e-5 where the runs are not bitwise: micro-batches of 1 everywhere, so 2 ranks against one
# only sum the 4 micro-batches' gradients in another grouping (t1500-zero.sh), and tiles split
# the head's, the embedding's and the MLPs' sums over the vocabulary or the intermediate size
# (64 terms) into 4 partial sums: fp32 sums regrouped, within 64·2^-24 ≈ 4e-6 of the sum of
# their terms' magnitudes. adam_epsilon = 1 makes AdamW's step lr·m/(sqrt(v) + 1), a smooth
# function of the gradient, which passes those differences on at lr times their size; with the
# default 1e-8 a gradient element that is rounding noise takes a full ±lr step either way (measured:
# 1.8e-5 of a tensor's largest between tiles and whole units, on one element of q_proj). Measured
# with adam_epsilon = 1 (OpenBLAS's Cooperlake kernels): 2 ranks within 3.4e-8 of a tensor's largest
# and 1.3e-8 in the loss, tiles within 6.6e-8 and 9.8e-8: 1e-5 leaves a margin of 100. A
# learning rate 0.1% larger moves Qwen3's weights by 1.2e-6 and its losses by 1.5e-6, so steps
# about 1% off (a gradient of the wrong rank or tile would be far more) fail.
same() { $PY "$ROOT/tests/cli/same_run.py" "$@"; }
bitwise() { cmp -s "$1/final/model.safetensors" "$2/final/model.safetensors" && [ "$(loss_bits "$1")" = "$(loss_bits "$2")" ]; }
loss_bits() { $PY -c "import json, sys; print([json.loads(l)['loss'].hex() for l in open(sys.argv[1])])" "$1/metrics.jsonl"; }

for fam in qwen3 gemma3 glm4; do
  one() { "$ZT" pretrain recipe.toml model.path=$fam output.dir=$fam-$1 "${@:2}"; }
  two() { $MPI -np 2 "$ZT" pretrain recipe.toml model.path=$fam output.dir=$fam-$1 "${@:2}"; }
  case $fam in
    qwen3) tiles="zero.embedding_tiles=4 zero.mlp_tiles=4 zero.head_tiles=4" ;;
    gemma3) tiles="zero.mlp_tiles=4" ;;
    glm4) tiles="zero.embedding_tiles=4 zero.mlp_tiles=4 zero.head_tiles=4" ;;
  esac
  nvme="offload.param=nvme offload.optimizer=nvme offload.nvme_path=swap"
  expect_ok "$fam: one rank, accumulation 4" one 1 train.gradient_accumulation_steps=4
  expect_ok "$fam: 2 ranks, accumulation 2" two 2 train.gradient_accumulation_steps=2
  expect_ok "$fam: one rank, moments in host memory" one 1-cpu train.gradient_accumulation_steps=4 offload.optimizer=cpu
  expect_ok "$fam: one rank, everything in a swap file" one 1-nvme train.gradient_accumulation_steps=4 $nvme
  expect_ok "$fam: 2 ranks, everything in a swap file" two 2-nvme train.gradient_accumulation_steps=2 $nvme
  expect_ok "$fam: whole units, one rank" one w1 train.gradient_accumulation_steps=4 offload.param=cpu zero.prefetch_layers=0
  expect_ok "$fam: tiles, one rank" one t1 train.gradient_accumulation_steps=4 offload.param=cpu zero.prefetch_layers=0 $tiles
  expect_ok "$fam: tiles, one rank, checkpointing" one t1c train.gradient_accumulation_steps=4 offload.param=cpu \
    model.activation_checkpointing=true $tiles
  expect_ok "$fam: tiles, one rank, checkpointing, swap file, prefetch 2" one t1n train.gradient_accumulation_steps=4 \
    $nvme model.activation_checkpointing=true zero.prefetch_layers=2 $tiles
  expect_ok "$fam: tiles, 2 ranks, checkpointing, prefetch 2" two t2c train.gradient_accumulation_steps=2 \
    model.activation_checkpointing=true zero.prefetch_layers=2 $tiles
  if got=$(same $fam-1 $fam-2); then say "ok - $fam: 2 ranks train like one ($got)"; else fail "$fam: 2 ranks against one"; fi
  for t in t1 t1c; do
    if got=$(same $fam-w1 $fam-$t); then say "ok - $fam: $t, tiles train like whole units ($got)"; else fail "$fam: $t"; fi
  done
  if got=$(same $fam-2 $fam-t2c); then say "ok - $fam: tiles on 2 ranks train like whole units ($got)"; else fail "$fam: t2c"; fi
  for pair in "1 w1 offload.param = cpu" "1 1-cpu offload.optimizer = cpu" "1 1-nvme everything in a swap file" \
    "2 2-nvme everything in a swap file, 2 ranks" "t1c t1n tiles with everything in a swap file"; do
    set -- $pair
    bitwise $fam-$1 $fam-$2 && say "ok - $fam: ${*:3}: bitwise the losses and weights of $1" || fail "$fam: ${*:3} differs from $1"
  done
done
done_testing

#!/usr/bin/env bash
# NEFTune (train.neftune_noise_alpha): with noise on the embeddings a run trains other weights
# than without, and the same weights again from the same seed; a run cut after a checkpoint and
# resumed ends bitwise as the uninterrupted one (the noise follows the step); the key is written
# back to recipe.resolved.toml; a negative alpha is refused naming the key.
. "$(dirname "$0")/lib.sh"

make_tiny model
random_tokens data.jsonl 3 40
printf '[model]\npath = "model"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n[train]\nmax_steps = 4\nsave_steps = 2\nmicro_batch_size = 2\nlearning_rate = 1e-3\nlogging_steps = 1\nneftune_noise_alpha = 5\n' > recipe.toml

expect_ok "with noise" "$ZT" pretrain recipe.toml output.dir=noisy
expect_ok "with noise, again" "$ZT" pretrain recipe.toml output.dir=again
expect_ok "without noise" "$ZT" pretrain recipe.toml output.dir=plain train.neftune_noise_alpha=0
cmp -s noisy/final/model.safetensors again/final/model.safetensors && say "ok - the same seed, the same noise" \
  || fail "two runs with the same seed differ"
cmp -s noisy/final/model.safetensors plain/final/model.safetensors && fail "the noise changed nothing" \
  || say "ok - the noise changes what is trained"
grep -qx 'neftune_noise_alpha = 5.0\|neftune_noise_alpha = 5' noisy/recipe.resolved.toml \
  && say "ok - recipe.resolved.toml keeps the alpha" || fail "recipe.resolved.toml: $(grep neftune noisy/recipe.resolved.toml)"

cp -r noisy cut && rm -rf cut/final cut/summary.json cut/checkpoints/step-000004
expect_ok "resume after the step-2 checkpoint" "$ZT" pretrain recipe.toml output.dir=cut
cmp -s noisy/final/model.safetensors cut/final/model.safetensors && say "ok - the resumed run is bitwise identical" \
  || fail "the resumed run's weights differ from the uninterrupted run's"

expect_exit 2 "a negative alpha" "neftune_noise_alpha" "$ZT" pretrain recipe.toml output.dir=bad \
  train.neftune_noise_alpha=-1
done_testing

# bench/lib.sh: what the bench scripts that make a large model share (sourced from the
# repository's root, after OUT is set): the log, the threads, the checks before they start.
log() { echo "bench: $*" >&2; }
export OMP_NUM_THREADS=${BENCH_THREADS:-2} OPENBLAS_NUM_THREADS=${BENCH_THREADS:-2}
mkdir -p "$OUT"
[ -x ./zt ] || { log "./zt not built (make)"; exit 1; }

# need_disk GB WHAT: exits unless OUT's file system has GB gigabytes (10^9 bytes) free for WHAT
need_disk() {
    local free
    free=$(df --output=avail -B1 "$OUT" | tail -1)
    [ "$free" -ge $(($1 * 1000000000)) ] && return 0
    log "needs $1 GB free under $OUT ($2), has $((free / 1000000000)) GB"
    exit 1
}

# nvme_recipe: the end of a recipe whose state streams through OUT/swap (16 MiB blocks, 32 in
# flight) into OUT/run
nvme_recipe() {
    cat <<TOML
nvme_path = "$OUT/swap"
[offload.aio]
block_size = 16777216
queue_depth = 32
[output]
dir = "$OUT/run"
TOML
}

# steps_recipe SEQ STEPS LR: OUT/tokens.jsonl, 64 copies of a short periodic sequence of SEQ tokens
# (a loss that can fall in a few steps), and the [data] and [train] sections of a recipe that
# trains STEPS steps of one such sequence at the constant learning rate LR, logging each
steps_recipe() {
    /usr/bin/python3 -c "
import json
seq = [(7 * i) % 512 + 3 for i in range($1)]
for _ in range(64): print(json.dumps({'input_ids': seq}))" > "$OUT/tokens.jsonl"
    cat <<TOML
[data]
train = "$OUT/tokens.jsonl"
format = "tokens"
max_length = $1
packing = false
[train]
max_steps = $2
micro_batch_size = 1
gradient_accumulation_steps = 1
learning_rate = $3
lr_scheduler_type = "constant"
logging_steps = 1
save_steps = 0
TOML
}

#!/usr/bin/env python3
"""bench/torch_moe: transformers' own mixture-of-experts model (Qwen3MoeForCausalLM, eager attention)
trained on the model directory and tokens bench/moe.sh gives zt, as the yardstick for zt's experts.

    BENCH_TORCH_PYTHON=/path/to/venv/bin/python bench/moe.sh   # runs this with that Python

    python bench/torch_moe.py MODEL_DIR TOKENS.jsonl --threads 2 --dtype fp32|bf16 --steps 10

needs torch and transformers >= 4.51 (Qwen3-MoE). The model is read from MODEL_DIR (the safetensors
zt init wrote), so both train the same weights; config.json's output_router_logits puts the
load-balancing loss in the loss, as in zt. Micro-batches of 4 x 256 tokens, AdamW (lr 1e-4) with
gradient clipping at 1; bf16 is fp32 weights under bf16 autocast. Prints one JSON line:
tokens_per_s, the mean over the steps after --warmup (2: steps 3..10), and the last loss.
"""
import argparse
import contextlib
import json
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("tokens")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2, help="steps not timed")
    p.add_argument("--batch", type=int, default=4)
    a = p.parse_args()
    import torch
    import transformers

    torch.set_num_threads(a.threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32,
                                                              attn_implementation="eager")
    model.train()
    rows = [json.loads(l)["input_ids"] for l in open(a.tokens)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if a.dtype == "bf16" else contextlib.nullcontext
    times, loss = [], None
    for step in range(a.steps):
        ids = torch.tensor([rows[(step * a.batch + i) % len(rows)] for i in range(a.batch)])
        t0 = time.perf_counter()
        with ctx():
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        loss = float(out.loss)
    steady = times[a.warmup:] if len(times) > a.warmup else times
    tps = a.batch * ids.shape[1] / (sum(steady) / len(steady))
    print(json.dumps({"tokens_per_s": tps, "loss": loss, "dtype": a.dtype, "threads": a.threads,
                      "torch": torch.__version__, "transformers": transformers.__version__}))


if __name__ == "__main__":
    main()

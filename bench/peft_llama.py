#!/usr/bin/python3
"""bench/peft_llama: LoRA with Hugging Face transformers + PEFT on the CPU, the yardstick of bench/lora.sh.

    /tmp/hf/bin/python bench/peft_llama.py --threads 2 [--dtype bf16] [--full]   # one JSON line on stdout

A LlamaForCausalLM of bench/run.sh's shape (hidden 512, 8 layers, 8 heads / 4 KV, intermediate 1408,
vocab 32000, untied head; eager attention, what transformers runs on a CPU), random weights, and a
PEFT LoRA adapter on every linear layer of the blocks (r 16, alpha 32, no dropout: what
`lora.r = 16` with `target_modules = "all-linear"` trains in zt), AdamW (lr 1e-4, weight decay 0)
on the adapters with gradient clipping at 1, trained on random tokens, 4 sequences of 256 a step.
--full trains the whole model instead (no PEFT). --dtype bf16: fp32 weights under bf16 autocast,
as people run it. Prints the mean tokens/s of steps 3..10 and the process's peak RSS.
"""
import argparse
import json
import resource
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--full", action="store_true", help="train the whole model, no adapters")
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()

    import torch
    import transformers

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    cfg = transformers.LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=8,
                                   num_attention_heads=8, num_key_value_heads=4, vocab_size=32000,
                                   max_position_embeddings=256, tie_word_embeddings=False,
                                   attn_implementation="eager")
    model = transformers.LlamaForCausalLM(cfg)
    if not a.full:
        import peft
        lora = peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear",
                               task_type="CAUSAL_LM")
        model = peft.get_peft_model(model, lora)
    model.train()
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.0)
    g = torch.Generator().manual_seed(1)
    times = []
    for step in range(1, a.steps + 1):
        ids = torch.randint(0, 32000, (4, 256), generator=g)
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    tps = [4 * 256 / t for t in times[2:]]
    print(json.dumps({"tokens_per_s": sum(tps) / len(tps), "peak_rss_bytes": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss * 1024, "trainable": sum(q.numel() for q in params),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "peft": None if a.full else __import__("peft").__version__, "loss": loss.item()}))


if __name__ == "__main__":
    main()

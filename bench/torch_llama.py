#!/usr/bin/python3
"""bench/torch_llama: a plain eager PyTorch Llama trained on random tokens, as the yardstick for zt.

    /usr/bin/python3 bench/torch_llama.py --threads 2          # one JSON line on stdout
    /usr/bin/python3 bench/torch_llama.py --print-flops        # FLOPs per trained token, no torch
    python3 bench/torch_llama.py --device cuda --dtype bf16 --gemm-peak ...   # bench/gpu.sh

Token embedding, RMSNorm, rotary embeddings (rotate-half), causal attention with grouped KV heads
(explicit matmul + mask + softmax + matmul), SwiGLU MLP, untied LM head, cross-entropy on shifted
labels, AdamW with gradient clipping; fp32. The default shape is the one bench/run.sh gives zt.
On CUDA (torch 2) the model is built on the GPU, attention is F.scaled_dot_product_attention
(is_causal) and AdamW the fused one; --dtype bf16 is what people run there: fp32 parameters and
optimizer under bf16 autocast. --gemm-peak first times torch.matmul of two 8192 x 8192 bf16
matrices (mean of 10 after 3 warm-ups), the cuBLAS rate to divide by.
FLOPs per token follow the project's formula: 6 x (parameters in matrix products, LM head included,
token embedding excluded) + 12 x layers x hidden x sequence length.
"""
import argparse
import contextlib
import json
import math
import sys
import time


def flops_per_token(a):
    kv = a.kv_heads * (a.hidden // a.heads)
    per_layer = 2 * a.hidden * a.hidden + 2 * a.hidden * kv + 3 * a.hidden * a.intermediate
    matrix_params = a.layers * per_layer + a.hidden * a.vocab
    return 6 * matrix_params + 12 * a.layers * a.hidden * a.seq


def gemm_tflops(torch, n=8192, warmup=3, reps=10):
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(warmup):
        x @ y
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        x @ y
    torch.cuda.synchronize()
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e12


def build_model(a, torch):
    nn, F = torch.nn, torch.nn.functional
    head_dim = a.hidden // a.heads
    sdpa = a.device == "cuda"

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-5):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(a.hidden, a.heads * head_dim, bias=False)
            self.k_proj = nn.Linear(a.hidden, a.kv_heads * head_dim, bias=False)
            self.v_proj = nn.Linear(a.hidden, a.kv_heads * head_dim, bias=False)
            self.o_proj = nn.Linear(a.heads * head_dim, a.hidden, bias=False)

        def forward(self, x, cos, sin, mask):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, a.heads, head_dim).transpose(1, 2)
            k = self.k_proj(x).view(b, s, a.kv_heads, head_dim).transpose(1, 2)
            v = self.v_proj(x).view(b, s, a.kv_heads, head_dim).transpose(1, 2)
            cos, sin = cos.to(q.dtype), sin.to(q.dtype)  # autocast: rotary in bf16, as Hugging Face does
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            rep = a.heads // a.kv_heads
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            if sdpa:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim) + mask
                out = torch.softmax(scores, dim=-1) @ v
            return self.o_proj(out.transpose(1, 2).reshape(b, s, a.hidden))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(a.hidden, a.intermediate, bias=False)
            self.up_proj = nn.Linear(a.hidden, a.intermediate, bias=False)
            self.down_proj = nn.Linear(a.intermediate, a.hidden, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm(a.hidden)
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm(a.hidden)
            self.mlp = MLP()

        def forward(self, x, cos, sin, mask):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(a.vocab, a.hidden)
            self.layers = nn.ModuleList(Layer() for _ in range(a.layers))
            self.norm = RMSNorm(a.hidden)
            self.lm_head = nn.Linear(a.hidden, a.vocab, bias=False)
            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))
            freqs = torch.outer(torch.arange(a.seq).float(), inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            self.register_buffer("cos", emb.cos(), persistent=False)
            self.register_buffer("sin", emb.sin(), persistent=False)
            self.register_buffer("mask", torch.full((a.seq, a.seq), float("-inf")).triu(1), persistent=False)
            for name, p in self.named_parameters():
                if p.dim() == 2:
                    nn.init.normal_(p, 0.0, 0.02)

        def forward(self, ids):
            x = self.embed_tokens(ids)
            for layer in self.layers:
                x = layer(x, self.cos, self.sin, self.mask)
            logits = self.lm_head(self.norm(x))
            return F.cross_entropy(logits[:, :-1].reshape(-1, a.vocab), ids[:, 1:].reshape(-1))

    return Llama()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=1408)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="bf16: autocast over fp32 parameters")
    p.add_argument("--gemm-peak", action="store_true", help="cuda: time a bf16 8192^3 matmul first")
    p.add_argument("--print-flops", action="store_true", help="print FLOPs per trained token and exit")
    a = p.parse_args()
    fpt = flops_per_token(a)
    if a.print_flops:
        print(fpt)
        return 0

    import torch

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    cuda = a.device == "cuda"
    gemm = gemm_tflops(torch) if cuda and a.gemm_peak else None
    with torch.device(a.device) if cuda else contextlib.nullcontext():
        model = build_model(a, torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.0,
                            **({"fused": True} if cuda else {}))
    autocast = torch.autocast(a.device, dtype=torch.bfloat16) if a.dtype == "bf16" else contextlib.nullcontext()
    gen = torch.Generator().manual_seed(a.seed)
    times, loss = [], float("nan")
    for step in range(a.warmup + a.steps):
        ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen).to(a.device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            out = model(ids)
        out.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if cuda:
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        loss = out.item()
        if step >= a.warmup:
            times.append(dt)
        print(f"step {step + 1}: loss {loss:.4f}, {dt:.3f} s", file=sys.stderr)
    step_s = sum(times) / len(times)
    tokens_per_s = a.batch * a.seq / step_s
    result = {
        "impl": "pytorch",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "tokens_per_s": round(tokens_per_s, 2),
        "gflops": round(tokens_per_s * fpt / 1e9, 2),
        "step_s": round(step_s, 4),
        "flops_per_token": fpt,
        "loss": round(loss, 4),
    }
    if cuda:
        result.update(device=torch.cuda.get_device_name(), dtype=a.dtype,
                      peak_memory_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2))
        if gemm is not None:
            result["gemm_bf16_tflops"] = round(gemm, 1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

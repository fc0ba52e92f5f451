"""PyTorch's side of the peer suite (bench/suites/peer.ts): full-parameter training steps of a Qwen3 model folder
(config.json + model.safetensors, the bundled policy by default) on CPU, eager mode, on the thread count given.

It loads the same weights the Node side loads, then serves steps over stdin/stdout so the suite can interleave them
with its own, step by step: each input line "step" runs one optimizer step on the row given at start and answers
one JSON line {"s": seconds, "loss": loss}; "quit" ends. The step is the one src/train/trainer.ts takes:
next-token cross-entropy (mean over the row's predicted tokens), backward, global grad-norm clip at 1, AdamW.
Attention is torch.nn.functional.scaled_dot_product_attention (causal, grouped-query), PyTorch's own CPU kernel;
RMSNorm is torch.nn.functional.rms_norm; AdamW is the fused CPU implementation.

usage: python torch_step.py MODEL_DIR THREADS TOKENS_JSON
"""

import json
import struct
import sys
import time

import torch
import torch.nn.functional as F


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        assert spec["dtype"] == "F32", f"{name}: {spec['dtype']}"
        a, b = spec["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=torch.float32).reshape(spec["shape"]).clone()
    return out


class Qwen3(torch.nn.Module):
    def __init__(self, cfg, w):
        super().__init__()
        self.cfg = cfg
        self.p = torch.nn.ParameterDict({k.replace(".", "__"): torch.nn.Parameter(v) for k, v in w.items()})

    def w(self, name):
        return self.p[name.replace(".", "__")]

    def forward(self, ids, cos, sin):
        c = self.cfg
        T = ids.shape[0]
        Hq, Hkv, D, eps = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["rms_norm_eps"]
        E = self.w("model.embed_tokens.weight")
        h = E[ids]
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            x = F.rms_norm(h, (h.shape[-1],), self.w(p + "input_layernorm.weight"), eps)
            q = (x @ self.w(p + "self_attn.q_proj.weight").t()).view(T, Hq, D)
            k = (x @ self.w(p + "self_attn.k_proj.weight").t()).view(T, Hkv, D)
            v = (x @ self.w(p + "self_attn.v_proj.weight").t()).view(T, Hkv, D)
            q = F.rms_norm(q, (D,), self.w(p + "self_attn.q_norm.weight"), eps)
            k = F.rms_norm(k, (D,), self.w(p + "self_attn.k_norm.weight"), eps)
            q, k = rope(q, cos, sin), rope(k, cos, sin)
            a = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], is_causal=True, enable_gqa=True)
            h = h + a[0].transpose(0, 1).reshape(T, Hq * D) @ self.w(p + "self_attn.o_proj.weight").t()
            x = F.rms_norm(h, (h.shape[-1],), self.w(p + "post_attention_layernorm.weight"), eps)
            g = x @ self.w(p + "mlp.gate_proj.weight").t()
            u = x @ self.w(p + "mlp.up_proj.weight").t()
            h = h + (F.silu(g) * u) @ self.w(p + "mlp.down_proj.weight").t()
        h = F.rms_norm(h, (h.shape[-1],), self.w("model.norm.weight"), eps)
        return h @ E.t()


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def main():
    model_dir, threads, tokens_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cfg = json.load(open(f"{model_dir}/config.json"))
    model = Qwen3(cfg, load_safetensors(f"{model_dir}/model.safetensors"))
    ids = torch.tensor(json.load(open(tokens_path)), dtype=torch.long)
    T, D = ids.shape[0], cfg["head_dim"]
    inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None]
    ang = torch.cat((ang, ang), dim=-1)
    cos, sin = ang.cos().float()[:, None, :], ang.sin().float()[:, None, :]
    params = list(model.parameters())
    try:
        opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.0, fused=True)
        fused = True
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.0)
        fused = False
    info = {"torch": torch.__version__, "threads": torch.get_num_threads(), "cpu_capability": torch.backends.cpu.get_cpu_capability(), "mkldnn": torch.backends.mkldnn.is_available(), "fused_adamw": fused, "params": sum(p.numel() for p in params)}
    print(json.dumps({"ready": info}), flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "quit":
            break
        if cmd != "step":
            continue
        t0 = time.perf_counter()
        logits = model(ids, cos, sin)
        loss = F.cross_entropy(logits[:-1], ids[1:])
        opt.zero_grad(set_to_none=False)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        s = time.perf_counter() - t0
        print(json.dumps({"s": s, "loss": loss.item()}), flush=True)


if __name__ == "__main__":
    main()

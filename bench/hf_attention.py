#!/usr/bin/env python3
"""posenc.hf against Hugging Face's own eager attention, one layer on the CPU.

One LlamaAttention layer shaped as SmolLM2-135M's (d 576, 9 query heads, 3
key/value heads of 64; random weights: speed does not depend on them) runs a
causal prefill of T tokens three ways: HF's eager attention, the same layer
patched by posenc.hf with method "none" (plain RoPE), and patched with
ReRoPE (window 512, one pass). Each is timed as the layer's forward (the
projections are the same in all three), best of --reps after one warm-up.
Printed: milliseconds, the attention's GFLOP/s (q.k and p.v over the causal
triangle: 2 x heads x T^2 x head_dim flops) and its ratio to this machine's
fp32 FMA peak, measured in the same run by `posenc bench limits`, and the
speedup over eager. The outputs of the three are compared first (none must
equal eager).

Usage: .venv/bin/python bench/hf_attention.py [--tokens 2048,8192] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import time

import torch
import transformers

import posenc
import posenc.hf

ROOT = pathlib.Path(__file__).resolve().parents[1]


def machine_limits(posenc_binary: pathlib.Path) -> dict:
    out = subprocess.run([str(posenc_binary), "bench", "limits", "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def layer_model(tokens: int):
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=576, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=9, num_key_value_heads=3, head_dim=64,
                                      max_position_embeddings=8192, rope_theta=100000.0,
                                      attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def time_layer(model, hidden: torch.Tensor, reps: int) -> tuple:
    """Best seconds of the first layer's attention forward, and its output."""
    inner = model.model
    positions = torch.arange(hidden.shape[1])[None]
    embeddings = inner.rotary_emb(hidden, positions)
    mask = inner._update_causal_mask(None, hidden, positions[0], None, False)
    attn = inner.layers[0].self_attn
    best, out = float("inf"), None
    with torch.no_grad():
        for rep in range(reps + 1):
            start = time.perf_counter()
            out = attn(hidden, position_embeddings=embeddings, attention_mask=mask, position_ids=positions,
                       cache_position=positions[0])[0]
            if rep > 0:
                best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", default="2048,8192", help="prefill lengths, comma-separated")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--posenc", type=pathlib.Path, default=ROOT / "build" / "release" / "tools" / "posenc",
                        help="the posenc binary (for `posenc bench limits`)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args()
    threads = posenc.num_threads()
    torch.set_num_threads(threads)
    limits = machine_limits(args.posenc)
    peak = limits["fma_peak_gflops"]
    report = {"torch": torch.__version__, "transformers": transformers.__version__, "threads": threads,
              "peak_gflops": peak, "fma_target": limits["fma_target"], "rows": []}
    say = (lambda *_: None) if args.json else print
    say(f"posenc.hf vs HF eager attention, one SmolLM2-135M-shaped layer (9/3 heads of 64), causal prefill; "
        f"torch {torch.__version__}, transformers {transformers.__version__}, {threads} threads for both")
    say(f"  fma peak {peak:.0f} GFLOP/s ({limits['fma_target']}, {limits['threads']} threads, posenc bench limits)")
    say(f"{'tokens':>7}  {'attention':<28}  {'ms':>9}  {'GFLOP/s':>8}  {'of peak':>7}  {'vs eager':>8}")
    for tokens in (int(t) for t in args.tokens.split(",")):
        model = layer_model(tokens)
        hidden = torch.randn(1, tokens, 576, generator=torch.Generator().manual_seed(1))
        flops = 2 * 9 * tokens * tokens * 64
        eager_s, eager_out = time_layer(model, hidden, args.reps)
        rows = [("HF eager", eager_s, None)]
        for method in ("none", "rerope:window=512"):
            posenc.hf.apply(model, method, target_length=max(tokens, 8192))
            seconds, out = time_layer(model, hidden, args.reps)
            posenc.hf.remove(model)
            if method == "none":
                error = float((out - eager_out).abs().max() / eager_out.abs().max())
                assert error < 1e-5, f"posenc.hf none differs from eager by {error:.2e} (relative)"
            rows.append((f"posenc.hf {method}", seconds, out))
        for name, seconds, _ in rows:
            gflops = flops / seconds / 1e9
            report["rows"].append({"tokens": tokens, "attention": name, "seconds": seconds, "gflops": gflops,
                                   "ratio": gflops / peak, "vs_eager": eager_s / seconds})
            say(f"{tokens:>7}  {name:<28}  {seconds * 1e3:>9.1f}  {gflops:>8.1f}  {gflops / peak:>7.3f}  "
                f"{eager_s / seconds:>7.2f}x")
    if args.json:
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

"""posenc.attention against Hugging Face's attention (transformers 4.49, eager).

Each case builds a tiny random model of a real architecture (Llama 3 with
GQA and llama3 RoPE scaling, Mistral's sliding window, BLOOM's ALiBi, T5's
relative bias in the decoder and the encoder, Gemma 2's logit soft-capping
on a sliding and a global layer), runs it in float64 with
``attn_implementation="eager"``, and compares posenc with the attention
output *before* the output projection and, through the same o_proj, with the
module's output.

Extraction by hooks (HfCapture): a forward hook on each q/k/v projection
rounds its output to the test dtype and keeps it, so Hugging Face computes in
float64 on exactly the q, k, v that posenc receives (unrotated: Hugging Face
applies RoPE inside the module, and so does posenc); a pre-hook on the output
projection keeps its input. Everything else (RoPE tables, masks built by the
models' own mask functions, ALiBi tensor, T5 buckets, softcapping, GQA
repeat) is Hugging Face's code.

Tolerance (atol = rtol) per dtype from rope_oracles.TOLERANCE: posenc
computes in float32 and rounds the output once to the storage dtype; the
oracle is float64 except its softmax (float32 in Hugging Face's eager code).
The largest errors seen are printed by test_observed_errors (pytest -s),
which runs every case again (under pytest-xdist the others run in other
workers) and holds them to bounds: every case seen in every dtype, each
error a few units of the dtype's rounding, and larger in a coarser dtype.
"""

from __future__ import annotations

from typing import Dict, List

import numpy as np
import pytest
import torch
from transformers import (BloomConfig, BloomModel, Gemma2Config, Gemma2Model, LlamaConfig, LlamaModel,
                          MistralConfig, MistralModel, T5Config)
from transformers.cache_utils import DynamicCache
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.t5.modeling_t5 import T5Stack

import posenc
from attention_oracles import DTYPES, max_abs_error, print_observed, record
from rope_oracles import TOLERANCE, hf_fp32_angle_slack

DTYPE_NAMES = list(DTYPES)
OBSERVED: dict = {}
MAX_POSITION: Dict[str, int] = {}  # the largest position each case rotated (check's max_position)


class HfCapture:
    """Hooks on one attention module: `projections` (name -> nn.Linear) have
    their outputs rounded to `dtype` (and kept, one entry per forward call);
    `out_proj`'s input and output are kept."""

    def __init__(self, projections: Dict[str, torch.nn.Linear], out_proj: torch.nn.Linear, dtype: str):
        self.torch_dtype = DTYPES[dtype][1]
        self.outputs: Dict[str, List[torch.Tensor]] = {name: [] for name in projections}
        self.attn: List[torch.Tensor] = []   # o_proj inputs [b, s, heads * v_dim]
        self.module_out: List[torch.Tensor] = []
        self.out_proj = out_proj
        for name, linear in projections.items():
            linear.register_forward_hook(self._rounding_hook(name))
        out_proj.register_forward_hook(self._keep_out_proj)

    def _rounding_hook(self, name):
        def hook(module, inputs, output):
            r = output.detach().to(self.torch_dtype).to(torch.float64)
            self.outputs[name].append(r)
            return r
        return hook

    def _keep_out_proj(self, module, inputs, output):
        self.attn.append(inputs[0].detach())
        self.module_out.append(output.detach())

    def heads(self, name: str, heads: int, call: int = -1) -> np.ndarray:
        """A projection output as [b, s, heads, dim] float64."""
        t = self.outputs[name][call]
        return t.reshape(t.shape[0], t.shape[1], heads, -1).numpy()


def as_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """Exact: x holds values representable in dtype (the hooks rounded them)."""
    return np.asarray(x, np.float64).astype(DTYPES[dtype][0])


def init_projections(module: torch.nn.Module, q_gain: float = 2.0) -> None:
    """Unit-scale weights (the models' 0.02 init makes attention nearly
    uniform, which tests little): std gain/sqrt(fan_in), q twice as large."""
    gen = torch.Generator().manual_seed(1234)
    for name, p in module.named_parameters():
        if p.dim() == 2:
            gain = q_gain if name.split(".")[-2] in ("q_proj", "q") else 1.0
            with torch.no_grad():
                p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * gain / p.shape[1] ** 0.5)


def hidden(batch: int, seq: int, width: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((batch, seq, width)))


def check(oracle: str, dtype: str, capture: HfCapture, out: np.ndarray, call: int = -1,
          max_position: int = 0) -> None:
    """posenc's out [b, q, heads, v_dim] against the captured o_proj input,
    and o_proj(out) (applied here, outside the hooks) against the module
    output.

    RoPE models: Hugging Face forms its angles in float32 even in a float64
    model (inv_freq and position x inv_freq), an error of ~1 ulp of the angle
    that rope_oracles.hf_fp32_angle_slack bounds per rotated element; it
    reaches the output through the scores. The tolerance adds 4x that slack
    (seen: < 1x) to the dtype's; it matters for f32 at large positions only.
    """
    tol = TOLERANCE[dtype] + 4 * hf_fp32_angle_slack(max_position)
    MAX_POSITION[oracle] = max(MAX_POSITION.get(oracle, 0), max_position)
    expected = capture.attn[call].numpy()
    actual = np.asarray(out, np.float64).reshape(expected.shape)
    record(OBSERVED, oracle, dtype, actual, expected, tol)
    weight = capture.out_proj.weight.detach()
    bias = None if capture.out_proj.bias is None else capture.out_proj.bias.detach()
    projected = torch.nn.functional.linear(torch.from_numpy(actual), weight, bias).numpy()
    record(OBSERVED, oracle + " (after o_proj)", dtype, projected, capture.module_out[call].numpy(), tol)


def to_posenc(capture: HfCapture, name: str, heads: int, dtype: str, call: int = -1) -> np.ndarray:
    return as_dtype(capture.heads(name, heads, call), dtype)


# ---- Llama 3 (GQA, llama3 RoPE scaling) -------------------------------------------

LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 64}


def llama3_model():
    """Llama-3-shaped: 8 query heads over 2 KV heads, theta 500000, llama3
    scaling with a short original context so that every band is exercised."""
    config = LlamaConfig(hidden_size=128, intermediate_size=64, num_hidden_layers=1, num_attention_heads=8,
                         num_key_value_heads=2, head_dim=32, vocab_size=16, rope_theta=500000.0,
                         max_position_embeddings=512, rope_scaling=dict(LLAMA3_SCALING),
                         attn_implementation="eager")
    config._attn_implementation = "eager"
    model = LlamaModel(config).double().eval()
    init_projections(model.layers[0].self_attn)
    return config, model


def llama_capture(model, dtype):
    attn = model.layers[0].self_attn
    return HfCapture({"q": attn.q_proj, "k": attn.k_proj, "v": attn.v_proj}, attn.o_proj, dtype)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("offset", [0, 300])
def test_llama3_gqa_rope(dtype, offset):
    config, model = llama3_model()
    capture = llama_capture(model, dtype)
    batch, seq = 2, 37
    positions = torch.arange(offset, offset + seq)[None].expand(batch, seq)
    with torch.no_grad():
        model(inputs_embeds=hidden(batch, seq, 128), position_ids=positions, use_cache=False)
    spec = posenc.RopeSpec.from_hf_config(config)
    assert spec.scaling_type == "llama3"
    out = posenc.attention(to_posenc(capture, "q", 8, dtype), to_posenc(capture, "k", 2, dtype),
                           to_posenc(capture, "v", 2, dtype), encoding=posenc.RopeEncoding(spec),
                           q_offset=offset, k_offset=offset, layout="bshd")
    check("Llama 3 GQA + llama3 RoPE", dtype, capture, out, max_position=offset + seq - 1)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_llama3_decode_through_dynamic_cache(dtype):
    """A prefill of 29 tokens, then a chunk of 3 through Hugging Face's
    DynamicCache; posenc gets all keys unrotated and places the queries at
    the end by default (q_offset = kv_len - q_len)."""
    config, model = llama3_model()
    capture = llama_capture(model, dtype)
    h = hidden(2, 32, 128, seed=1)
    cache = DynamicCache()
    with torch.no_grad():
        model(inputs_embeds=h[:, :29], use_cache=True, past_key_values=cache)
        model(inputs_embeds=h[:, 29:], use_cache=True, past_key_values=cache)
    k = np.concatenate([capture.heads("k", 2, 0), capture.heads("k", 2, 1)], axis=1)
    v = np.concatenate([capture.heads("v", 2, 0), capture.heads("v", 2, 1)], axis=1)
    spec = posenc.RopeSpec.from_hf_config(config)
    out = posenc.attention(to_posenc(capture, "q", 8, dtype, call=1), as_dtype(k, dtype), as_dtype(v, dtype),
                           encoding=posenc.RopeEncoding(spec), layout="bshd")
    check("Llama 3 decode (DynamicCache)", dtype, capture, out, call=1, max_position=31)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_llama3_right_padding_is_kv_lengths(dtype):
    """Right padding (attention_mask zeros at the end of row 1) hides those
    keys in Hugging Face; posenc's kv_lengths does the same."""
    config, model = llama3_model()
    capture = llama_capture(model, dtype)
    batch, seq, valid = 2, 23, [23, 17]
    mask = torch.zeros(batch, seq, dtype=torch.long)
    for b, n in enumerate(valid):
        mask[b, :n] = 1
    with torch.no_grad():
        model(inputs_embeds=hidden(batch, seq, 128, seed=2), attention_mask=mask, use_cache=False)
    spec = posenc.RopeSpec.from_hf_config(config)
    out = posenc.attention(to_posenc(capture, "q", 8, dtype), to_posenc(capture, "k", 2, dtype),
                           to_posenc(capture, "v", 2, dtype), encoding=posenc.RopeEncoding(spec),
                           q_offset=0, kv_lengths=valid, layout="bshd")
    check("Llama 3 right padding (kv_lengths)", dtype, capture, out, max_position=seq - 1)


# ---- Mistral (sliding window) ------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_mistral_sliding_window(dtype):
    """Mistral's sliding_window = W lets a query see W keys including its own
    (Hugging Face's mask hides j <= p - W): posenc's window = W."""
    W = 7
    config = MistralConfig(hidden_size=64, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=16, vocab_size=16, sliding_window=W,
                           max_position_embeddings=256, attn_implementation="eager")
    config._attn_implementation = "eager"
    model = MistralModel(config).double().eval()
    init_projections(model.layers[0].self_attn)
    attn = model.layers[0].self_attn
    capture = HfCapture({"q": attn.q_proj, "k": attn.k_proj, "v": attn.v_proj}, attn.o_proj, dtype)
    with torch.no_grad():
        model(inputs_embeds=hidden(2, 30, 64, seed=3), use_cache=False)
    spec = posenc.RopeSpec.from_hf_config(config)
    q, k, v = (to_posenc(capture, n, h, dtype) for n, h in (("q", 4), ("k", 2), ("v", 2)))
    out = posenc.attention(q, k, v, encoding=spec, window=W, layout="bshd")
    check("Mistral sliding_window", dtype, capture, out, max_position=29)
    # The convention matters: one key more or less is far off.
    expected = capture.attn[-1].numpy().reshape(out.shape)
    for other in (W - 1, W + 1):
        wrong = posenc.attention(q, k, v, encoding=spec, window=other, layout="bshd")
        assert max_abs_error(wrong, expected) > 20 * max_abs_error(out, expected) + 1e-3


# ---- BLOOM (ALiBi) -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("form", ["key-position", "distance"])
def test_bloom_alibi(dtype, form):
    """BLOOM adds slope * key_position (build_alibi_tensor) to causal rows;
    6 heads take the interleaved second slope series. Both posenc forms give
    BLOOM's attention on causal rows."""
    heads = 6
    config = BloomConfig(hidden_size=96, n_head=heads, n_layer=1, vocab_size=16, attn_implementation="eager")
    config._attn_implementation = "eager"
    model = BloomModel(config).double().eval()
    block = model.h[0].self_attention
    init_projections(block)
    capture = HfCapture({"qkv": block.query_key_value}, block.dense, dtype)
    with torch.no_grad():
        model(inputs_embeds=hidden(2, 33, 96, seed=4), use_cache=False)
    # BLOOM's slopes, read back from its own tensor: alibi[h, 0, j] = slope_h * j.
    slopes = build_alibi_tensor(torch.ones(1, 2), heads, torch.float64)[:, 0, 1].numpy()
    fused = capture.outputs["qkv"][-1].numpy()
    fused = fused.reshape(fused.shape[0], fused.shape[1], heads, 3, -1)   # BLOOM's layout
    q, k, v = (as_dtype(fused[..., i, :], dtype) for i in range(3))
    out = posenc.attention(q, k, v, encoding=posenc.AlibiEncoding(slopes, form=form), layout="bshd")
    check(f"BLOOM ALiBi ({form})", dtype, capture, out)


# ---- T5 (relative bias) ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("decoder", [True, False], ids=["decoder", "encoder"])
def test_t5_relative_bias(dtype, decoder):
    """T5Attention's bucketed bias: decoder self-attention (causal buckets,
    future keys in bucket 0) and the encoder (bidirectional). 60 tokens with
    max_distance 20 reach the logarithmic and the last buckets. T5 does not
    scale its logits."""
    heads, max_distance = 4, 20
    config = T5Config(d_model=64, d_kv=16, d_ff=64, num_heads=heads, num_layers=1, vocab_size=16,
                      relative_attention_num_buckets=32, relative_attention_max_distance=max_distance,
                      is_decoder=decoder, use_cache=False, dropout_rate=0.0, feed_forward_proj="relu",
                      attn_implementation="eager")
    stack = T5Stack(config).double().eval()
    attn = stack.block[0].layer[0].SelfAttention
    init_projections(attn, q_gain=0.5)
    with torch.no_grad():
        attn.relative_attention_bias.weight.copy_(
            torch.from_numpy(np.random.default_rng(5).standard_normal((32, heads))))
    capture = HfCapture({"q": attn.q, "k": attn.k, "v": attn.v}, attn.o, dtype)
    with torch.no_grad():
        stack(inputs_embeds=hidden(2, 60, 64, seed=6), use_cache=False)
    q, k, v = (to_posenc(capture, n, heads, dtype) for n in ("q", "k", "v"))
    encoding = posenc.T5BiasEncoding(attn.relative_attention_bias.weight.detach().numpy(),
                                      max_distance=max_distance, bidirectional=not decoder)
    out = posenc.attention(q, k, v, encoding=encoding, causal=decoder, softmax_scale=1.0, layout="bshd")
    check(f"T5 relative bias ({'decoder' if decoder else 'encoder'})", dtype, capture, out)


# ---- Gemma 2 (logit soft-capping, local/global layers) -----------------------------------


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_gemma2_softcap(dtype):
    """Gemma 2: attn_logit_softcapping (cap * tanh(s / cap)), scale
    query_pre_attn_scalar^-1/2 (not head_dim), layer 0 sliding (window 8),
    layer 1 global. A small cap (3) makes the tanh bend."""
    W, cap, scalar = 8, 3.0, 24
    config = Gemma2Config(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=32, vocab_size=16, sliding_window=W,
                          attn_logit_softcapping=cap, query_pre_attn_scalar=scalar, max_position_embeddings=256,
                          attn_implementation="eager")
    config._attn_implementation = "eager"
    model = Gemma2Model(config).double().eval()
    captures = []
    for layer in model.layers:
        attn = layer.self_attn
        init_projections(attn)
        captures.append(HfCapture({"q": attn.q_proj, "k": attn.k_proj, "v": attn.v_proj}, attn.o_proj, dtype))
    with torch.no_grad():
        model(inputs_embeds=hidden(2, 27, 64, seed=7), use_cache=False)
    spec = posenc.RopeSpec.from_hf_config(config)
    for layer, (capture, window) in enumerate(zip(captures, (W, 0))):
        q, k, v = (to_posenc(capture, n, h, dtype) for n, h in (("q", 4), ("k", 2), ("v", 2)))
        out = posenc.attention(q, k, v, encoding=spec, window=window, softcap=cap, softmax_scale=scalar ** -0.5, layout="bshd")
        check(f"Gemma 2 softcap, {'sliding' if window else 'global'} layer", dtype, capture, out, max_position=26)
        # The window and the cap both matter here (the test would not notice them missing otherwise).
        expected = capture.attn[-1].numpy().reshape(out.shape)
        for wrong in (dict(window=0 if window else W, softcap=cap), dict(window=window, softcap=0.0)):
            other = posenc.attention(q, k, v, encoding=spec, softmax_scale=scalar ** -0.5, **wrong)
            assert max_abs_error(other, expected) > 20 * max_abs_error(out, expected) + 1e-3


CASES = ["Llama 3 GQA + llama3 RoPE", "Llama 3 decode (DynamicCache)", "Llama 3 right padding (kv_lengths)",
         "Mistral sliding_window", "BLOOM ALiBi (distance)", "BLOOM ALiBi (key-position)", "T5 relative bias (decoder)",
         "T5 relative bias (encoder)", "Gemma 2 softcap, sliding layer", "Gemma 2 softcap, global layer"]
# The errors the storage explains, for outputs of order 1: a few units of the dtype's rounding (2^-8 bf16,
# 2^-11 f16; seen: up to 2.2 and 2.4 units); in f32 the oracle's own float32 softmax (Hugging Face's eager
# code), ~2^-20 (seen: up to 1.5 units), plus its float32 RoPE angles where a case reaches large
# positions (hf_fp32_angle_slack; seen: half of it at position 336).
UNITS = {"bf16": 4 * 2.0**-8, "f16": 5 * 2.0**-11, "f32": 4 * 2.0**-20}


def test_observed_errors():
    # Every case again, here: under pytest-xdist the cases above run in other workers.
    OBSERVED.clear()
    for dtype in DTYPE_NAMES:
        for offset in (0, 300):
            test_llama3_gqa_rope(dtype, offset)
        test_llama3_decode_through_dynamic_cache(dtype)
        test_llama3_right_padding_is_kv_lengths(dtype)
        test_mistral_sliding_window(dtype)
        for form in ("key-position", "distance"):
            test_bloom_alibi(dtype, form)
        for decoder in (True, False):
            test_t5_relative_bias(dtype, decoder)
        test_gemma2_softcap(dtype)
    print_observed("Hugging Face oracles", OBSERVED)
    wanted = {(case + after, dtype) for case in CASES for after in ("", " (after o_proj)") for dtype in DTYPE_NAMES}
    assert set(OBSERVED) == wanted, f"cases not run or unknown: {sorted(wanted ^ set(OBSERVED))}"
    for (oracle, dtype), error in OBSERVED.items():
        case = oracle.removesuffix(" (after o_proj)")
        bound = UNITS[dtype] + hf_fp32_angle_slack(MAX_POSITION[case])
        assert error <= bound, f"{oracle} [{dtype}]: max abs error {error:.3g} > {bound:.3g}"
    # Each dtype reaches the computation: coarser storage, larger errors.
    for oracle in {oracle for oracle, _ in OBSERVED}:
        assert OBSERVED[(oracle, "f32")] < OBSERVED[(oracle, "f16")] < OBSERVED[(oracle, "bf16")], oracle

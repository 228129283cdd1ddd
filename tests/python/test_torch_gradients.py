"""posenc.torch: gradients of RoPE and attention.

Three kinds of check, each able to fail on its own:
  1. The materialized form the backward pass differentiates (float64, in
     PyTorch) gives the output of posenc's kernel (float32) for every
     encoding and option: if the backward differentiated another function,
     this fails.
  2. Each gradient equals a central finite difference of posenc's *kernel*
     (float32 forward, differences taken along random directions in every
     input, the loss summed in float64): the gradients are those of the
     function posenc computes.
  3. Outside oracles, by PyTorch autograd through Hugging Face's code
     (transformers 4.49, float64): Llama's rotary embedding and
     ``apply_rotary_pos_emb`` for every rope type, Llama's eager attention
     (GQA, YaRN's attention factor), and T5's attention with its relative
     bias (the gradient of ``relative_attention_bias.weight``).
Plus ``torch.autograd.gradcheck`` in float64 and the bad-input rules.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, T5Config
from transformers.models.llama import modeling_llama
from transformers.models.t5.modeling_t5 import T5Attention

import posenc
import posenc.torch as pt

SPEC = posenc.RopeSpec(head_dim=8)
YARN = posenc.RopeSpec.from_hf_config({"hidden_size": 32, "num_attention_heads": 4, "rope_theta": 10000.0,
                                       "max_position_embeddings": 64,
                                       "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                        "original_max_position_embeddings": 16}})
INTERLEAVED_PARTIAL = posenc.RopeSpec(head_dim=8, rotary_dim=6, layout="interleaved")
HEADS, KV_HEADS, DIM = 4, 2, 8


def _trainable_t5(g):
    return pt.T5BiasEncoding(torch.randn(16, HEADS, generator=g, dtype=torch.float64), max_distance=12)


def _trainable_shaw(g, **kw):
    return pt.ShawEncoding(torch.randn(7, DIM, generator=g, dtype=torch.float64),
                           torch.randn(7, DIM, generator=g, dtype=torch.float64), max_distance=3, **kw)


def _urpe(g, bidirectional):
    # C away from 1 (1 is T5's bias), so that a C applied wrongly or renormalized shows.
    return posenc.UrpeEncoding(torch.randn(16, HEADS, generator=g, dtype=torch.float64).numpy(),
                               (0.5 + torch.rand(16, HEADS, generator=g, dtype=torch.float64)).numpy(),
                               max_distance=12, bidirectional=bidirectional)


# name -> (encoding factory(generator), attention keyword arguments)
CASES = {
    "nope": (lambda g: None, {}),
    "nope-bidirectional": (lambda g: None, {"causal": False}),
    "rope": (lambda g: posenc.RopeEncoding(SPEC), {}),
    "rope-interleaved-partial": (lambda g: posenc.RopeEncoding(INTERLEAVED_PARTIAL), {}),
    "rope-yarn": (lambda g: posenc.RopeEncoding(YARN), {}),
    "rope-lambda-mask": (lambda g: SPEC, {"window": 3, "sinks": 2}),
    "rope-logn-softcap": (lambda g: SPEC, {"logn_train_length": 4, "softcap": 2.0}),
    "rope-decode-offsets": (lambda g: SPEC, {"q_offset": [6, 3], "k_offset": [0, 0], "q_len": 2}),
    "rerope": (lambda g: posenc.ReRopeEncoding(SPEC, window=3), {}),
    "leaky-rerope": (lambda g: posenc.ReRopeEncoding(SPEC, window=3, leak=4.0), {}),
    "self-extend": (lambda g: posenc.SelfExtendEncoding(SPEC, group=2, window=3), {}),
    "self-extend-kv-shift": (lambda g: posenc.SelfExtendEncoding(SPEC, group=2, window=4, form="kv-shift"), {}),
    "alibi": (lambda g: posenc.AlibiEncoding([0.5, 0.25, 0.125, 0.0625]), {}),
    "alibi-bidirectional": (lambda g: posenc.AlibiEncoding([0.5, 0.25, 0.125, 0.0625]), {"causal": False}),
    "alibi-key-position-kv-lengths": (lambda g: posenc.AlibiEncoding([0.5, 0.25, 0.1, 0.05], form="key-position"),
                                      {"kv_lengths": [7, 5], "q_offset": 0}),
    "t5": (_trainable_t5, {"causal": False, "softmax_scale": 1.0}),
    "shaw": (_trainable_shaw, {"causal": False}),
    "shaw-key-query": (lambda g: _trainable_shaw(g, query_minus_key=True, query_term=True), {}),
    "urpe": (lambda g: _urpe(g, bidirectional=False), {}),
    "urpe-bidirectional": (lambda g: _urpe(g, bidirectional=True), {"causal": False}),
    "sinks-learned": (lambda g: SPEC, {"sink_logits": True}),
}


def _inputs(name: str, dtype=torch.float64, layout: str = "bshd", seed: int = 0):
    """q, k, v, the encoding and the keyword arguments of a case (layout
    included): batch 2, 7 keys, head dim 8 (RoPE's dims are even), GQA 4:2."""
    g = torch.Generator().manual_seed(seed)
    factory, kw = CASES[name]
    kw = dict(kw)
    q_len = kw.pop("q_len", 7)

    def tensor(seq, heads):
        shape = (2, seq, heads, DIM) if layout == "bshd" else (2, heads, seq, DIM)
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    q, k, v = tensor(q_len, HEADS), tensor(7, KV_HEADS), tensor(7, KV_HEADS)
    if kw.pop("sink_logits", False):
        kw["sink_logits"] = torch.randn(HEADS, generator=g, dtype=torch.float64)
    kw["layout"] = layout
    return q, k, v, factory(g), kw


def _encoding_tensors(encoding):
    return list(encoding.tensors()) if isinstance(encoding, (pt.T5BiasEncoding, pt.ShawEncoding)) else []


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("name", list(CASES))
def test_the_materialized_form_is_the_kernels_function(name, layout):
    q, k, v, encoding, kw = _inputs(name, layout=layout)
    kernel = pt.attention(q.float(), k.float(), v.float(), encoding=encoding, **kw)
    materialized = pt.attention(q, k, v, encoding=encoding, **kw)
    assert kernel.dtype == torch.float32 and materialized.dtype == torch.float64
    assert torch.allclose(kernel.double(), materialized, atol=2e-6, rtol=2e-6), \
        float((kernel.double() - materialized).abs().max())


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_are_the_kernels_finite_differences(name):
    """d/dt loss(x + t u) at t = 0, by central differences of the float32
    kernel, equals <grad, u> for a random direction u in every input."""
    q, k, v, encoding, kw = _inputs(name, dtype=torch.float32)
    tables = _encoding_tensors(encoding)
    sink = kw.get("sink_logits")
    leaves = [q, k, v] + tables + ([sink] if sink is not None else [])
    for t in leaves:
        t.requires_grad_(True)
    g = torch.Generator().manual_seed(1)
    weight = torch.randn(pt.attention(q, k, v, encoding=encoding, **kw).shape, generator=g, dtype=torch.float64)

    def loss() -> torch.Tensor:
        return (pt.attention(q, k, v, encoding=encoding, **kw).double() * weight).sum()

    loss().backward()
    for index, leaf in enumerate(leaves):
        direction = torch.randn(leaf.shape, generator=g, dtype=torch.float64)
        analytic = float((leaf.grad.double() * direction).sum())
        eps = 1e-2
        with torch.no_grad():
            base = leaf.detach().clone()
            leaf.copy_(base + eps * direction)
            plus = float(loss())
            leaf.copy_(base - eps * direction)
            minus = float(loss())
            leaf.copy_(base)
        numeric = (plus - minus) / (2 * eps)
        assert abs(analytic - numeric) <= 2e-3 * max(1.0, abs(numeric)), (index, analytic, numeric)


@pytest.mark.parametrize("name", ["rope-interleaved-partial", "rerope", "leaky-rerope", "self-extend",
                                  "alibi-key-position-kv-lengths", "t5", "shaw-key-query", "sinks-learned",
                                  "rope-logn-softcap"])
def test_gradcheck_float64(name):
    q, k, v, encoding, kw = _inputs(name)
    q, k, v = q[:1, :5, :2, :], k[:1, :, :1, :], v[:1, :, :1, :]
    if "q_offset" in kw:
        kw.update(q_offset=[4], k_offset=[0])
    if "kv_lengths" in kw:
        kw.update(kv_lengths=[5], q_offset=0)
    if "sink_logits" in kw:
        kw["sink_logits"] = kw["sink_logits"][:2].clone().requires_grad_(True)
    if isinstance(encoding, pt.T5BiasEncoding):
        encoding.weights = encoding.weights[:, :2].clone()
    if isinstance(encoding, posenc.AlibiEncoding):
        encoding = posenc.AlibiEncoding([0.5, 0.25], form=encoding.form)
    tables = [t.requires_grad_(True) for t in _encoding_tensors(encoding)]
    sink = kw.pop("sink_logits", None)
    inputs = [t.detach().clone().requires_grad_(True) for t in (q, k, v)] + tables + ([sink] if sink is not None
                                                                                       else [])

    def f(q, k, v, *rest):
        if isinstance(encoding, pt.T5BiasEncoding):
            enc = pt.T5BiasEncoding(rest[0], encoding.max_distance, encoding.bidirectional)
        elif isinstance(encoding, pt.ShawEncoding):
            enc = pt.ShawEncoding(rest[0], rest[1], encoding.max_distance, encoding.query_minus_key,
                                   encoding.key_term, encoding.query_term)
        else:
            enc = encoding
        return pt.attention(q, k, v, encoding=enc, sink_logits=rest[-1] if sink is not None else None, **kw)

    assert torch.autograd.gradcheck(f, tuple(inputs))


# ---- apply_rope ---------------------------------------------------------------


@pytest.mark.parametrize("spec", [SPEC, INTERLEAVED_PARTIAL, YARN], ids=["half-split", "interleaved-partial", "yarn"])
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_rope_gradcheck_float64_and_the_kernel_backward(spec, layout):
    g = torch.Generator().manual_seed(2)
    shape = (lambda heads: (2, 5, heads, spec.head_dim)) if layout == "bshd" else (lambda heads: (2, heads, 5, spec.head_dim))
    q = torch.randn(shape(3), generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(shape(1), generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: pt.apply_rope(spec, a, b, offsets=[3, 40], layout=layout), (q, k))
    # The float32 kernel's backward (direction="backward") against autograd of the float64 form.
    dq, dk = torch.randn(q.shape, generator=g, dtype=torch.float64), torch.randn(k.shape, generator=g,
                                                                                 dtype=torch.float64)
    rq, rk = pt.apply_rope(spec, q, k, offsets=[3, 40], layout=layout)
    expected = torch.autograd.grad((rq * dq).sum() + (rk * dk).sum(), (q, k))
    q32, k32 = q.detach().float().requires_grad_(True), k.detach().float().requires_grad_(True)
    rq, rk = pt.apply_rope(spec, q32, k32, offsets=[3, 40], layout=layout)
    ((rq * dq.float()).sum() + (rk * dk.float()).sum()).backward()
    assert torch.allclose(q32.grad.double(), expected[0], atol=1e-5)
    assert torch.allclose(k32.grad.double(), expected[1], atol=1e-5)


# rope type -> LlamaConfig arguments. transformers 4.49 takes YaRN's original
# length from max_position_embeddings and LongRoPE's from the top-level
# original_max_position_embeddings (Phi-3's), so these configs say it there.
ROPE_CONFIGS = {
    "default": {},
    "linear": {"rope_scaling": {"rope_type": "linear", "factor": 4.0}},
    "dynamic": {"max_position_embeddings": 16, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "yarn": {"max_position_embeddings": 16, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
    "llama3": {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}},
    "longrope": {"original_max_position_embeddings": 16,
                 "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0],
                                  "long_factor": [2.0, 3.0, 5.0, 9.0]}},
}


def _llama_config(rope_type: str) -> LlamaConfig:
    kw = {"max_position_embeddings": 64, **ROPE_CONFIGS[rope_type]}
    return LlamaConfig(hidden_size=HEADS * DIM, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                       head_dim=DIM, rope_theta=10000.0, **kw)


@pytest.mark.parametrize("rope_type", list(ROPE_CONFIGS))
def test_rope_gradients_match_hugging_face_autograd(rope_type):
    """Gradients of q and k through Llama's rotary embedding and
    apply_rotary_pos_emb (float64 autograd) for every rope type, over 40
    positions, past the original length of 16. LongRoPE: 12 positions, as
    Llama's rotary class in transformers 4.49 keeps the short factors at any
    length (posenc switches to the long ones past the original length, as
    Phi-3's own class does)."""
    config = _llama_config(rope_type)
    spec = posenc.RopeSpec.from_hf_config(config.to_dict())
    g = torch.Generator().manual_seed(3)
    seq = 12 if rope_type == "longrope" else 40
    q = torch.randn(1, HEADS, seq, DIM, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, KV_HEADS, seq, DIM, generator=g, dtype=torch.float64, requires_grad=True)
    dq, dk = torch.randn(q.shape, generator=g, dtype=torch.float64), torch.randn(k.shape, generator=g,
                                                                                 dtype=torch.float64)
    cos, sin = modeling_llama.LlamaRotaryEmbedding(config)(q, torch.arange(seq)[None])
    hq, hk = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
    expected = torch.autograd.grad((hq * dq).sum() + (hk * dk).sum(), (q, k))
    q32, k32 = q.detach().float().requires_grad_(True), k.detach().float().requires_grad_(True)
    rq, rk = pt.apply_rope(spec, q32, k32, layout="bhsd")
    ((rq * dq.float()).sum() + (rk * dk.float()).sum()).backward()
    for ours, theirs in zip((q32.grad, k32.grad), expected):
        assert torch.allclose(ours.double(), theirs, atol=2e-5, rtol=2e-5), float((ours.double() - theirs).abs().max())


@pytest.mark.parametrize("rope_type", ["default", "yarn", "llama3"])
def test_attention_gradients_match_hugging_face_llama(rope_type):
    """dq, dk, dv of posenc.torch.attention (RoPE inside, GQA 4:2, causal)
    against Llama's apply_rotary_pos_emb + eager_attention_forward with a
    causal mask, float64 autograd."""
    config = _llama_config(rope_type)
    spec = posenc.RopeSpec.from_hf_config(config.to_dict())
    g = torch.Generator().manual_seed(4)
    seq = 23
    q, k, v = (torch.randn(2, h, seq, DIM, generator=g, dtype=torch.float64, requires_grad=True)
               for h in (HEADS, KV_HEADS, KV_HEADS))
    weight = torch.randn(2, seq, HEADS, DIM, generator=g, dtype=torch.float64)

    class Module(torch.nn.Module):
        num_key_value_groups = HEADS // KV_HEADS

    module = Module().eval()
    cos, sin = modeling_llama.LlamaRotaryEmbedding(config)(q, torch.arange(seq)[None])
    hq, hk = modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)
    mask = torch.full((seq, seq), -torch.inf, dtype=torch.float64).triu(1)[None, None]
    out, _ = modeling_llama.eager_attention_forward(module, hq, hk, v, mask, scaling=DIM ** -0.5)
    expected = torch.autograd.grad((out * weight).sum(), (q, k, v))  # out: [batch, seq, heads, dim]
    ours = [t.detach().float().requires_grad_(True) for t in (q, k, v)]
    result = pt.attention(*ours, encoding=posenc.RopeEncoding(spec), layout="bhsd")
    (result.transpose(1, 2).double() * weight).sum().backward()
    for name, mine, theirs in zip("qkv", ours, expected):
        assert torch.allclose(mine.grad.double(), theirs, atol=1e-5, rtol=1e-4), \
            (name, float((mine.grad.double() - theirs).abs().max()))


@pytest.mark.parametrize("is_decoder", [False, True], ids=["encoder", "decoder"])
def test_t5_bias_gradient_matches_hugging_face(is_decoder):
    """T5Attention with identity projections (q = k = v = the hidden states),
    float64: the gradients of the hidden states and of
    relative_attention_bias.weight equal posenc.torch's."""
    config = T5Config(d_model=HEADS * DIM, d_kv=DIM, num_heads=HEADS, relative_attention_num_buckets=16,
                      relative_attention_max_distance=12, is_decoder=is_decoder, dropout_rate=0.0)
    module = T5Attention(config, has_relative_attention_bias=True, layer_idx=0).double().eval()
    with torch.no_grad():
        for linear in (module.q, module.k, module.v, module.o):
            linear.weight.copy_(torch.eye(HEADS * DIM, dtype=torch.float64))
    g = torch.Generator().manual_seed(5)
    seq = 21
    hidden = torch.randn(2, seq, HEADS * DIM, generator=g, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(2, seq, HEADS * DIM, generator=g, dtype=torch.float64)
    mask = None
    if is_decoder:
        mask = torch.full((seq, seq), -torch.inf, dtype=torch.float64).triu(1)[None, None]
    out = module(hidden, mask=mask, cache_position=torch.arange(seq))[0]
    expected = torch.autograd.grad((out * weight).sum(), (hidden, module.relative_attention_bias.weight))

    x = hidden.detach().float().requires_grad_(True)
    table = module.relative_attention_bias.weight.detach().float().requires_grad_(True)
    heads = x.view(2, seq, HEADS, DIM)
    encoding = pt.T5BiasEncoding(table, max_distance=12, bidirectional=not is_decoder)
    result = pt.attention(heads, heads, heads, encoding=encoding, causal=is_decoder, softmax_scale=1.0, layout="bshd")
    (result.reshape(2, seq, -1).double() * weight).sum().backward()
    assert torch.allclose(x.grad.double(), expected[0], atol=1e-4, rtol=1e-4)
    assert torch.allclose(table.grad.double(), expected[1], atol=1e-4, rtol=1e-4), \
        float((table.grad.double() - expected[1]).abs().max())


# ---- dtypes, documentation and bad input -----------------------------------------------


def test_docstring_example():
    result = doctest.testmod(pt, extraglobs={"posenc": posenc, "torch": torch},
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0



@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_gradients_come_back_in_the_input_dtype(dtype):
    q, k, v, encoding, kw = _inputs("rerope")
    ours = [t.to(dtype).requires_grad_(True) for t in (q, k, v)]
    pt.attention(*ours, encoding=encoding, layout="bshd").float().square().sum().backward()
    reference = [t.to(dtype).double().requires_grad_(True) for t in (q, k, v)]
    pt.attention(*reference, encoding=encoding, layout="bshd").square().sum().backward()
    for mine, exact in zip(ours, reference):
        assert mine.grad.dtype == dtype
        tol = 2e-2 if dtype == torch.bfloat16 else 2e-3
        assert torch.allclose(mine.grad.double(), exact.grad, atol=tol * 20, rtol=tol * 4)


def test_bad_input_names_the_parameter():
    q = torch.randn(1, 4, 2, 8)
    with pytest.raises(ValueError, match=r"\[attention\] k.dtype = torch.float16: must equal q.dtype"):
        pt.attention(q, q.half(), q, layout="bshd")
    with pytest.raises(ValueError, match=r"\[attention\] v = a ndarray: must be a torch.Tensor"):
        pt.attention(q, q, q.numpy(), layout="bshd")
    with pytest.raises(ValueError, match=r"\[attention\] layout = 'hsbd'"):
        pt.attention(q, q, q, layout="hsbd")
    with pytest.raises(ValueError, match=r"\[attention\] mask.window = -1"):
        pt.attention(q.double(), q.double(), q.double(), window=-1, layout="bshd")  # posenc's own check, float64 too
    with pytest.raises(ValueError, match=r"\[attention\] k = a tensor on cpu: must be on q's device, meta"):
        pt.attention(torch.empty(1, 4, 2, 8, device="meta"), q, q, layout="bshd")
    with pytest.raises(ValueError, match=r"\[attention\] q = a tensor on meta: backend \"kernel\" computes on the "
                                         r"CPU"):
        pt.attention(*[torch.empty(1, 4, 2, 8, device="meta")] * 3, layout="bshd", backend="kernel")
    with pytest.raises(ValueError, match=r"\[attention\] q.dtype = torch.float64: backend \"kernel\" takes"):
        pt.attention(q.double(), q.double(), q.double(), layout="bshd", backend="kernel")
    with pytest.raises(ValueError, match=r"\[rope\] backend = 'cuda': must be None"):
        pt.apply_rope(SPEC, q, layout="bshd", backend="cuda")
    with pytest.raises(ValueError, match=r"\[rope\] tensors\[1\].dtype = torch.float64"):
        pt.apply_rope(SPEC, q, q.double(), layout="bshd")
    with pytest.raises(ValueError, match=r"\[rope\] offset, offsets, position_ids: more than one"):
        pt.apply_rope(SPEC, q, offset=2, position_ids=[0, 1, 2, 3], layout="bshd")

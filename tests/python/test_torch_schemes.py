"""posenc.torch.PositionScheme: the tiny trainer's schemes with gradients.

  1. Each scheme's gradients (its tensors through the trainer's backward,
     q, k, v through PyTorch) equal central finite differences of its
     attention and of its input rows, along random directions: the
     trainer's backward agrees with its forward.
  2. A whole tiny model written in PyTorch around PositionScheme (RMSNorm,
     the fused qkv, tanh-GELU MLP, tied output; float64) gives the loss of
     posenc's trainer (TinyLmLoss, float32) and its gradients for every
     tensor, the scheme's included, for all 14 schemes: PyTorch users train
     exactly what ``posenc train`` trains. A consistency check: the
     positional terms there are posenc's own (PositionScheme calls the
     trainer's forward and backward), so it checks the glue around them.
  3. The oracle for the positional terms: the same model with each
     scheme's terms written from its paper or taken from Hugging Face
     (RoPE: LlamaRotaryEmbedding and apply_rotary_pos_emb; ALiBi: BLOOM's
     build_alibi_tensor; T5: T5Attention._relative_position_bucket; the
     sinusoid, the learned table, Shaw's relative keys and values and
     KERPLE-log from their papers' formulas), none of posenc's code, gives
     the trainer's loss and gradients. XLNet and DeBERTa are held to
     Hugging Face's modules by test_attention_hf.py and tiny_lm_oracle_test;
     FIRE, complex order, URPE and FLOATER have no outside oracle here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt

HEADS, HEAD_DIM, LAYERS, TRAIN_LENGTH = 2, 8, 2, 16
# Small fields where the defaults would dwarf these shapes.
FIELDS = {"t5": {"t5_buckets": 8, "t5_max_distance": 16}, "shaw": {"shaw_clip": 4},
          "fire": {"fire_mlp_width": 8}, "deberta": {"deberta_buckets": 8, "deberta_max_relative_positions": 16},
          "urpe": {"urpe_buckets": 8, "urpe_max_distance": 16}}


SCHEMES = ("nope", "sinusoidal", "learned", "shaw", "t5", "alibi", "rope", "kerple", "fire", "xlnet", "deberta",
           "complex-order", "urpe", "floater")


def module(scheme: str, seed: int = 0) -> pt.PositionScheme:
    return pt.PositionScheme(scheme, heads=HEADS, head_dim=HEAD_DIM, layers=LAYERS, train_length=TRAIN_LENGTH,
                             seed=seed, **FIELDS.get(scheme, {}))


def assert_directional_derivatives(loss, leaves, g, label):
    """<grad, u> = (loss(x + eps u) - loss(x - eps u)) / 2 eps for a random u per leaf."""
    for leaf in leaves:
        direction = torch.randn(leaf.shape, generator=g, dtype=torch.float64)
        analytic = float((leaf.grad.double() * direction).sum())
        eps = 1e-3
        with torch.no_grad():
            base = leaf.detach().clone()
            leaf.copy_(base + eps * direction.to(leaf.dtype))
            plus = float(loss())
            leaf.copy_(base - eps * direction.to(leaf.dtype))
            minus = float(loss())
            leaf.copy_(base)
        numeric = (plus - minus) / (2 * eps)
        assert abs(analytic - numeric) <= 2e-3 * max(1.0, abs(numeric)), (label, analytic, numeric)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_attention_gradients_are_finite_differences(scheme):
    m = module(scheme, seed=1)
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 11, HEADS, HEAD_DIM, generator=g, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    weight = torch.randn(2, 11, HEADS, HEAD_DIM, generator=g, dtype=torch.float64)

    def loss() -> float:
        return (m(q, k, v, layer=1, layout="bshd") * weight).sum()

    loss().backward()
    leaves = [q, k, v] + [t for t in m.tensors if t.grad is not None and t.grad.abs().sum() > 0]
    assert_directional_derivatives(loss, leaves, g, scheme)


@pytest.mark.parametrize("scheme", ["sinusoidal", "learned", "complex-order", "floater"])
def test_input_gradients_are_finite_differences(scheme):
    m = module(scheme, seed=5)
    g = torch.Generator().manual_seed(6)
    tokens = torch.randint(0, 256, (2, 9), generator=g)
    embd = torch.randn(256, HEADS * HEAD_DIM, generator=g, dtype=torch.float64, requires_grad=True)
    weights = [torch.randn(2, 9, HEADS * HEAD_DIM, generator=g, dtype=torch.float64) for _ in range(3)]

    def loss():
        total = (m.embed(tokens, embd) * weights[0]).sum()
        for rows, w in zip(m.layer_positions(9) or [], weights[1:]):
            total = total + (rows.double() * w[0]).sum()
        return total

    loss().backward()
    leaves = [t for t in [embd, *m.tensors] if t.grad is not None and t.grad.abs().sum() > 0]
    assert len(leaves) >= (1 if scheme == "sinusoidal" else 2), [t.shape for t in leaves]
    assert_directional_derivatives(loss, leaves, g, scheme)


def rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gain


def gelu_tanh(u: torch.Tensor) -> torch.Tensor:
    return 0.5 * u * (1 + torch.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))


def torch_tiny_loss(x: torch.Tensor, attention, layer_rows, params: dict, targets: torch.Tensor) -> torch.Tensor:
    """posenc's tiny model (tiny_lm_reference.cc) in PyTorch from its input rows x [batch, T, d]:
    attention(q, k, v, layer) on [batch, T, heads, head_dim]; layer_rows: None or each layer's [T, d]."""
    d = HEADS * HEAD_DIM
    batch, length, _ = x.shape
    for layer in range(LAYERS):
        p = lambda name: params[f"blk.{layer}.{name}.weight"]  # noqa: E731
        attn_in = rms_norm(x, p("attn_norm"))
        if layer_rows is not None:
            attn_in = attn_in + layer_rows[layer].double()
        qkv = attn_in @ p("attn_qkv").T
        q, k, v = (t.reshape(batch, length, HEADS, HEAD_DIM) for t in qkv.split(d, dim=-1))
        mid = x + attention(q, k, v, layer).reshape(batch, length, d) @ p("attn_output").T
        x = mid + gelu_tanh(rms_norm(mid, p("ffn_norm")) @ p("ffn_up").T) @ p("ffn_down").T
    logits = rms_norm(x, params["output_norm.weight"]) @ params["token_embd.weight"].T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))


def assert_matches_the_trainer(loss: torch.Tensor, expected_loss: float, expected: dict, grads: dict):
    assert float(loss) == pytest.approx(expected_loss, rel=1e-5)
    for name, want in expected.items():
        got = grads[name].double().numpy()
        scale = max(float(np.abs(want).max()), 1e-6)
        assert np.abs(got - want).max() <= 2e-4 * scale + 1e-7, (name, float(np.abs(got - want).max()), scale)


def trainer_loss(scheme: str, seed: int = 3):
    """The trainer's float32 loss and gradients on 2 rows of 12 predictions, its initial tensors and the bytes."""
    core = module(scheme, seed=seed)._core
    init = core.init(seed)
    tokens = np.random.default_rng(4).integers(0, 256, (2, 13)).astype(np.uint8)
    expected_loss, expected = core.loss(init, tokens, 2, 12)
    return init, torch.from_numpy(tokens.astype(np.int64)), expected_loss, expected


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_pytorch_model_around_position_scheme_is_consistent_with_the_trainer(scheme):
    scheme_module = module(scheme, seed=3)
    init, tokens, expected_loss, expected = trainer_loss(scheme)
    own = set(scheme_module.names)
    params = {name: torch.from_numpy(np.array(a)).double().requires_grad_(True)
              for name, a in init.items() if name not in own}
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    loss = torch_tiny_loss(scheme_module.embed(inputs, params["token_embd.weight"]),
                           lambda q, k, v, layer: scheme_module(q, k, v, layer=layer, layout="bshd"),
                           scheme_module.layer_positions(inputs.shape[1]), params, targets)
    loss.backward()
    grads = {name: t.grad for name, t in params.items()}
    grads |= {name: t.grad for name, t in scheme_module.named_tensors().items()}
    assert_matches_the_trainer(loss, expected_loss, expected, grads)


# The positional terms from the papers and Hugging Face, none of posenc's code.
def causal_attention(q, k, v, bias=None, key_rows=None, value_rows=None):
    """softmax(q k^T / sqrt(hd) + bias) v on [batch, T, heads, hd], causal; Shaw et al.'s
    e_ij = q_i (k_j + a^K_ij)^T / sqrt(hd) and z_i = sum_j alpha_ij (v_j + a^V_ij) with key_rows,
    value_rows [T, T, hd] (a_ij)."""
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))  # [batch, heads, T, hd]
    length = q.shape[1]
    logits = qh @ kh.transpose(-1, -2)
    if key_rows is not None:
        logits = logits + torch.einsum("bhid,ijd->bhij", qh, key_rows)
    logits = logits / math.sqrt(HEAD_DIM)
    if bias is not None:
        logits = logits + bias
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    probs = torch.softmax(logits.masked_fill(~causal, -math.inf), dim=-1)
    out = probs @ vh
    if value_rows is not None:
        out = out + torch.einsum("bhij,ijd->bhid", probs, value_rows)
    return out.transpose(1, 2)


def vaswani_sinusoid(length: int, d: int) -> torch.Tensor:
    """Attention Is All You Need, 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...)."""
    pe = torch.zeros(length, d, dtype=torch.float64)
    for pos in range(length):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            pe[pos, 2 * i], pe[pos, 2 * i + 1] = math.sin(angle), math.cos(angle)
    return pe


def paper_model(scheme: str, leaves: dict, length: int):
    """(input rows of tokens, attention(q, k, v, layer)) for `scheme` as its paper writes it."""
    d = HEADS * HEAD_DIM
    embd = leaves["token_embd.weight"]
    position = torch.arange(length)
    if scheme == "sinusoidal":  # the token embedding times sqrt(d_model), as the paper's 3.4
        embed = lambda tokens: embd[tokens] * math.sqrt(d) + vaswani_sinusoid(length, d)  # noqa: E731
    elif scheme == "learned":  # GPT-2's wpe: row t added at position t
        embed = lambda tokens: embd[tokens] + leaves["position_embd.weight"][:length]  # noqa: E731
    else:
        embed = lambda tokens: embd[tokens]  # noqa: E731
    if scheme in ("nope", "sinusoidal", "learned"):
        return embed, lambda q, k, v, layer: causal_attention(q, k, v)
    if scheme == "rope":
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
        rotary = LlamaRotaryEmbedding(config=LlamaConfig(hidden_size=d, num_attention_heads=HEADS, rope_theta=10000.0))
        cos, sin = rotary(torch.zeros(1, dtype=torch.float64), position[None])

        def rope(q, k, v, layer):
            qr, kr = apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
            return causal_attention(qr.transpose(1, 2), kr.transpose(1, 2), v)
        return embed, rope
    if scheme == "alibi":
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor
        # slope_h * j; softmax makes it -slope_h (i - j), Press et al.'s bias, row by row.
        bias = build_alibi_tensor(torch.ones(1, length), HEADS, torch.float64).reshape(1, HEADS, 1, length)
        return embed, lambda q, k, v, layer: causal_attention(q, k, v, bias=bias)
    if scheme == "t5":
        from transformers.models.t5.modeling_t5 import T5Attention
        relative = position[None, :] - position[:, None]  # memory - query, as T5Attention.compute_bias
        buckets = T5Attention._relative_position_bucket(relative, bidirectional=False, num_buckets=8, max_distance=16)
        table = leaves["attn_rel_b.weight"]  # [buckets, heads], HF's relative_attention_bias, shared by the layers
        return embed, lambda q, k, v, layer: causal_attention(q, k, v, bias=table[buckets].permute(2, 0, 1)[None])
    if scheme == "shaw":  # Shaw et al. 2018, 3.2: a_ij = w_clip(j - i, k), k = 4, rows w_-k .. w_k
        rows = (position[None, :] - position[:, None]).clamp(-4, 4) + 4
        return embed, lambda q, k, v, layer: causal_attention(
            q, k, v, key_rows=leaves[f"blk.{layer}.attn_rel_k.weight"][rows],
            value_rows=leaves[f"blk.{layer}.attn_rel_v.weight"][rows])
    if scheme == "kerple":  # Chi et al. 2022, KERPLE-log: -r1 log(1 + r2 |i - j|), r = softplus(raw) > 0
        distance = (position[:, None] - position[None, :]).abs().double()

        def kerple(q, k, v, layer):
            r1, r2 = (torch.nn.functional.softplus(leaves[f"blk.{layer}.attn_kerple_{r}.weight"]) for r in ("r1", "r2"))
            bias = -r1[:, None, None] * torch.log1p(r2[:, None, None] * distance)
            return causal_attention(q, k, v, bias=bias[None])
        return embed, kerple
    raise AssertionError(scheme)


@pytest.mark.parametrize("scheme", ["nope", "sinusoidal", "learned", "rope", "alibi", "t5", "shaw", "kerple"])
def test_a_model_written_from_the_papers_matches_the_trainer(scheme):
    init, tokens, expected_loss, expected = trainer_loss(scheme)
    assert module(scheme).rotation is None or module(scheme).rotation.theta == 10000.0
    leaves = {name: torch.from_numpy(np.array(a)).double().requires_grad_(True) for name, a in init.items()}
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    embed, attention = paper_model(scheme, leaves, inputs.shape[1])
    loss = torch_tiny_loss(embed(inputs), attention, None, leaves, targets)
    loss.backward()
    assert_matches_the_trainer(loss, expected_loss, expected, {name: t.grad for name, t in leaves.items()})


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match=r"\[scheme\] scheme = \"xpos\": must be one of nope, sinusoidal"):
        pt.PositionScheme("xpos", heads=2, head_dim=8, train_length=16)
    with pytest.raises(ValueError, match=r"\[scheme\] t5_buckets = 8: is not a field of kerple"):
        pt.PositionScheme("kerple", heads=2, head_dim=8, train_length=16, t5_buckets=8)
    m = module("kerple")
    q = torch.zeros(1, 5, 3, 8)
    with pytest.raises(ValueError, match=r"must be self-attention of 2 heads of 8"):
        m(q, q, q, layout="bshd")
    q = torch.zeros(1, 5, 2, 8)
    with pytest.raises(ValueError, match=r"\[scheme\] layer = 2: must be in \[0, layers = 2\)"):
        m(q, q, q, layer=2, layout="bshd")

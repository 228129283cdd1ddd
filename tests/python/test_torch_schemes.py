"""posenc.torch.SchemeAttention: the tiny trainer's schemes with gradients.

  1. Each scheme's gradients (its tensors through the trainer's
     LayerBackward, q, k, v through PyTorch) equal central finite
     differences of the forward, along random directions: the trainer's
     backward agrees with its forward.
  2. A whole tiny model written in PyTorch around SchemeAttention (RMSNorm,
     the fused qkv, tanh-GELU MLP, tied output; float64) gives the loss of
     posenc's trainer (TinyLmLoss, float32) and its gradients for every
     tensor, the scheme's included: PyTorch users train exactly what
     ``posenc train`` trains.
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


def module(scheme: str, seed: int = 0) -> pt.SchemeAttention:
    return pt.SchemeAttention(scheme, heads=HEADS, head_dim=HEAD_DIM, layers=LAYERS, train_length=TRAIN_LENGTH,
                              seed=seed, **FIELDS.get(scheme, {}))


@pytest.mark.parametrize("scheme", pt.ATTENTION_SCHEMES)
def test_gradients_are_finite_differences(scheme):
    m = module(scheme, seed=1)
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 11, HEADS, HEAD_DIM, generator=g, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    weight = torch.randn(2, 11, HEADS, HEAD_DIM, generator=g, dtype=torch.float64)

    def loss() -> float:
        return (m(q, k, v, layer=1, layout="bshd") * weight).sum()

    loss().backward()
    leaves = [q, k, v] + [t for name, t in m.named_tensors().items() if not name.startswith("blk.0.")]
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
        assert abs(analytic - numeric) <= 2e-3 * max(1.0, abs(numeric)), (scheme, analytic, numeric)


def rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * gain


def gelu_tanh(u: torch.Tensor) -> torch.Tensor:
    return 0.5 * u * (1 + torch.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))


def torch_tiny_loss(attention: pt.SchemeAttention, params: dict, tokens: torch.Tensor) -> torch.Tensor:
    """posenc's tiny model (tiny_lm_reference.cc) in PyTorch: tokens [batch, T + 1]."""
    d = HEADS * HEAD_DIM
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    batch, length = inputs.shape
    x = params["token_embd.weight"][inputs]
    for layer in range(LAYERS):
        p = lambda name: params[f"blk.{layer}.{name}.weight"]  # noqa: E731
        qkv = rms_norm(x, p("attn_norm")) @ p("attn_qkv").T
        q, k, v = (t.reshape(batch, length, HEADS, HEAD_DIM) for t in qkv.split(d, dim=-1))
        mid = x + attention(q, k, v, layer=layer, layout="bshd").reshape(batch, length, d) @ p("attn_output").T
        x = mid + gelu_tanh(rms_norm(mid, p("ffn_norm")) @ p("ffn_up").T) @ p("ffn_down").T
    logits = rms_norm(x, params["output_norm.weight"]) @ params["token_embd.weight"].T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))


@pytest.mark.parametrize("scheme", pt.ATTENTION_SCHEMES)
def test_a_pytorch_model_matches_the_trainer(scheme):
    attention = module(scheme, seed=3)
    core = attention._core
    init = core.init(3)
    tokens = np.random.default_rng(4).integers(0, 256, (2, 13)).astype(np.uint8)
    expected_loss, expected = core.loss(init, tokens, 2, 12)
    own = set(attention.names)
    params = {name: torch.from_numpy(np.array(a)).double().requires_grad_(True)
              for name, a in init.items() if name not in own}
    loss = torch_tiny_loss(attention, params, torch.from_numpy(tokens.astype(np.int64)))
    loss.backward()
    assert float(loss) == pytest.approx(expected_loss, rel=1e-5)
    grads = {name: t.grad for name, t in params.items()} | attention.named_tensors()
    for name, want in expected.items():
        got = grads[name] if name not in own else grads[name].grad
        got = got.double().numpy()
        scale = max(float(np.abs(want).max()), 1e-6)
        assert np.abs(got - want).max() <= 2e-4 * scale + 1e-7, (name, float(np.abs(got - want).max()), scale)


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match=r"\[scheme\] scheme = 'rope': must be one of nope, alibi"):
        pt.SchemeAttention("rope", heads=2, head_dim=8, train_length=16)
    with pytest.raises(ValueError, match=r"\[scheme\] t5_buckets = 8: is not a field of kerple"):
        pt.SchemeAttention("kerple", heads=2, head_dim=8, train_length=16, t5_buckets=8)
    m = module("kerple")
    q = torch.zeros(1, 5, 3, 8)
    with pytest.raises(ValueError, match=r"must be self-attention of 2 heads of 8"):
        m(q, q, q, layout="bshd")

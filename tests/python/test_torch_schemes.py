"""posenc.torch.PositionScheme: the tiny trainer's schemes with gradients.

  1. Each scheme's gradients (its tensors through the trainer's backward,
     q, k, v through PyTorch) equal central finite differences of its
     attention and of its input rows, along random directions: the
     trainer's backward agrees with its forward.
  2. A whole tiny model written in PyTorch around PositionScheme (RMSNorm,
     the fused qkv, tanh-GELU MLP, tied output; float64) gives the loss of
     posenc's trainer (TinyLmLoss, float32) and its gradients for every
     tensor, the scheme's included, for all 14 schemes: PyTorch users train
     exactly what ``posenc train`` trains.
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


def torch_tiny_loss(scheme: pt.PositionScheme, params: dict, tokens: torch.Tensor) -> torch.Tensor:
    """posenc's tiny model (tiny_lm_reference.cc) in PyTorch: tokens [batch, T + 1]."""
    d = HEADS * HEAD_DIM
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    batch, length = inputs.shape
    x = scheme.embed(inputs, params["token_embd.weight"])
    layer_rows = scheme.layer_positions(length)
    for layer in range(LAYERS):
        p = lambda name: params[f"blk.{layer}.{name}.weight"]  # noqa: E731
        attn_in = rms_norm(x, p("attn_norm"))
        if layer_rows is not None:
            attn_in = attn_in + layer_rows[layer].double()
        qkv = attn_in @ p("attn_qkv").T
        q, k, v = (t.reshape(batch, length, HEADS, HEAD_DIM) for t in qkv.split(d, dim=-1))
        mid = x + scheme(q, k, v, layer=layer, layout="bshd").reshape(batch, length, d) @ p("attn_output").T
        x = mid + gelu_tanh(rms_norm(mid, p("ffn_norm")) @ p("ffn_up").T) @ p("ffn_down").T
    logits = rms_norm(x, params["output_norm.weight"]) @ params["token_embd.weight"].T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_pytorch_model_matches_the_trainer(scheme):
    scheme_module = module(scheme, seed=3)
    core = scheme_module._core
    init = core.init(3)
    tokens = np.random.default_rng(4).integers(0, 256, (2, 13)).astype(np.uint8)
    expected_loss, expected = core.loss(init, tokens, 2, 12)
    own = set(scheme_module.names)
    params = {name: torch.from_numpy(np.array(a)).double().requires_grad_(True)
              for name, a in init.items() if name not in own}
    loss = torch_tiny_loss(scheme_module, params, torch.from_numpy(tokens.astype(np.int64)))
    loss.backward()
    assert float(loss) == pytest.approx(expected_loss, rel=1e-5)
    grads = {name: t.grad for name, t in params.items()} | scheme_module.named_tensors()
    for name, want in expected.items():
        got = grads[name] if name not in own else grads[name].grad
        got = got.double().numpy()
        scale = max(float(np.abs(want).max()), 1e-6)
        assert np.abs(got - want).max() <= 2e-4 * scale + 1e-7, (name, float(np.abs(got - want).max()), scale)


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

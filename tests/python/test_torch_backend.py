"""posenc.torch's torch backend: the same method as torch operations, for
tensors on any device (issue 51, item 3).

The torch backend (``backend="torch"``, the default for a tensor not on the
CPU) is held to the kernel backend on the CPU, where both run:
  1. every context-extension method posenc.hf plans (none, linear, ntk,
     dynamic-ntk, yarn, rerope, leaky-rerope, window, lambda, self-extend,
     the logn variants), as posenc.extension_attention gives it: output
     within 1e-5 of the kernel's (float32, relative to the largest output),
     and the gradients of q, k and v within 1e-5 of the kernel backend's;
  2. every encoding and option of test_torch_gradients.CASES (NoPE, RoPE
     with YaRN and partial interleaved rotary, the Λ mask, log-n,
     soft-capping, decode offsets, ALiBi, T5 and Shaw with trainable
     tables, learned sinks, kv_lengths): output and every gradient;
  3. apply_rope for every scaling method and both pair layouts, forward and
     backward;
  4. float16 and bfloat16: the kernel computes in float32 and rounds once,
     so does the torch backend: within one rounding of the output.
The kernel's own correctness (against Hugging Face, float64 references and
finite differences) is test_torch_gradients.py's and test_attention_*.py's;
here the kernel is the oracle of the torch backend.

A device other than the CPU: tensors on "meta" (shapes only, no memory)
run the torch backend end to end (the argument checks read no element,
the positions and masks are moved there) and give the shapes; an invalid
argument is refused with posenc's own error before any work. The same on
CUDA, against the kernel, is tests/python/gpu_check.py (run where a GPU is
lent; CI has none).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
from test_torch_gradients import CASES, _encoding_tensors, _inputs

TOLERANCE = 1e-5

# Every method posenc.hf plans (test_hf_patch.METHODS, with options spelled out).
# Every method by its default (from posenc's own table, so that a new method cannot be left out), and variants.
METHODS = [name for name, _, _ in posenc._posenc.extension_method_table()] + [
    "ntk:logn", "lambda:sinks=2,logn", "self-extend:group=4,window=16", "self-extend-kv:group=4,window=16",
    "rerope:window=6", "leaky-rerope:window=6,k=3"]
TRAIN, TARGET = 32, 96
METHOD_SPEC = posenc.RopeSpec(theta=10000.0, head_dim=16)
SPEC8 = posenc.RopeSpec(head_dim=8)

# Observed maxima of the comparisons above, by case (the report of issue 51 quotes them).
OBSERVED: dict = {}


def relative_error(ours: torch.Tensor, kernel: torch.Tensor) -> float:
    return float((ours.double() - kernel.double()).abs().max()) / max(1.0, float(kernel.double().abs().max()))


def run_both(q, k, v, leaves, **kw):
    """The output and the gradients of `leaves` (q, k, v and any tables) of
    one loss under each backend: {backend: (out, [grads])}."""
    g = torch.Generator().manual_seed(7)
    out = {}
    for backend in pt.BACKENDS:
        for t in leaves:
            t.grad = None
        y = pt.attention(q, k, v, backend=backend, **kw)
        weight = torch.randn(y.shape, generator=g, dtype=torch.float64)
        (y.double() * weight).sum().backward()
        out[backend] = (y.detach(), [t.grad.clone() for t in leaves])
        g.manual_seed(7)  # the same weights for the other backend
    return out


def method_inputs(seed: int = 0):
    """q [2, 80, 4, 16], k and v [2, 80, 2, 16] (GQA 4:2), past the training length of 32."""
    g = torch.Generator().manual_seed(seed)
    shape = lambda heads: (2, 80, heads, 16)  # noqa: E731
    return [torch.randn(shape(h), generator=g).requires_grad_(True) for h in (4, 2, 2)]


@pytest.mark.parametrize("method", METHODS)
def test_every_method_is_the_kernels(method):
    plan = posenc.extension_attention(method, METHOD_SPEC, train_length=TRAIN, target_length=TARGET)
    q, k, v = method_inputs()
    both = run_both(q, k, v, [q, k, v], layout="bshd", **plan)
    (kernel, kernel_grads), (ours, our_grads) = both["kernel"], both["torch"]
    assert ours.dtype == kernel.dtype == torch.float32
    errors = [relative_error(ours, kernel)] + [relative_error(a, b) for a, b in zip(our_grads, kernel_grads)]
    OBSERVED[f"method {method}"] = errors
    assert max(errors) <= TOLERANCE, errors


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("name", list(CASES))
def test_every_encoding_and_option_is_the_kernels(name, layout):
    q, k, v, encoding, kw = _inputs(name, dtype=torch.float32, layout=layout)
    # The trainable tables and sink logits stay float64 (both backends compute in float32).
    tables = _encoding_tensors(encoding)
    leaves = [q, k, v] + tables + ([kw["sink_logits"]] if kw.get("sink_logits") is not None else [])
    for t in leaves:
        t.requires_grad_(True)
    both = run_both(q, k, v, leaves, encoding=encoding, **kw)
    (kernel, kernel_grads), (ours, our_grads) = both["kernel"], both["torch"]
    errors = [relative_error(ours, kernel)] + [relative_error(a, b) for a, b in zip(our_grads, kernel_grads)]
    OBSERVED[f"{name} {layout}"] = errors
    assert max(errors) <= TOLERANCE, errors


ROPE_SPECS = {
    "default": posenc.RopeSpec(head_dim=16),
    "interleaved-partial": posenc.RopeSpec(head_dim=16, rotary_dim=12, layout="interleaved"),
    **{kind: posenc.RopeSpec.from_hf_config({"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000.0,
                                             "max_position_embeddings": 64, "rope_scaling": scaling})
       for kind, scaling in {
           "linear": {"rope_type": "linear", "factor": 4.0},
           "dynamic": {"rope_type": "dynamic", "factor": 4.0},
           "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
           "llama3": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 16},
           "longrope": {"rope_type": "longrope", "short_factor": [1.0 + 0.1 * i for i in range(8)],
                        "long_factor": [2.0 + 0.5 * i for i in range(8)], "original_max_position_embeddings": 16},
       }.items()},
}


@pytest.mark.parametrize("kind", list(ROPE_SPECS))
def test_apply_rope_is_the_kernels(kind):
    """Positions 0..79 (past every original length here), q and k rotated
    together; the loss's gradients through both backends."""
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 80, 4, 16, generator=g).requires_grad_(True)
    k = torch.randn(2, 80, 2, 16, generator=g).requires_grad_(True)
    weights = [torch.randn(t.shape, generator=g) for t in (q, k)]
    results = {}
    for backend in pt.BACKENDS:
        q.grad = k.grad = None
        rq, rk = pt.apply_rope(ROPE_SPECS[kind], q, k, layout="bshd", backend=backend)
        ((rq * weights[0]).sum() + (rk * weights[1]).sum()).backward()
        results[backend] = [rq.detach(), rk.detach(), q.grad.clone(), k.grad.clone()]
    errors = [relative_error(a, b) for a, b in zip(results["torch"], results["kernel"])]
    OBSERVED[f"apply_rope {kind}"] = errors
    assert max(errors) <= TOLERANCE, errors


@pytest.mark.parametrize("method", ["dynamic-ntk", "leaky-rerope", "lambda:sinks=2,logn", "self-extend"])
def test_query_blocks_are_the_whole_call(method, monkeypatch):
    """A long call runs in blocks of query rows (_SCORE_ELEMENTS): with
    blocks of 3 rows (80 queries: 27 blocks, the last of 2) the output and
    gradients are still the kernel's, the frequencies (dynamic NTK's base,
    seq_len=None) those of the whole call's length."""
    plan = posenc.extension_attention(method, METHOD_SPEC, train_length=TRAIN, target_length=TARGET)
    plan["encoding"] = type(plan["encoding"])(**{**_fields(plan["encoding"]), "seq_len": None})
    q, k, v = method_inputs(seed=5)
    monkeypatch.setattr(pt, "_SCORE_ELEMENTS", 3 * 2 * 4 * 80)  # batch x heads x kv_len x 3 rows
    # The queries at 100..179 after keys at 0..79: each block's own largest position is not the call's.
    both = run_both(q, k, v, [q, k, v], layout="bshd", q_offset=100, **plan)
    (kernel, kernel_grads), (ours, our_grads) = both["kernel"], both["torch"]
    errors = [relative_error(ours, kernel)] + [relative_error(a, b) for a, b in zip(our_grads, kernel_grads)]
    assert max(errors) <= TOLERANCE, errors


def _fields(encoding) -> dict:
    """An encoding's constructor arguments from its fields (all of them keyword)."""
    return {name: getattr(encoding, name) for name in ("spec", "window", "leak", "group") if hasattr(encoding, name)}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_rounds_once_as_the_kernel_does(dtype):
    """Both compute in float32 and round once to the storage type: apart by
    at most one rounding (half an ulp each) of the largest output."""
    plan = posenc.extension_attention("self-extend", METHOD_SPEC, train_length=TRAIN, target_length=TARGET)
    q, k, v = (t.detach().to(dtype) for t in method_inputs(seed=4))
    kernel = pt.attention(q, k, v, layout="bshd", backend="kernel", **plan)
    ours = pt.attention(q, k, v, layout="bshd", backend="torch", **plan)
    assert ours.dtype == dtype
    ulp = float(torch.finfo(dtype).eps) * float(kernel.double().abs().max())
    assert float((ours.double() - kernel.double()).abs().max()) <= ulp
    rq = pt.apply_rope(METHOD_SPEC, q, layout="bshd", backend="torch")
    assert float((rq.double() - pt.apply_rope(METHOD_SPEC, q, layout="bshd").double()).abs().max()) <= \
        float(torch.finfo(dtype).eps) * float(q.double().abs().max()) * 1.5


def test_float64_runs_the_torch_backend_by_default():
    """The kernels take no float64: None picks torch, the kernel refuses it."""
    q, k, v = (t.detach().double() for t in method_inputs())
    default = pt.attention(q, k, v, encoding=METHOD_SPEC, layout="bshd")
    assert torch.equal(default, pt.attention(q, k, v, encoding=METHOD_SPEC, layout="bshd", backend="torch"))
    with pytest.raises(ValueError, match=r"\[attention\] q.dtype = torch.float64: backend \"kernel\" takes"):
        pt.attention(q, k, v, encoding=METHOD_SPEC, layout="bshd", backend="kernel")


# ---- another device ----------------------------------------------------------------------


@pytest.mark.parametrize("method", ["none", "yarn", "rerope", "leaky-rerope", "lambda:sinks=2,logn", "self-extend"])
def test_meta_tensors_run_the_torch_backend(method):
    """Tensors with no memory: the default backend is torch, every step runs
    on the device (a read of an element, or a CPU-only step, would raise),
    and the output has the kernel's shape and q's dtype."""
    plan = posenc.extension_attention(method, METHOD_SPEC, train_length=TRAIN, target_length=TARGET)
    q = torch.empty(2, 5, 4, 16, device="meta", requires_grad=True)  # a decode step of 5 queries
    k, v = torch.empty(2, 80, 2, 16, device="meta"), torch.empty(2, 80, 2, 24, device="meta")
    out = pt.attention(q, k, v, layout="bshd", **plan)
    assert out.device.type == "meta" and out.shape == (2, 5, 4, 24) and out.dtype == torch.float32
    out.sum().backward()
    assert q.grad.shape == q.shape and q.grad.device.type == "meta"
    rotated = pt.apply_rope(METHOD_SPEC, k, offset=3, layout="bshd")
    assert rotated.device.type == "meta" and rotated.shape == k.shape


def test_meta_tensors_are_checked_by_posencs_rules():
    """The torch backend's arguments pass posenc's own checks (on proxies
    of the shapes), so a meta call is refused exactly as a CPU call is."""
    meta = [torch.empty(1, 6, 2, 8, device="meta") for _ in range(3)]
    cpu = [torch.zeros(1, 6, 2, 8) for _ in range(3)]
    cases = [dict(window=-1), dict(logn_train_length=1), dict(encoding=posenc.AlibiEncoding([0.5, 0.25, 0.1])),
             dict(q_positions=np.array([[0, 1, 2, 3, 4, -5]])), dict(kv_lengths=[7]),
             dict(sink_logits=torch.zeros(3)), dict(encoding=posenc.ReRopeEncoding(SPEC8, window=0))]
    for kw in cases:
        with pytest.raises(ValueError) as on_cpu:
            pt.attention(*cpu, layout="bshd", **kw)
        with pytest.raises(ValueError, match=f"^{re.escape(str(on_cpu.value))}$"):
            pt.attention(*meta, layout="bshd", **kw)
    with pytest.raises(ValueError, match=r"\[attention\] k = a tensor on cpu: must be on q's device, meta"):
        pt.attention(meta[0], cpu[1], cpu[2], layout="bshd")


def test_observed_errors():
    """Runs every comparison above again and prints its largest error (the
    numbers issue 51's report quotes); each within TOLERANCE."""
    for method in METHODS:
        test_every_method_is_the_kernels(method)
    for name in CASES:
        test_every_encoding_and_option_is_the_kernels(name, "bshd")
    for kind in ROPE_SPECS:
        test_apply_rope_is_the_kernels(kind)
    width = max(map(len, OBSERVED))
    for case, errors in OBSERVED.items():
        print(f"{case:<{width}}  forward {errors[0]:.2e}  backward {max(errors[1:]):.2e}")
    assert all(max(e) <= TOLERANCE for e in OBSERVED.values())

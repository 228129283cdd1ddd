"""posenc.torch and posenc.hf on CUDA, against the CPU kernel (issue 51, item 3).

Not a pytest file (pytest collects test_*.py only): CI has no GPU. Run it
where one is lent, from this directory, with posenc installed:

    cd tests/python && python gpu_check.py [--device cuda:0]

(``--device cpu`` is a dry run: the torch backend forced on the CPU.)

It runs, on the GPU through the torch backend (the default for a tensor
not on the CPU), and on the CPU through posenc's kernel:
  * posenc.torch.attention for every method posenc.hf plans
    (test_torch_backend.METHODS) and every encoding and option of
    test_torch_gradients.CASES: the output and the gradients of q, k, v
    (and of the trainable tables and sink logits);
  * posenc.torch.apply_rope for every scaling (test_torch_backend.ROPE_SPECS),
    forward and backward;
  * float16 and bfloat16 attention (one rounding apart at most);
  * posenc.hf on a tiny random Llama on the GPU for every method: logits
    against the same model on the CPU (kernel), and greedy generate through
    the cache.
It prints each case's largest error relative to max(1, largest value) and
exits 1 if any exceeds its tolerance (1e-5 in float32: both compute in
float32, the GPU's matmuls may differ in summation order; TF32 is switched
off so that they stay float32).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

import posenc
import posenc.torch as pt
from test_torch_backend import METHOD_SPEC, METHODS, ROPE_SPECS, TARGET, TRAIN, method_inputs, relative_error
from test_torch_gradients import CASES, _encoding_tensors, _inputs

TOLERANCE = 1e-5
failures = []


def backend(device: torch.device):
    """The device side's backend: the default (torch, off the CPU); forced
    on the CPU, so that ``--device cpu`` is a dry run of this script."""
    return "torch" if device.type == "cpu" else None


def report(case: str, errors, tolerance: float = TOLERANCE) -> None:
    worst = max(errors)
    flag = "" if worst <= tolerance else f"  > {tolerance:g} FAIL"
    print(f"{case:<48} forward {errors[0]:.2e}  backward {max(errors[1:], default=0.0):.2e}{flag}", flush=True)
    if worst > tolerance:
        failures.append(case)


def attention_case(case: str, device: torch.device, q, k, v, leaves, **kw) -> None:
    """One loss through the CPU kernel and through the torch backend on
    `device` (the same leaves copied there): output and gradients."""
    weight = torch.randn(pt.attention(q.detach(), k.detach(), v.detach(), backend="kernel", **_detached(kw)).shape,
                         generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    for t in leaves:
        t.grad = None
    cpu = pt.attention(q, k, v, backend="kernel", **kw)
    (cpu.double() * weight).sum().backward()
    cpu_grads = [t.grad.clone() for t in leaves]
    moved = {id(t): t.detach().to(device).requires_grad_(True) for t in leaves}
    on = lambda t: moved.get(id(t), t.to(device) if isinstance(t, torch.Tensor) else t)  # noqa: E731
    gpu = pt.attention(on(q), on(k), on(v), backend=backend(device),
                       **{name: _moved(value, on) for name, value in kw.items()})
    assert gpu.device.type == device.type, gpu.device
    (gpu.double() * weight.to(device)).sum().backward()
    errors = [relative_error(gpu.cpu(), cpu)] + [relative_error(moved[id(t)].grad.cpu(), g)
                                                for t, g in zip(leaves, cpu_grads)]
    report(case, errors)


def _detached(kw: dict) -> dict:
    return {name: value.detach() if isinstance(value, torch.Tensor) else value for name, value in kw.items()}


def _moved(value, on):
    """An argument with its tensors on the device (a trainable encoding's tables too)."""
    if isinstance(value, (pt.T5BiasEncoding, pt.ShawEncoding)):
        import dataclasses
        return dataclasses.replace(value, **{f.name: on(getattr(value, f.name)) for f in dataclasses.fields(value)
                                             if isinstance(getattr(value, f.name), torch.Tensor)})
    return on(value)


def check_methods(device: torch.device) -> None:
    for method in METHODS:
        plan = posenc.extension_attention(method, METHOD_SPEC, train_length=TRAIN, target_length=TARGET)
        q, k, v = method_inputs()
        attention_case(f"attention {method}", device, q, k, v, [q, k, v], layout="bshd", **plan)


def check_cases(device: torch.device) -> None:
    for name in CASES:
        for layout in ("bshd", "bhsd"):
            q, k, v, encoding, kw = _inputs(name, dtype=torch.float32, layout=layout)
            leaves = [q, k, v] + _encoding_tensors(encoding) + (
                [kw["sink_logits"]] if kw.get("sink_logits") is not None else [])
            for t in leaves:
                t.requires_grad_(True)
            attention_case(f"attention {name} {layout}", device, q, k, v, leaves, encoding=encoding, **kw)


def check_rope(device: torch.device) -> None:
    for kind, spec in ROPE_SPECS.items():
        g = torch.Generator().manual_seed(3)
        q, k = torch.randn(2, 80, 4, 16, generator=g), torch.randn(2, 80, 2, 16, generator=g)
        weights = [torch.randn(t.shape, generator=g) for t in (q, k)]
        results = []
        for dev, chosen in ((torch.device("cpu"), "kernel"), (device, backend(device))):
            leaves = [t.to(dev).requires_grad_(True) for t in (q, k)]
            rq, rk = pt.apply_rope(spec, *leaves, layout="bshd", backend=chosen)
            ((rq * weights[0].to(dev)).sum() + (rk * weights[1].to(dev)).sum()).backward()
            results.append([x.detach().cpu() for x in (rq, rk, leaves[0].grad, leaves[1].grad)])
        errors = [relative_error(a, b) for a, b in zip(results[1], results[0])]
        report(f"apply_rope {kind}", [errors[0], *errors])


def check_half(device: torch.device) -> None:
    plan = posenc.extension_attention("self-extend", METHOD_SPEC, train_length=TRAIN, target_length=TARGET)
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = (t.detach().to(dtype) for t in method_inputs(seed=4))
        cpu = pt.attention(q, k, v, layout="bshd", backend="kernel", **plan)
        gpu = pt.attention(q.to(device), k.to(device), v.to(device), layout="bshd", backend=backend(device),
                           **plan).cpu()
        ulp = float(torch.finfo(dtype).eps) * max(1.0, float(cpu.double().abs().max()))
        report(f"attention self-extend {dtype}", [relative_error(gpu, cpu), 0.0], tolerance=ulp)


def check_hf(device: torch.device) -> None:
    try:
        import transformers
    except ImportError as e:
        print(f"posenc.hf: skipped ({e})")
        return
    if not transformers.__version__.startswith("4."):  # posenc.hf patches transformers 4.49's attention classes
        print(f"posenc.hf: skipped (transformers {transformers.__version__} here; posenc.hf is written for 4.49, "
              f"the version the tests pin: carry its wheel to run this part)")
        return
    import posenc.hf
    config = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                                      attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(3, 97, (2, 72), generator=torch.Generator().manual_seed(13))
    for method in METHODS:
        posenc.hf.apply(model.to("cpu"), method, target_length=96)
        with torch.no_grad():
            cpu = model(ids).logits
            tokens = model.generate(ids[:, :40], max_new_tokens=24, do_sample=False, pad_token_id=0)
        posenc.hf.apply(model.to(device), method, target_length=96, backend=backend(device))
        with torch.no_grad():
            gpu = model(ids.to(device)).logits.cpu()
            gpu_tokens = model.generate(ids[:, :40].to(device), max_new_tokens=24, do_sample=False,
                                        pad_token_id=0).cpu()
        same = bool(torch.equal(tokens, gpu_tokens))
        report(f"hf llama {method} (generate {'same' if same else 'DIFFERENT'})", [relative_error(gpu, cpu), 0.0])
        if not same:
            failures.append(f"hf llama {method} generate")
    tokens = torch.randint(3, 97, (192,), generator=torch.Generator().manual_seed(14)).numpy()
    posenc.hf.apply(model.to("cpu"), "self-extend", target_length=96)
    cpu = torch.from_numpy(posenc.hf.nll_by_position(model, tokens, context=96))
    posenc.hf.apply(model.to(device), "self-extend", target_length=96, backend=backend(device))
    gpu = torch.from_numpy(posenc.hf.nll_by_position(model, tokens, context=96))
    report("hf nll_by_position self-extend", [relative_error(gpu, cpu), 0.0])
    posenc.hf.remove(model)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    device = torch.device(parser.parse_args().device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing to check")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"torch {torch.__version__} on {device} "
          f"({torch.cuda.get_device_name(device) if device.type == 'cuda' else device.type}); "
          f"posenc {getattr(posenc, '__version__', '?')}", flush=True)
    start = time.time()
    for check in (check_methods, check_cases, check_rope, check_half, check_hf):
        check(device)
    print(f"{len(failures)} failures in {time.time() - start:.1f} s" + (f": {', '.join(failures)}" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

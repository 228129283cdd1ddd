"""posenc.DecoderModel.generate: greedy decoding through the key/value cache,
on the tiny random Llama (random_llama_gguf.py: context_length 64).

Oracles:
* Hugging Face LlamaForCausalLM in float64 (the same GGUF), greedy by an
  argmax loop over full forward passes (no cache): the model's own RoPE,
  YaRN with factor 2 (HF rope_scaling yarn), and Self-Extend with LongLM's
  attention patched into every layer (test_self_extend.py) — past the
  training length, so the method matters. The smallest top-2 logit margin
  of the oracle is printed; it is far above the float32 error.
* posenc's own full forward passes (DecoderModel.logits, planned for the
  same length) for every method, where no HF module exists.
* Stop tokens, the result's fields, errors, threads.
SmolLM2 against transformers' model.generate: test_model_hf.py.
"""

from __future__ import annotations

import pathlib
import re
import threading
import types

import numpy as np
import pytest

import posenc
from random_llama_gguf import VOCAB, write_random_llama

KEYS = {"tokens", "prompt_tokens", "prefill_tokens_per_s", "decode_tokens_per_s", "prefill_seconds",
        "decode_seconds", "method"}


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("generate") / "tiny.gguf"
    write_random_llama(path, tied=False, dtype="f32", seed=23)
    return path


@pytest.fixture(scope="module")
def model(tiny_path) -> posenc.DecoderModel:
    return posenc.DecoderModel(tiny_path)


def prompt(n: int, seed: int = 0) -> list:
    return np.random.default_rng(seed).integers(0, VOCAB - 3, n).tolist()   # no special tokens


def posenc_argmax_loop(model, ids, max_tokens, method, stop=()):
    target = len(ids) + max_tokens
    ids, out = list(ids), []
    for _ in range(max_tokens):
        token = int(model.logits(ids, method=method, target_length=target)[-1].argmax())
        out.append(token)
        ids.append(token)
        if token in stop:
            break
    return out


# ---- against Hugging Face ----------------------------------------------------------------------


def hf_greedy(hf, ids, max_tokens):
    """Argmax loop over full float64 forward passes; returns the tokens and
    the smallest margin between the two largest logits."""
    import torch
    ids, out, margin = list(ids), [], np.inf
    with torch.no_grad():
        for _ in range(max_tokens):
            logits = hf(torch.as_tensor([ids])).logits[0, -1].numpy()
            top = np.sort(logits)[-2:]
            margin = min(margin, float(top[1] - top[0]))
            token = int(logits.argmax())
            out.append(token)
            ids.append(token)
    return out, margin


@pytest.mark.parametrize("method,scaling", [("none", None), ("yarn:factor=2", {"rope_type": "yarn", "factor": 2.0}),
                                            ("self-extend:group=4,window=16", "longlm")],
                         ids=["none", "yarn", "self-extend"])
def test_matches_hf_greedy(tiny_path, model, method, scaling):
    pytest.importorskip("transformers")
    pytest.importorskip("torch")
    from test_model_hf import hf_llama

    hf = hf_llama(tiny_path, None if scaling == "longlm" else scaling).double()
    if scaling == "longlm":
        from test_self_extend import longlm_attention_forward
        for layer in hf.model.layers:
            layer.self_attn._rotary = hf.model.rotary_emb
            layer.self_attn.forward = types.MethodType(longlm_attention_forward(4, 16), layer.self_attn)
    ids = prompt(50, seed=4)
    expected, margin = hf_greedy(hf, ids, 30)                 # positions up to 79 > 64
    got = model.generate(ids, max_tokens=30, method=method)
    print(f"\ntiny {method}: 30 tokens, HF float64 smallest top-2 margin {margin:.3g}; "
          f"prefill {got['prefill_tokens_per_s']:.0f} tokens/s, decode {got['decode_tokens_per_s']:.0f} tokens/s")
    assert margin > 2e-4                       # 20x the float32 logits' error (~1e-5): no near-tie to flip
    assert got["tokens"] == expected
    assert got["method"] == method.replace("group=4,window=16", "window=16,group=4")


# ---- against posenc's own forward passes ------------------------------------------------------


@pytest.mark.parametrize("method", ["none", "linear", "ntk", "dynamic-ntk", "yarn", "rerope", "leaky-rerope", "window",
                                   "lambda", "self-extend", "yarn:logn"])
def test_matches_full_forward_argmax(model, method):
    ids = prompt(45, seed=1)
    got = model.generate(ids, max_tokens=25, method=method)
    assert got["tokens"] == posenc_argmax_loop(model, ids, 25, method)
    assert got["method"] == model.resolve_method(method, 70)   # planned for prompt + max_tokens


def test_result_fields(model):
    ids = prompt(20)
    r = model.generate(ids, max_tokens=5)
    assert set(r) == KEYS
    assert isinstance(r["tokens"], list) and len(r["tokens"]) == 5 and all(isinstance(t, int) for t in r["tokens"])
    assert r["prompt_tokens"] == 20 and r["method"] == "none"
    assert r["prefill_seconds"] > 0 and r["prefill_tokens_per_s"] == pytest.approx(20 / r["prefill_seconds"])
    assert r["decode_seconds"] > 0 and r["decode_tokens_per_s"] == pytest.approx(4 / r["decode_seconds"])
    one = model.generate(ids, max_tokens=1)
    assert one["tokens"] == r["tokens"][:1] and one["decode_tokens_per_s"] == 0
    # Any integer array-like; the same tokens each time.
    assert model.generate(np.array(ids, np.uint16), max_tokens=5)["tokens"] == r["tokens"]
    assert model.generate(tuple(ids), max_tokens=np.int64(5))["tokens"] == r["tokens"]


def test_stop_tokens(model):
    ids = prompt(30, seed=2)
    free = model.generate(ids, max_tokens=12)["tokens"]
    stop = free[4]
    first = free.index(stop)
    got = model.generate(ids, max_tokens=12, stop_tokens=[stop, VOCAB - 1])
    assert got["tokens"] == free[:first + 1]                   # the stop token is returned, nothing after it
    assert model.generate(ids, max_tokens=12, stop_tokens=stop)["tokens"] == free[:first + 1]
    assert model.generate(ids, max_tokens=12, stop_tokens=np.array([stop], np.int64))["tokens"] == free[:first + 1]
    assert model.generate(ids, max_tokens=12, stop_tokens=[])["tokens"] == free


def test_threads(model):
    """The GIL is released: concurrent generations give the same tokens."""
    ids = [prompt(25, seed=s) for s in range(3)]
    expected = [model.generate(x, max_tokens=8, method="self-extend")["tokens"] for x in ids]
    results = [None] * 3

    def work(i):
        results[i] = model.generate(ids[i], max_tokens=8, method="self-extend")["tokens"]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == expected


def raises(message: str):
    return pytest.raises(ValueError, match="^" + re.escape(message))


def test_errors(model):
    ids = prompt(10)
    with raises("[generate] max_tokens = 0: must be >= 1"):
        model.generate(ids, max_tokens=0)
    with raises("[generate] max_tokens = -3: must be >= 1"):
        model.generate(ids, max_tokens=-3)
    with raises("[generate] max_tokens = 9223372036854775807: must be at most 2^63 - 1 - 10 (the prompt's tokens)"):
        model.generate(ids, max_tokens=2**63 - 1)
    with raises("[generate] max_tokens = 9223372036854775808: must fit in a signed 64-bit integer"):
        model.generate(ids, max_tokens=2**63)
    with raises("[generate] max_tokens = 2.0: must be an integer"):
        model.generate(ids, max_tokens=2.0)
    with raises("[generate] tokens = []: must hold at least one token id"):
        model.generate([], max_tokens=2)
    with raises("[generate] tokens[1] = -1: must be >= 0 (a token id)"):
        model.generate([1, -1], max_tokens=2)
    with raises("[generate] stop_tokens[0] = -1: must be >= 0 (a token id)"):
        model.generate(ids, max_tokens=2, stop_tokens=[-1])
    with raises("[generate] stop_tokens.dtype = float64: must be an integer type (token ids)"):
        model.generate(ids, max_tokens=2, stop_tokens=[1.5])
    with raises("[generate] stop_tokens.ndim = 2: must be 0 or 1"):
        model.generate(ids, max_tokens=2, stop_tokens=[[1]])
    with raises("[generate] method = 3: must be a string"):
        model.generate(ids, max_tokens=2, method=3)
    with raises('[context extension] method = "nope": must be one of none, linear'):
        model.generate(ids, max_tokens=2, method="nope")
    with pytest.raises(ValueError, match=r"token"):
        model.generate([VOCAB], max_tokens=2)                   # outside the vocabulary: the library's error
    with pytest.raises(TypeError):
        model.generate(ids, 2)                                  # max_tokens is keyword-only
    with pytest.raises(TypeError):
        model.generate(ids)                                     # and required

"""posenc.DecoderModel and posenc.perplexity: the Python API on small random-weight
models (random_llama_gguf.py), without Hugging Face.

Shapes and dtypes, the token array-likes accepted, losses against a float64
log-softmax of the model's own logits, the perplexity dict against
next_token_nll window by window (non-overlapping and sliding), every
context-extension method's text form, thread-count independence, FLOP
count, and errors: ValueError naming the parameter.
"""

from __future__ import annotations

import math
import pathlib
import re
import sys
import threading

import numpy as np
import pytest
import torch

import posenc
from random_llama_gguf import BLOCKS, CONTEXT, D, FFN, HEAD_DIM, HEADS, KV_HEADS, VOCAB, write_random_llama

KEYS = {"ppl", "mean_nll", "scored", "processed", "windows", "seconds", "tokens_per_s", "method", "position_nll"}


@pytest.fixture(scope="module")
def random_dir(tmp_path_factory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("random-api")
    write_random_llama(directory / "tied.gguf", tied=True)
    write_random_llama(directory / "untied.gguf", tied=False, seed=1)
    return directory


@pytest.fixture(scope="module")
def model(random_dir) -> posenc.DecoderModel:
    return posenc.DecoderModel(random_dir / "tied.gguf")


def tokens(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, n)


def log_softmax64(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def nll64(logits: np.ndarray, ids: np.ndarray) -> np.ndarray:
    return -log_softmax64(logits)[np.arange(len(ids) - 1), ids[1:]]


# ---- the model ---------------------------------------------------------------------

def test_stored_weights_forward_is_the_float32_models(tmp_path):
    """Q8_0 weights kept as stored: a forward pass is bitwise the float32
    model's (the kernels dequantize exactly); generation (decode kernels)
    gives the same tokens."""
    path = write_random_llama(tmp_path / "q8_0.gguf", dtype="q8_0")
    stored, f32 = posenc.DecoderModel(path), posenc.DecoderModel(path, weights="f32")
    ids = tokens(40, seed=3)
    np.testing.assert_array_equal(stored.logits(ids), f32.logits(ids))
    assert stored.generate(ids[:8], max_tokens=12)["tokens"] == f32.generate(ids[:8], max_tokens=12)["tokens"]
    with pytest.raises(ValueError, match=re.escape('[llama] weights = "f16": must be "stored"')):
        posenc.DecoderModel(path, weights="f16")
    with pytest.raises(TypeError, match=re.escape("[llama] weights = 1")):
        posenc.DecoderModel(path, weights=1)


def test_int8_activations_are_a_choice_for_stored_weights(tmp_path):
    """activations="int8": every product with quantized weights, prefill's
    and decode's, rounds x to int8 blocks: the logits move by that rounding
    (near the float32 activations', not equal); float32 weights cannot take it."""
    path = write_random_llama(tmp_path / "q8_0.gguf", dtype="q8_0")
    f32_x, int8_x = posenc.DecoderModel(path), posenc.DecoderModel(path, activations="int8")
    ids = tokens(40, seed=4)
    f32_logits, int8_logits = f32_x.logits(ids), int8_x.logits(ids)
    relative = np.abs(f32_logits - int8_logits).max() / np.abs(f32_logits).max()
    assert 1e-5 < relative < 5e-2
    assert len(int8_x.generate(ids[:8], max_tokens=6)["tokens"]) == 6
    with pytest.raises(ValueError, match=re.escape('[llama] activations = "int4": must be "f32"')):
        posenc.DecoderModel(path, activations="int4")
    with pytest.raises(ValueError, match=r"activations = int8: needs the weights kept as stored"):
        posenc.DecoderModel(path, weights="f32", activations="int8")
    with pytest.raises(TypeError, match=re.escape("[llama] activations = 8")):
        posenc.DecoderModel(path, activations=8)


def test_hparams(random_dir, model):
    h = model.hparams
    assert h["architecture"] == "llama"
    assert (h["vocab_size"], h["embedding_length"], h["feed_forward_length"], h["block_count"], h["head_count"],
            h["head_count_kv"], h["head_dim"], h["context_length"]) == (VOCAB, D, FFN, BLOCKS, HEADS, KV_HEADS,
                                                                        HEAD_DIM, CONTEXT)
    assert h["rms_norm_eps"] == pytest.approx(1e-5, rel=1e-6)
    assert isinstance(h["rope"], posenc.RopeSpec)
    assert (h["rope"].theta, h["rope"].head_dim, h["rope"].rotary_dim, h["rope"].layout) == (
        10000.0, HEAD_DIM, HEAD_DIM, "interleaved")
    assert h["rope"].scaling is None
    assert h["tied_output"] is True
    assert posenc.DecoderModel(str(random_dir / "untied.gguf")).hparams["tied_output"] is False
    h["vocab_size"] = 1  # a copy
    assert model.hparams["vocab_size"] == VOCAB
    assert model.vocab_size == VOCAB and model.context_length == CONTEXT
    assert "vocab=320" in repr(model)


def test_shapes_and_dtypes(model):
    ids = tokens(20)
    logits = model.logits(ids)
    assert logits.dtype == np.float32 and logits.shape == (20, VOCAB) and logits.flags.c_contiguous
    assert np.isfinite(logits).all() and logits.std() > 1
    nll = model.next_token_nll(ids)
    assert nll.dtype == np.float64 and nll.shape == (19,)
    assert model.logits([5]).shape == (1, VOCAB)
    assert model.next_token_nll([5]).shape == (0,)


def test_token_array_likes_agree(model):
    ids = tokens(12, seed=1)
    expected = model.logits(ids)
    for like in (ids.tolist(), tuple(ids.tolist()), ids.astype(np.int32), ids.astype(np.uint16),
                 ids.astype(np.int64)[::-1][::-1], np.asfortranarray(ids), torch.from_numpy(ids)):
        np.testing.assert_array_equal(model.logits(like), expected)


def test_nll_is_log_softmax_of_logits(model):
    ids = tokens(50, seed=2)
    expected = nll64(model.logits(ids), ids)
    np.testing.assert_allclose(model.next_token_nll(ids), expected, rtol=0, atol=1e-6)
    assert (model.next_token_nll(ids) > 0).all()


def test_causal(model):
    # Row i sees tokens 0..i only: a prefix gives the same rows.
    ids = tokens(40, seed=3)
    full = model.logits(ids)
    np.testing.assert_allclose(model.logits(ids[:17]), full[:17], rtol=0, atol=1e-5 * np.abs(full).max())
    changed = ids.copy()
    changed[30] = (changed[30] + 1) % VOCAB
    other = model.logits(changed)
    np.testing.assert_allclose(other[:30], full[:30], rtol=0, atol=1e-5 * np.abs(full).max())
    assert np.abs(other[30:] - full[30:]).max() > 1e-3


def test_thread_count_does_not_change_results(model):
    ids = tokens(33, seed=4)
    before = posenc.num_threads()
    try:
        posenc.set_num_threads(1)
        one = model.logits(ids)
        posenc.set_num_threads(max(2, before))
        many = model.logits(ids)
    finally:
        posenc.set_num_threads(before)
    np.testing.assert_array_equal(one, many)


def test_calls_from_python_threads(model):
    # The GIL is released inside: concurrent calls on one model are fine.
    ids = tokens(30, seed=5)
    expected = model.logits(ids)
    results = [None] * 4

    def work(i):
        results[i] = model.logits(ids)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, expected)


def test_forward_flops(model):
    def expected(n):
        q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
        linear = BLOCKS * (D * q + 2 * D * kv + q * D + 3 * D * FFN) + D * VOCAB
        return 2.0 * n * linear + BLOCKS * HEADS * 2 * 2 * HEAD_DIM * n * (n + 1) / 2

    for n in (1, 64, 1000):
        assert model.forward_flops(n) == pytest.approx(expected(n), rel=1e-12)


def test_forward_flops_of_a_negative_count_is_an_error(model):
    # It returned a negative count (-47104 for n = -1) before.
    for n in (-1, -(2**63)):
        with pytest.raises(ValueError, match=rf"^\[llama\] tokens = {n}: must be >= 0"):
            model.forward_flops(n)
    assert model.forward_flops(0) == 0.0


def test_random_file_has_a_working_tokenizer(random_dir, model):
    tok = posenc.BpeTokenizer.from_gguf(str(random_dir / "tied.gguf"))
    assert tok.vocab_size == VOCAB
    ids = tok.encode("the license of the program, version 3")
    assert tok.decode(ids) == "the license of the program, version 3"
    assert len(ids) < len("the license of the program, version 3")  # merges apply
    assert model.next_token_nll(ids).shape == (len(ids) - 1,)


# ---- context-extension methods ---------------------------------------------------------

METHODS = ["none", "linear", "ntk", "dynamic-ntk", "yarn", "rerope", "leaky-rerope", "window", "lambda",
           "self-extend", "ntk:logn", "yarn:factor=4", "linear:factor=2,logn", "leaky-rerope:window=8,k=4",
           "lambda:sinks=2,window=16", "rerope:window=8", "window:window=16", "lambda:sinks=2,logn",
           "self-extend:group=4,window=16", "self-extend:logn", "self-extend-kv", "self-extend-kv:group=4,window=16"]


def test_every_method_of_the_table_is_tested_and_documented(model):
    """The module docstring's list is made from the library's table at import:
    every method with its parameters and summary, self-extend included."""
    table = posenc._posenc.extension_method_table()
    names = [name for name, _, _ in table]
    assert names[0] == "none" and "self-extend" in names and len(set(names)) == len(names)
    assert set(names) <= {m.split(":")[0].split(",")[0] for m in METHODS}
    doc = sys.modules["posenc.model"].__doc__
    assert "{methods}" not in doc
    for name, parameters, summary in table:
        form = name + ("[:" + ",".join(f"{p}={p[0].upper()}" for p in parameters) + "]" if parameters else "")
        line = next(line for line in doc.splitlines() if line.split() and line.split()[0] == form)
        assert line.endswith(summary), line
        assert model.resolve_method(name, 2 * CONTEXT).split(":")[0].split(",")[0] == name
    synopsis = posenc._posenc.extension_methods_synopsis()
    assert synopsis.startswith(" | ".join(names) + ", with optional :") and "group=G" in synopsis


@pytest.mark.parametrize("method", METHODS)
def test_methods_accepted(model, method):
    ids = tokens(2 * CONTEXT, seed=6)   # twice the training length: every default is active
    logits = model.logits(ids, method=method)
    assert logits.shape == (2 * CONTEXT, VOCAB) and np.isfinite(logits).all()
    nll = model.next_token_nll(ids, method=method)
    np.testing.assert_allclose(nll, nll64(logits, ids), rtol=0, atol=1e-6)
    result = posenc.perplexity(model, ids, context=2 * CONTEXT, method=method)
    assert result["mean_nll"] == pytest.approx(float(nll.mean()), rel=1e-9)
    assert result["method"].split(":")[0].split(",")[0] == method.split(":")[0].split(",")[0]


def test_methods_within_training_length_are_the_model(model):
    # At L <= L_train the scaling methods default to no change (s = 1).
    ids = tokens(CONTEXT, seed=7)
    base = model.logits(ids)
    for method in ("linear", "ntk", "dynamic-ntk", "yarn", "leaky-rerope"):
        np.testing.assert_allclose(model.logits(ids, method=method), base, rtol=0,
                                   atol=1e-5 * np.abs(base).max(), err_msg=method)


def test_target_length(model):
    # target_length plans the method for a longer sequence than this one.
    ids = tokens(40, seed=8)
    planned = model.logits(ids, method="linear", target_length=2 * CONTEXT)
    np.testing.assert_allclose(planned, model.logits(ids, method="linear:factor=2"), rtol=0, atol=1e-6)
    assert np.abs(planned - model.logits(ids)).max() > 1e-2
    assert posenc.perplexity(model, tokens(256), context=2 * CONTEXT, method="yarn")["method"] == "yarn:factor=2"


def test_resolved_method_text(model):
    ids = tokens(4 * CONTEXT, seed=9)
    r = posenc.perplexity(model, ids, context=4 * CONTEXT, method="linear")
    assert "factor=4" in r["method"]
    r = posenc.perplexity(model, ids, context=4 * CONTEXT, method="leaky-rerope")
    assert "window=32" in r["method"] and "k=" in r["method"]
    assert posenc.perplexity(model, ids, context=CONTEXT, method="none")["method"] == "none"
    assert "logn" in posenc.perplexity(model, ids, context=CONTEXT, method="ntk:logn")["method"]
    assert model.resolve_method("yarn", 2 * CONTEXT) == "yarn:factor=2"
    assert model.resolve_method("leaky-rerope", 4 * CONTEXT) == r["method"] == posenc.perplexity(
        model, ids, context=4 * CONTEXT, method="leaky-rerope")["method"]
    with pytest.raises(ValueError, match=r"target_length"):
        model.resolve_method("yarn", 0)


# ---- perplexity ---------------------------------------------------------------------------

def test_perplexity_non_overlapping(model):
    ids = tokens(100, seed=10)
    r = posenc.perplexity(model, ids, context=32)
    assert set(r) == KEYS
    assert (r["windows"], r["scored"], r["processed"]) == (3, 3 * 31, 96)  # only whole windows
    expected = np.concatenate([model.next_token_nll(ids[w * 32:(w + 1) * 32]) for w in range(3)])
    assert r["mean_nll"] == pytest.approx(float(expected.mean()), rel=1e-12)
    assert r["ppl"] == pytest.approx(math.exp(r["mean_nll"]), rel=1e-12)
    assert r["seconds"] > 0 and r["tokens_per_s"] == pytest.approx(r["processed"] / r["seconds"], rel=1e-9)
    assert r["method"] == "none"
    np.testing.assert_allclose(r["position_nll"], expected.reshape(3, 31).mean(axis=0), rtol=1e-12, atol=0)

    two = posenc.perplexity(model, ids, context=32, max_windows=2)
    assert (two["windows"], two["scored"], two["processed"]) == (2, 62, 64)
    assert two["mean_nll"] == pytest.approx(float(expected[:62].mean()), rel=1e-12)
    assert posenc.perplexity(model, ids, context=32, stride=32)["mean_nll"] == r["mean_nll"]


def test_perplexity_sliding(model):
    ids = tokens(96, seed=11)
    r = posenc.perplexity(model, ids, context=32, stride=16)
    starts = [0, 16, 32, 48, 64]
    assert (r["windows"], r["scored"], r["processed"]) == (5, 31 + 4 * 16, 5 * 32)
    parts = [model.next_token_nll(ids[:32])]
    parts += [model.next_token_nll(ids[s:s + 32])[-16:] for s in starts[1:]]
    assert r["mean_nll"] == pytest.approx(float(np.concatenate(parts).mean()), rel=1e-12)


def test_perplexity_with_bos_starts_every_window_with_it(model):
    ids = tokens(100, seed=13)
    r = posenc.perplexity(model, ids, context=32, bos=3)
    # 31 text tokens a window after BOS, every one scored (the first from BOS alone).
    assert (r["windows"], r["scored"], r["processed"]) == (3, 3 * 31, 96)
    expected = np.concatenate([model.next_token_nll(np.concatenate([[3], ids[w * 31:(w + 1) * 31]]))
                               for w in range(3)])
    assert r["mean_nll"] == pytest.approx(float(expected.mean()), rel=1e-12)
    with pytest.raises(ValueError, match=r"stride = 32: must be in \[1, context - 1 = 31\]"):
        posenc.perplexity(model, ids, context=32, stride=32, bos=3)


def test_perplexity_of_random_weights_is_plausible(model):
    r = posenc.perplexity(model, tokens(256, seed=12), context=64)
    assert 1 < r["ppl"] < 1e6 and np.isfinite(r["mean_nll"])


# ---- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("method,pattern", [
    ("bogus", r"method.*bogus"),
    ("yarn:factor=0", r"factor"),
    ("linear:factor=-1", r"factor"),
    ("yarn:window=4", r"window"),
    ("rerope:window=0", r"window"),
    ("leaky-rerope:k=0.5", r"\bk\b"),
    ("lambda:sinks=-1", r"sinks"),
    ("yarn:factor=abc", r"factor"),
])
def test_bad_method(model, method, pattern):
    with pytest.raises(ValueError, match=pattern):
        model.logits(tokens(8), method=method)
    with pytest.raises(ValueError, match=pattern):
        posenc.perplexity(model, tokens(64), context=32, method=method)


def test_bad_tokens(model):
    with pytest.raises(ValueError, match=r"tokens"):
        model.logits([])
    with pytest.raises(ValueError, match=r"tokens\[1\] = -1"):
        model.logits([3, -1, 4])
    with pytest.raises(ValueError, match=r"320"):          # id >= vocab: the model names the id
        model.logits([3, VOCAB, 4])
    with pytest.raises(ValueError, match=r"tokens\[0\] = 4294967296"):
        model.logits([2**32])
    with pytest.raises(ValueError, match=r"tokens.dtype"):
        model.logits([1.0, 2.0])
    with pytest.raises(ValueError, match=r"tokens.ndim"):
        model.logits([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match=r"tokens"):
        model.next_token_nll(np.array([], np.int32))
    with pytest.raises(ValueError, match=r"token.*325|325.*token"):
        posenc.perplexity(model, [1, 2, VOCAB + 5, 3] * 10, context=8)
    with pytest.raises(ValueError, match=r"method"):
        model.logits([1, 2], method=None)
    with pytest.raises(ValueError, match=r"target_length"):
        model.logits([1, 2], method="linear", target_length=0)


def test_bad_perplexity_arguments(model):
    ids = tokens(64)
    with pytest.raises(ValueError, match=r"context"):
        posenc.perplexity(model, ids, context=1)
    with pytest.raises(ValueError, match=r"stride"):
        posenc.perplexity(model, ids, context=16, stride=17)
    with pytest.raises(ValueError, match=r"stride"):
        posenc.perplexity(model, ids, context=16, stride=0)
    with pytest.raises(ValueError, match=r"max_windows"):
        posenc.perplexity(model, ids, context=16, max_windows=-1)
    with pytest.raises(ValueError, match=r"64"):            # shorter than one window: names the count
        posenc.perplexity(model, ids, context=65)
    with pytest.raises(ValueError, match=r"model"):
        posenc.perplexity("tied.gguf", ids)


def test_bad_files(random_dir, tmp_path):
    with pytest.raises(ValueError, match=r"missing\.gguf"):
        posenc.DecoderModel(tmp_path / "missing.gguf")
    data = (random_dir / "tied.gguf").read_bytes()
    for size in (10, 1000, len(data) // 2, len(data) - 1):
        path = tmp_path / f"cut-{size}.gguf"
        path.write_bytes(data[:size])
        with pytest.raises(ValueError, match=r"cut-"):
            posenc.DecoderModel(path)
    # A valid GGUF that is not a complete llama model: names what is missing.
    import gguf

    path = tmp_path / "no-blocks.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(64)
    w.add_embedding_length(D)
    w.add_block_count(BLOCKS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tensor("token_embd.weight", np.zeros((VOCAB, D), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ValueError, match=r"blk\.0|output_norm"):
        posenc.DecoderModel(path)
    path = tmp_path / "gpt2.gguf"
    w = gguf.GGUFWriter(str(path), "gpt2")
    w.add_context_length(64)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(ValueError, match=r"gpt2|architecture"):
        posenc.DecoderModel(path)

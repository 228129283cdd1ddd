"""The Python API of posenc.attention and posenc.GgufFile: argument
spellings that must agree, strided inputs, dtypes, threads, docstrings."""

from __future__ import annotations

import doctest
import pickle
import sys
import threading

import ml_dtypes
import numpy as np
import pytest

import posenc

SPEC = posenc.RopeSpec(head_dim=32)


def qkv(rng, batch=2, q_len=9, kv_len=9, q_heads=4, kv_heads=2, dtype=np.float32):
    shape = lambda s, h: (batch, s, h, 32)  # noqa: E731
    return tuple(rng.standard_normal(shape(s, h)).astype(np.float32).astype(dtype)
                 for s, h in ((q_len, q_heads), (kv_len, kv_heads), (kv_len, kv_heads)))


def test_position_spellings_agree(rng):
    """q_offset (int, per row) and q_positions ((q_len,), (1, q_len), (batch, q_len)) mean the same."""
    q, k, v = qkv(rng, q_len=3, kv_len=20)
    ids = np.arange(17, 20)
    runs = [
        posenc.attention(q, k, v, encoding=SPEC, layout="bshd"),                       # default: the end of the keys
        posenc.attention(q, k, v, encoding=SPEC, q_offset=17, layout="bshd"),
        posenc.attention(q, k, v, encoding=SPEC, q_offset=[17, 17], layout="bshd"),
        posenc.attention(q, k, v, encoding=SPEC, q_positions=ids, layout="bshd"),
        posenc.attention(q, k, v, encoding=SPEC, q_positions=ids[None], layout="bshd"),
        posenc.attention(q, k, v, encoding=SPEC, q_positions=np.stack([ids, ids]).astype(np.int32), layout="bshd"),
        posenc.attention(q, k, v, encoding=SPEC, q_offset=17, k_positions=np.arange(20), layout="bshd"),
        posenc.attention(q, k, v, encoding=posenc.RopeEncoding(SPEC), q_offset=17, k_offset=[0, 0], layout="bshd"),
    ]
    for other in runs[1:]:
        assert other.tobytes() == runs[0].tobytes()


def test_relative_encodings_ignore_a_common_shift(rng):
    q, k, v = qkv(rng)
    for encoding in (SPEC, posenc.ReRopeEncoding(SPEC, 4, leak=2.0), posenc.SelfExtendEncoding(SPEC, 2, 3),
                     posenc.AlibiEncoding([0.5, 0.25, 0.1, 0.05]),
                     posenc.T5BiasEncoding(rng.standard_normal((32, 4)), max_distance=40, bidirectional=False)):
        a = posenc.reference.attention(q, k, v, encoding=encoding, layout="bshd")
        b = posenc.reference.attention(q, k, v, encoding=encoding, q_offset=1000, k_offset=1000, layout="bshd")
        np.testing.assert_allclose(a, b, atol=2e-6)


def test_strided_views_of_a_fused_projection(rng):
    """q, k, v as slices of one [batch, seq, heads, 3 * d] array: no copy needed."""
    fused = rng.standard_normal((2, 11, 4, 96)).astype(np.float32)
    q, k, v = fused[..., :32], fused[..., 32:64], fused[..., 64:]
    out = posenc.attention(q, k, v, encoding=SPEC, window=5, layout="bshd")
    want = posenc.attention(*(np.ascontiguousarray(x) for x in (q, k, v)), encoding=SPEC, window=5, layout="bshd")
    assert out.tobytes() == want.tobytes()
    # A head axis view with a negative stride.
    flipped = posenc.attention(q[:, :, ::-1], k[:, :, ::-1], v[:, :, ::-1], encoding=None, layout="bshd")
    want = posenc.attention(np.ascontiguousarray(q[:, :, ::-1]), np.ascontiguousarray(k[:, :, ::-1]),
                            np.ascontiguousarray(v[:, :, ::-1]), layout="bshd")
    assert flipped.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_dtype_and_shape_of_out(rng, dtype):
    q, k, v = qkv(rng, dtype=dtype)
    v = np.concatenate([v, v[..., :8]], axis=-1)          # v_dim 40 != head_dim 32
    out = posenc.attention(q, k, v, encoding=SPEC, layout="bshd")
    assert out.dtype == np.dtype(dtype) and out.shape == (2, 9, 4, 40) and out.flags.c_contiguous


def test_rows_without_keys_are_zero(rng):
    q, k, v = qkv(rng, q_len=2, kv_len=6)
    out = posenc.attention(q, k, v, q_offset=0, kv_lengths=[6, 0], layout="bshd")
    assert np.abs(out[0]).max() > 0
    assert (out[1] == 0).all()


@pytest.mark.parametrize("implementation", ["kernel", "reference"])
def test_empty_inputs(implementation):
    """No keys: zeros; no queries or no rows: empty results (NumPy gives
    empty arrays arbitrary strides, which must not matter)."""
    run = posenc.attention if implementation == "kernel" else posenc.reference.attention
    q = np.ones((2, 3, 2, 8), np.float32)
    no_keys = np.ones((2, 0, 2, 8), np.float32)
    for encoding in (None, posenc.RopeSpec(head_dim=8), posenc.T5BiasEncoding(np.ones((32, 2)))):
        out = run(q, no_keys, no_keys, encoding=encoding, q_offset=0, layout="bshd")
        assert out.shape == (2, 3, 2, 8) and not out.any()
    assert run(q[:, :0], q, q, layout="bshd").shape == (2, 0, 2, 8)
    assert run(q[:0], q[:0], q[:0], layout="bshd").shape == (0, 3, 2, 8)


def test_dynamic_ntk_frequencies_follow_the_call(rng):
    """Dynamic NTK: the table is built for the call's largest position + 1
    unless seq_len is given (then it is that table)."""
    spec = posenc.RopeSpec(head_dim=32, scaling={"rope_type": "dynamic", "factor": 2.0,
                                                 "original_max_position_embeddings": 8})
    q, k, v = qkv(rng, kv_len=30, q_len=30)
    auto = posenc.attention(q, k, v, encoding=posenc.RopeEncoding(spec), layout="bshd")
    explicit = posenc.attention(q, k, v, encoding=posenc.RopeEncoding(spec, seq_len=30), layout="bshd")
    short = posenc.attention(q, k, v, encoding=posenc.RopeEncoding(spec, seq_len=8), layout="bshd")
    assert auto.tobytes() == explicit.tobytes()
    assert np.abs(auto - short).max() > 1e-3


def test_threads_give_identical_results(rng):
    """The GIL is released during the call; concurrent calls do not interfere."""
    inputs = [qkv(rng, q_len=40, kv_len=40) for _ in range(4)]
    expected = [posenc.attention(*x, encoding=SPEC, window=9, layout="bshd") for x in inputs]
    results = [None] * 4

    def work(i):
        for _ in range(3):
            results[i] = posenc.attention(*inputs[i], encoding=SPEC, window=9, layout="bshd")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, expected):
        assert got.tobytes() == want.tobytes()


def test_reprs():
    assert repr(posenc.RopeEncoding(SPEC)) == "RopeEncoding(RopeSpec(theta=10000.0, head_dim=32, layout='half-split'))"
    assert repr(posenc.ReRopeEncoding(SPEC, 512, leak=16)) == (
        "ReRopeEncoding(RopeSpec(theta=10000.0, head_dim=32, layout='half-split'), window=512, leak=16.0)")
    assert repr(posenc.AlibiEncoding([0.5, 0.25])) == "AlibiEncoding(slopes=[0.5, 0.25], form='distance')"
    t5 = posenc.T5BiasEncoding(np.zeros((32, 8)), bidirectional=False)
    assert t5.num_buckets == 32 and not t5.weights.flags.writeable
    assert repr(t5) == "T5BiasEncoding(weights=<32 buckets x 8 heads>, max_distance=128, bidirectional=False)"


def test_encodings_are_typed_values():
    """Bound classes: keyword-only arguments where the signature has ``*``,
    read-only attributes, pickles that rebuild the same encoding."""
    encodings = [posenc.RopeEncoding(SPEC, seq_len=64), posenc.ReRopeEncoding(SPEC, 8, leak=2.0),
                 posenc.SelfExtendEncoding(SPEC, 2, 3, seq_len=64),
                 posenc.AlibiEncoding([0.5, 0.25], form="key-position"),
                 posenc.T5BiasEncoding(np.ones((32, 2)), max_distance=40, bidirectional=False),
                 posenc.ShawEncoding(np.ones((5, 32)), np.ones((5, 32)), max_distance=2, query_term=True)]
    rng = np.random.default_rng(0)
    q, k, v = qkv(rng, q_heads=2)
    for encoding in encodings:
        copy = pickle.loads(pickle.dumps(encoding))
        assert type(copy) is type(encoding) and repr(copy) == repr(encoding)
        assert np.array_equal(posenc.attention(q, k, v, encoding=copy, layout="bshd"), posenc.attention(q, k, v, encoding=encoding, layout="bshd"))
    with pytest.raises(AttributeError):
        encodings[0].seq_len = 8
    with pytest.raises(TypeError):
        posenc.ShawEncoding(np.ones((5, 32)), None, 2)          # max_distance is keyword-only
    with pytest.raises(TypeError):
        posenc.attention(q, k, v, None, layout="bshd")                           # so is everything after v
    with pytest.raises(TypeError):
        posenc.reference.attention(q, k, v, None, layout="bshd")
    assert posenc.attention.__module__ == "posenc.attention" and posenc.ShawEncoding.__module__ == "posenc.attention"


@pytest.mark.parametrize("module", ["posenc.attention", "posenc.gguf"])
def test_docstring_examples(module):
    result = doctest.testmod(sys.modules[module], extraglobs={"posenc": posenc, "np": np},
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0

"""The encodings' Python API: docstring examples, argument errors in the
library's "[op] parameter = value: rule" format, shapes and position forms."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import posenc
from rope_oracles import BF16


def test_docstring_examples():
    result = doctest.testmod(posenc.encodings, extraglobs={"posenc": posenc, "np": np},
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("call,message", [
    (lambda: posenc.alibi_slopes(0), r"\[alibi\] heads = 0: must be > 0"),
    (lambda: posenc.t5_relative_bucket([1], num_buckets=31), r"\[t5_bias\] num_buckets = 31: must be even"),
    (lambda: posenc.t5_relative_bucket([1], num_buckets=32, max_distance=8),
     r"\[t5_bias\] max_distance = 8: must be > 8"),
    (lambda: posenc.sinusoidal_table(0, 3), r"\[sinusoidal\] dim = 0: must be > 0"),
    (lambda: posenc.sinusoidal_table(8, 3, order="sincos"), r"\[sinusoidal\] order = \"sincos\""),
    (lambda: posenc.LearnedTable(np.zeros((4, 2))).lookup([4]), r"\[learned_table\] position = 4: must be < 4"),
    (lambda: posenc.LearnedTable(np.zeros((4, 2))).lookup([-1]), r"position = -1: must not be negative"),
    (lambda: posenc.LearnedTable.from_bytes(b"\x93NUMPY\x01\x00\xff\x00", "npy"), r"\[npy\] header length = 255"),
    (lambda: posenc.LearnedTable.from_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{}", "safetensors"),
     r"\[safetensors\] header length = 16: must fit in the file"),
    (lambda: posenc.add_sinusoidal(np.zeros((1, 2, 4), np.int32)), r"x.dtype = \"int32\""),
    (lambda: posenc.add_sinusoidal(np.zeros((1, 2, 4), np.float32), offset=-3), r"offset = -3: must not be negative"),
    (lambda: posenc.deberta_log_bucket([1], 2, 10), r"\[deberta\] bucket_size = 2"),
    (lambda: posenc.xlnet_relative_encoding(7, 2, 2), r"\[xlnet\] d_model = 7: must be even"),
])
def test_errors_name_parameter_value_and_rule(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_add_sinusoidal_shapes_dtypes_and_position_forms():
    x = np.random.default_rng(0).standard_normal((2, 5, 3, 16)).astype(BF16)  # [batch, seq, rows, dim]
    a = posenc.add_sinusoidal(x, offset=7)
    b = posenc.add_sinusoidal(x, offsets=[7, 7])
    c = posenc.add_sinusoidal(x, position_ids=np.tile(np.arange(7, 12), (2, 1)))
    assert a.dtype == BF16 and a.shape == x.shape
    assert a.tobytes() == b.tobytes() == c.tobytes()
    y = x.astype(np.float32)
    posenc.add_sinusoidal(y, inplace=True, offset=7)
    np.testing.assert_allclose(y, a.astype(np.float32), atol=2e-2)


def test_learned_table_add_matches_lookup():
    table = posenc.LearnedTable(np.random.default_rng(1).standard_normal((20, 8)))
    x = np.zeros((2, 6, 8), np.float32)
    ids = posenc.position_ids_from_mask([[0, 0, 1, 1, 1, 1], [1] * 6], pad_position=1)
    np.testing.assert_array_equal(table.add(x, position_ids=ids), table.lookup(ids))
    assert table.capacity(out_of_range="hierarchical") == 400
    assert table.capacity(out_of_range="clamp") is None


def test_attention_reference_shapes():
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 2, 5, 4)), rng.standard_normal((1, 2, 5, 6))
    r = posenc.reference.alibi_attention(q, k, v, causal=True, layout="bhsd")
    assert r.scores.shape == r.probs.shape == (1, 2, 3, 5) and r.output.shape == (1, 2, 3, 6)
    np.testing.assert_allclose(r.probs.sum(-1), 1.0)
    assert np.all(r.probs[..., 0, 3:] == 0)  # query 0 sits at position 2

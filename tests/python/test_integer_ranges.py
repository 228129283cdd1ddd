"""Integers that do not fit the C++ types behind every public function.

A Python int outside int64 (2**63, -2**63 - 1, 2**200) passed to any integer
parameter, alone or inside a list of positions, is a ValueError in the
library's format naming the parameter, the value and the rule, never
pybind11's "incompatible function arguments" TypeError, nor a value that
NumPy silently turns into a float, an object array or a wrapped uint64.

The second half: values that fit int64 but overflow what the parameter means
(a position offset + s past int64) are ValueError from the C++ library, and
relative positions at the ends of int64 get their T5 bucket.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import posenc
from random_llama_gguf import VOCAB, write_random_llama

TOO_LARGE = [2**63, -(2**63) - 1, 2**200, -(2**200)]
FITS = "must fit in a signed 64-bit integer"

SPEC = posenc.RopeSpec(head_dim=8)
X = np.zeros((2, 3, 2, 8), np.float32)            # apply_rope: [batch, seq, heads, head_dim]
Q = np.zeros((1, 3, 2, 8), np.float32)            # attention: q, k, v
EMB = np.zeros((1, 3, 4), np.float32)             # absolute encodings: [batch, seq, dim]
TABLE = posenc.LearnedTable(np.zeros((8, 4), np.float32))
REL = np.zeros((1, 2, 3, 4))                      # float64 references: [batch, heads, len, dim]
MASK = np.ones((1, 3), np.uint8)
T5_WEIGHTS = np.zeros((32, 2))

# (op, parameter as the message names it, call with the bad value v)
CALLS = [
    # RoPE
    ("rope", "head_dim", lambda v: posenc.RopeSpec(head_dim=v)),
    ("rope", "rotary_dim", lambda v: posenc.RopeSpec(head_dim=8, rotary_dim=v)),
    ("rope", "seq_len", lambda v: SPEC.frequencies(v)),
    ("rope", "max_position_embeddings", lambda v: SPEC.to_hf_config(v)),
    ("rope", "offset", lambda v: posenc.apply_rope(SPEC, X, offset=v, layout="bshd")),
    ("rope", "offsets[1]", lambda v: posenc.apply_rope(SPEC, X, offsets=[0, v], layout="bshd")),
    ("rope", "position_ids[0, 2]", lambda v: posenc.apply_rope(SPEC, X, position_ids=[[0, 1, v]], layout="bshd")),
    ("rope", "position_ids[2]", lambda v: posenc.apply_rope(SPEC, X, position_ids=(0, 1, v), layout="bshd")),
    ("rope", "offset", lambda v: posenc.reference.apply_rope(SPEC, X, offset=v, layout="bshd")),
    ("rope", "position_ids[1, 0]", lambda v: posenc.reference.apply_rope(SPEC, X, position_ids=[[0, 1, 2], [v, 1, 2]], layout="bshd")),
    ("permute", "heads", lambda v: posenc.permute_qk_weights(np.zeros((8, 2)), heads=v, head_dim=8)),
    ("permute", "head_dim", lambda v: posenc.permute_qk_weights(np.zeros((8, 2)), heads=1, head_dim=v)),
    ("permute", "rotary_dim", lambda v: posenc.permute_qk_weights(np.zeros((8, 2)), heads=1, head_dim=8, rotary_dim=v)),
    # attention, fast and reference
    ("attention", "q_offset", lambda v: posenc.attention(Q, Q, Q, q_offset=v, layout="bshd")),
    ("attention", "k_offset", lambda v: posenc.attention(Q, Q, Q, k_offset=v, layout="bshd")),
    ("attention", "q_offset[0]", lambda v: posenc.attention(Q, Q, Q, q_offset=[v], layout="bshd")),
    ("attention", "q_positions[0, 1]", lambda v: posenc.attention(Q, Q, Q, q_positions=[[0, v, 2]], layout="bshd")),
    ("attention", "k_positions[2]", lambda v: posenc.attention(Q, Q, Q, k_positions=[0, 1, v], layout="bshd")),
    ("attention", "kv_lengths[0]", lambda v: posenc.attention(Q, Q, Q, kv_lengths=[v], layout="bshd")),
    ("attention", "window", lambda v: posenc.attention(Q, Q, Q, window=v, layout="bshd")),
    ("attention", "sinks", lambda v: posenc.attention(Q, Q, Q, sinks=v, layout="bshd")),
    ("attention", "logn_train_length", lambda v: posenc.attention(Q, Q, Q, logn_train_length=v, layout="bshd")),
    ("attention", "q_offset", lambda v: posenc.reference.attention(Q, Q, Q, q_offset=v, layout="bshd")),
    ("attention", "k_positions[0, 0]", lambda v: posenc.reference.attention(Q, Q, Q, k_positions=[[v, 1, 2]], layout="bshd")),
    ("attention", "seq_len", lambda v: posenc.RopeEncoding(SPEC, seq_len=v)),
    ("attention", "window", lambda v: posenc.ReRopeEncoding(SPEC, window=v)),
    ("attention", "seq_len", lambda v: posenc.ReRopeEncoding(SPEC, window=4, seq_len=v)),
    ("attention", "group", lambda v: posenc.SelfExtendEncoding(SPEC, group=v, window=4)),
    ("attention", "window", lambda v: posenc.SelfExtendEncoding(SPEC, group=2, window=v)),
    ("attention", "seq_len", lambda v: posenc.SelfExtendEncoding(SPEC, 2, 4, seq_len=v)),
    ("attention", "max_distance", lambda v: posenc.T5BiasEncoding(T5_WEIGHTS, max_distance=v)),
    ("attention", "max_distance", lambda v: posenc.ShawEncoding(np.zeros((3, 8)), max_distance=v)),
    # sinusoidal and learned absolute encodings
    ("sinusoidal", "dim", lambda v: posenc.sinusoidal_inv_freq(v)),
    ("sinusoidal", "dim", lambda v: posenc.sinusoidal_table(v, 3)),
    ("sinusoidal", "positions", lambda v: posenc.sinusoidal_table(4, v)),
    ("sinusoidal", "start", lambda v: posenc.sinusoidal_table(4, 3, start=v)),
    ("sinusoidal", "offset", lambda v: posenc.add_sinusoidal(EMB, offset=v)),
    ("sinusoidal", "offsets[0]", lambda v: posenc.add_sinusoidal(EMB, offsets=[v])),
    ("sinusoidal", "position_ids[0, 1]", lambda v: posenc.add_sinusoidal(EMB, position_ids=[[0, v, 2]])),
    ("learned_table", "positions[1]", lambda v: TABLE.lookup([0, v])),
    ("learned_table", "row_offset", lambda v: TABLE.lookup([0], row_offset=v)),
    ("learned_table", "row_offset", lambda v: TABLE.capacity(row_offset=v)),
    ("learned_table", "offset", lambda v: TABLE.add(EMB, offset=v)),
    ("learned_table", "position_ids[0, 0]", lambda v: TABLE.add(EMB, position_ids=[[v, 1, 2]])),
    ("learned_table", "row_offset", lambda v: TABLE.add(EMB, row_offset=v)),
    ("positions", "pad_position", lambda v: posenc.position_ids_from_mask(MASK, pad_position=v)),
    # ALiBi, T5, XLNet, DeBERTa
    ("alibi", "heads", lambda v: posenc.alibi_slopes(v)),
    ("alibi", "head_begin", lambda v: posenc.alibi_slopes(8, head_begin=v)),
    ("alibi", "head_count", lambda v: posenc.alibi_slopes(8, head_count=v)),
    ("alibi", "heads", lambda v: posenc.alibi_bias(v, 2, 2)),
    ("alibi", "q_len", lambda v: posenc.alibi_bias(8, v, 2)),
    ("alibi", "k_len", lambda v: posenc.alibi_bias(8, 2, v)),
    ("alibi", "query_offset", lambda v: posenc.alibi_bias(8, 2, 2, query_offset=v)),
    ("alibi", "heads", lambda v: posenc.alibi_key_bias_from_mask(v, MASK)),
    ("t5_bias", "relative_position[1]", lambda v: posenc.t5_relative_bucket([0, v])),
    ("t5_bias", "relative_position", lambda v: posenc.t5_relative_bucket(v)),
    ("t5_bias", "num_buckets", lambda v: posenc.t5_relative_bucket([0], num_buckets=v)),
    ("t5_bias", "max_distance", lambda v: posenc.t5_relative_bucket([0], max_distance=v)),
    ("t5_bias", "q_len", lambda v: posenc.t5_bias(T5_WEIGHTS, v, 2)),
    ("t5_bias", "k_len", lambda v: posenc.t5_bias(T5_WEIGHTS, 2, v)),
    ("t5_bias", "query_offset", lambda v: posenc.t5_bias(T5_WEIGHTS, 2, 2, query_offset=v)),
    ("t5_bias", "num_buckets", lambda v: posenc.t5_bias(T5_WEIGHTS, 2, 2, num_buckets=v)),
    ("t5_bias", "max_distance", lambda v: posenc.t5_bias(T5_WEIGHTS, 2, 2, max_distance=v)),
    ("xlnet", "d_model", lambda v: posenc.xlnet_relative_encoding(v, 2, 2)),
    ("xlnet", "q_len", lambda v: posenc.xlnet_relative_encoding(8, v, 2)),
    ("xlnet", "k_len", lambda v: posenc.xlnet_relative_encoding(8, 2, v)),
    ("xlnet", "clamp_len", lambda v: posenc.xlnet_relative_encoding(8, 2, 2, clamp_len=v)),
    ("deberta", "relative_position[0, 0]", lambda v: posenc.deberta_log_bucket([[v]], 4, 16)),
    ("deberta", "bucket_size", lambda v: posenc.deberta_log_bucket([0], v, 16)),
    ("deberta", "max_position", lambda v: posenc.deberta_log_bucket([0], 4, v)),
    ("deberta", "q_len", lambda v: posenc.deberta_relative_positions(v, 2)),
    ("deberta", "k_len", lambda v: posenc.deberta_relative_positions(2, v)),
    ("deberta", "position_buckets", lambda v: posenc.deberta_relative_positions(2, 2, position_buckets=v)),
    ("deberta", "max_relative_positions",
     lambda v: posenc.deberta_relative_positions(2, 2, max_relative_positions=v)),
    ("attention", "query_offset", lambda v: posenc.reference.plain_attention(REL, REL, REL, query_offset=v, layout="bhsd")),
    ("attention", "query_offset", lambda v: posenc.reference.alibi_attention(REL, REL, REL, query_offset=v, layout="bhsd")),
    ("t5_bias", "max_distance", lambda v: posenc.reference.t5_attention(REL, REL, REL, np.zeros((8, 2)),
                                                                         max_distance=v, layout="bhsd")),
    ("shaw", "max_distance", lambda v: posenc.reference.shaw_attention(REL, REL, REL, max_distance=v,
                                                                        rel_k=np.zeros((3, 4)), layout="bhsd")),
    ("deberta", "position_buckets", lambda v: posenc.reference.deberta_attention(REL, REL, REL, position_buckets=v, layout="bhsd")),
    # analysis
    ("rope_dims", "original_length", lambda v: posenc.analysis.rope_dims(SPEC, v)),
    ("rope_decay", "max_distance", lambda v: posenc.analysis.rope_decay(SPEC, max_distance=v)),
    ("rope_decay", "step", lambda v: posenc.analysis.rope_decay(SPEC, step=v)),
    ("rope_decay", "samples", lambda v: posenc.analysis.rope_decay(SPEC, samples=v)),
    ("rope_decay", "distances[1]", lambda v: posenc.analysis.rope_decay(SPEC, distances=[1, v])),
    ("rope_decay", "max_distance", lambda v: posenc.analysis.log_spaced_distances(v, 10)),
    ("rope_decay", "count", lambda v: posenc.analysis.log_spaced_distances(100, v)),
    ("binary_digits", "positions", lambda v: posenc.analysis.binary_digits(v, 4)),
    ("binary_digits", "bits", lambda v: posenc.analysis.binary_digits(4, v)),
    ("rope_invariance", "max_position", lambda v: posenc.analysis.rope_invariance(SPEC, v)),
    ("rope_invariance", "step", lambda v: posenc.analysis.rope_invariance(SPEC, 64, v)),
    ("rope_scores", "positions", lambda v: posenc.analysis.rope_score_matrix(SPEC, np.ones(8), np.ones(8), v)),
    ("sinusoidal_dots", "dim", lambda v: posenc.analysis.sinusoidal_dot_matrix(v, 4)),
    ("sinusoidal_dots", "positions", lambda v: posenc.analysis.sinusoidal_dot_matrix(4, v)),
    ("sinusoidal_shift", "dim", lambda v: posenc.analysis.sinusoidal_shift_matrix(v, 1.0)),
    ("sinusoidal_shift", "first", lambda v: posenc.analysis.sinusoidal_solve_shift_matrix(4, 1.0, first=v)),
    ("sinusoidal_shift", "count", lambda v: posenc.analysis.sinusoidal_solve_shift_matrix(4, 1.0, count=v)),
    ("sinusoidal_linear_map", "positions", lambda v: posenc.analysis.sinusoidal_linear_map(4, v)),
    ("sinusoidal_linear_map", "max_shift", lambda v: posenc.analysis.sinusoidal_linear_map(4, 16, v)),
    # threads
    ("threads", "n", lambda v: posenc.set_num_threads(v)),
]


def message(op: str, name: str, value: int, rule: str = FITS) -> str:
    return "^" + re.escape(f"[{op}] {name} = {value}: {rule}") + "$"


@pytest.mark.parametrize("value", TOO_LARGE)
@pytest.mark.parametrize("op, name, call", CALLS, ids=[f"{op}.{name}" for op, name, _ in CALLS])
def test_int_outside_int64_is_a_value_error(op, name, call, value):
    with pytest.raises(ValueError, match=message(op, name, value)):
        call(value)


def test_numpy_unsigned_values_above_int64_are_not_wrapped():
    # A uint64 array (what NumPy makes of [2**63]) would wrap to negative
    # positions if cast; a NumPy uint64 scalar is an int beyond int64.
    big = np.array([0, 2**63 + 5], np.uint64)
    with pytest.raises(ValueError, match=message("rope", "offsets[1]", 2**63 + 5)):
        posenc.apply_rope(SPEC, X, offsets=big, layout="bshd")
    with pytest.raises(ValueError, match=message("attention", "kv_lengths[1]", 2**63 + 5)):
        posenc.attention(np.zeros((2, 3, 2, 8), np.float32), np.zeros((2, 3, 2, 8), np.float32),
                         np.zeros((2, 3, 2, 8), np.float32), kv_lengths=big, layout="bshd")
    with pytest.raises(ValueError, match=message("learned_table", "positions[1]", 2**63 + 5)):
        TABLE.lookup(big)
    with pytest.raises(ValueError, match=message("attention", "q_offset", 2**64 - 1)):
        posenc.attention(Q, Q, Q, q_offset=np.uint64(2**64 - 1), layout="bshd")


def test_largest_int64_values_still_reach_the_library():
    # At the edge of int64 the checks here let the value through: the
    # library's own rule answers (a position limit, not a type error).
    with pytest.raises(ValueError, match=r"^\[learned_table\] position"):
        TABLE.lookup([2**63 - 1])
    with pytest.raises(ValueError, match=r"^\[alibi\] heads = -9223372036854775808"):
        posenc.alibi_slopes(-(2**63))


@pytest.mark.parametrize("seed", [-1, 2**64, -(2**63) - 1])
def test_seed_outside_uint64(seed):
    rule = "must be in [0, 2^64 - 1] (an unsigned 64-bit integer)"
    with pytest.raises(ValueError, match=message("rope_decay", "seed", seed, rule)):
        posenc.analysis.rope_decay(SPEC, max_distance=4, samples=1, seed=seed)
    with pytest.raises(ValueError, match=message("rope_invariance", "seed", seed, rule)):
        posenc.analysis.rope_invariance(SPEC, 64, 32, seed=seed)
    # The whole uint64 range is accepted.
    posenc.analysis.rope_decay(SPEC, max_distance=4, samples=1, seed=2**64 - 1)


def test_non_integers_still_named():
    with pytest.raises(ValueError, match=r"^\[rope\] offset = 1\.5: must be an integer$"):
        posenc.apply_rope(SPEC, X, offset=1.5, layout="bshd")
    with pytest.raises(ValueError, match=r"^\[rope\] position_ids\.dtype = float64: must be an integer type"):
        posenc.apply_rope(SPEC, X, position_ids=[[0, 1, 2.5]], layout="bshd")
    with pytest.raises(ValueError, match=r"^\[binary_digits\] bits = 4\.0: must be an integer$"):
        posenc.analysis.binary_digits(4, 4.0)


# ---- the model, its perplexity and its tokenizer --------------------------------


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory) -> pathlib.Path:
    path = tmp_path_factory.mktemp("tiny-int") / "tiny.gguf"
    write_random_llama(path, tied=True)
    return path


@pytest.fixture(scope="module")
def model(tiny_path) -> posenc.DecoderModel:
    return posenc.DecoderModel(tiny_path)


@pytest.fixture(scope="module")
def tokenizer(tiny_path) -> posenc.BpeTokenizer:
    return posenc.BpeTokenizer.from_gguf(str(tiny_path))


@pytest.mark.parametrize("value", TOO_LARGE)
def test_model_int_outside_int64(model, value):
    ids = list(range(1, 17))
    for op, name, call in [
        ("model", "target_length", lambda v: model.logits(ids, target_length=v)),
        ("model", "target_length", lambda v: model.next_token_nll(ids, target_length=v)),
        ("model", "target_length", lambda v: model.resolve_method("yarn", v)),
        ("model", "n", lambda v: model.forward_flops(v)),
        ("perplexity", "context", lambda v: posenc.perplexity(model, ids, context=v)),
        ("perplexity", "stride", lambda v: posenc.perplexity(model, ids, context=8, stride=v)),
        ("perplexity", "max_windows", lambda v: posenc.perplexity(model, ids, context=8, max_windows=v)),
    ]:
        with pytest.raises(ValueError, match=message(op, name, value)):
            call(value)


@pytest.mark.parametrize("value", TOO_LARGE)
def test_token_ids_outside_int64(model, value):
    rule = "must be < 2^31 (a token id)" if value > 0 else "must be >= 0 (a token id)"
    with pytest.raises(ValueError, match=message("model", "tokens[1]", value, rule)):
        model.logits([1, value, 2])
    with pytest.raises(ValueError, match=message("perplexity", "tokens[2]", value, rule)):
        posenc.perplexity(model, [1, 2, value, 3], context=2)


@pytest.mark.parametrize("value", TOO_LARGE + [2**31, -(2**31) - 1])
def test_tokenizer_ids_outside_int32(tokenizer, value):
    rule = f"must be a token id below the vocabulary size {VOCAB}"
    with pytest.raises(ValueError, match=message("tokenizer", "ids[1]", value, rule)):
        tokenizer.decode([1, value])
    with pytest.raises(ValueError, match=message("tokenizer", "ids[0]", value, rule)):
        tokenizer.decode_bytes([value])
    with pytest.raises(ValueError, match=message("tokenizer", "id", value, rule)):
        tokenizer.token(value)
    with pytest.raises(ValueError, match=message("tokenizer", "id", value, rule)):
        tokenizer.is_special(value)


def test_tokenizer_still_decodes(tokenizer):
    ids = tokenizer.encode("Hello, world!")
    assert tokenizer.decode(ids) == "Hello, world!"
    assert tokenizer.decode(np.asarray(ids, np.int64)) == "Hello, world!"
    assert tokenizer.decode_bytes(ids) == b"Hello, world!"
    assert tokenizer.decode([]) == "" and tokenizer.decode_bytes(()) == b""
    assert tokenizer.token(ids[0]) == tokenizer.token(np.int16(ids[0]))
    with pytest.raises(ValueError, match=rf"^\[tokenizer\] id = {VOCAB}: must be a token id below"):
        tokenizer.decode([VOCAB])
    with pytest.raises(ValueError, match=r"^\[tokenizer\] ids\.ndim = 2: must be 1"):
        tokenizer.decode([[1, 2]])


# ---- values that fit int64 but overflow what they mean (the C++ library) ---------


def test_offset_at_int64_max_overflows_positions():
    # Position offset + s for s in [0, seq) would overflow int64.
    with pytest.raises(ValueError, match=r"^\[rope\] .*9223372036854775807"):
        posenc.apply_rope(SPEC, X, offset=2**63 - 1, layout="bshd")
    with pytest.raises(ValueError, match=r"^\[attention\] .*9223372036854775807"):
        posenc.attention(Q, Q, Q, q_offset=2**63 - 1, layout="bshd")
    with pytest.raises(ValueError, match=r"^\[sinusoidal\] .*9223372036854775807"):
        posenc.add_sinusoidal(EMB, offset=2**63 - 1)


@pytest.mark.parametrize("bidirectional, far_past, far_future", [(True, 15, 31), (False, 31, 0)])
def test_t5_buckets_at_the_ends_of_int64(bidirectional, far_past, far_future):
    # -(2^63) has no int64 negation: its bucket is the last one of its side,
    # like any distance far past max_distance (Hugging Face clips there).
    got = posenc.t5_relative_bucket([-(2**63), -(2**63) + 1, -(10**6), 2**63 - 1, 10**6],
                                    bidirectional=bidirectional)
    assert got.tolist() == [far_past] * 3 + [far_future] * 2

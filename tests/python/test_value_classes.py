"""The package's value classes (RopeSpec, the attention encodings,
PasskeyPrompt): one binding style, with repr, ==, hash and pickling made from
their fields (python/src/value_class.h). Each class: its repr, a pickle that
rebuilds an equal object with the same repr, == and hash by value, and a
change of any compared field makes it unequal."""

import copy
import pickle

import numpy as np
import pytest

import posenc

SPEC = posenc.RopeSpec(head_dim=32)
SPEC_REPR = "RopeSpec(theta=10000.0, head_dim=32, layout='half-split')"

# (object, its repr, an object of the same class that differs in one field)
CASES = [
    (posenc.RopeSpec(theta=10000.0, head_dim=96, rotary_dim=24, layout="interleaved"),
     "RopeSpec(theta=10000.0, head_dim=96, rotary_dim=24, layout='interleaved')",
     posenc.RopeSpec(theta=10000.0, head_dim=96, rotary_dim=32, layout="interleaved")),
    (posenc.RopeSpec(head_dim=64, scaling={"rope_type": "linear", "factor": 2.0}),
     "RopeSpec(theta=10000.0, head_dim=64, layout='half-split', scaling={'rope_type': 'linear', 'factor': 2.0})",
     posenc.RopeSpec(head_dim=64, scaling={"rope_type": "linear", "factor": 4.0})),
    (posenc.RopeEncoding(SPEC, seq_len=64), f"RopeEncoding({SPEC_REPR}, seq_len=64)", posenc.RopeEncoding(SPEC)),
    (posenc.ReRopeEncoding(SPEC, 512, leak=16), f"ReRopeEncoding({SPEC_REPR}, window=512, leak=16.0)",
     posenc.ReRopeEncoding(SPEC, 512)),
    (posenc.SelfExtendEncoding(SPEC, group=8, window=4), f"SelfExtendEncoding({SPEC_REPR}, group=8, window=4)",
     posenc.SelfExtendEncoding(SPEC, group=8, window=5)),
    (posenc.AlibiEncoding([0.5, 0.25], form="key-position"),
     "AlibiEncoding(slopes=[0.5, 0.25], form='key-position')", posenc.AlibiEncoding([0.5, 0.25])),
    (posenc.T5BiasEncoding(np.ones((32, 2)), max_distance=40),
     "T5BiasEncoding(weights=<32 buckets x 2 heads>, max_distance=40, bidirectional=True)",
     posenc.T5BiasEncoding(np.full((32, 2), 2.0), max_distance=40)),
    (posenc.ShawEncoding(np.ones((5, 8)), np.ones((5, 4)), max_distance=2, query_term=True),
     "ShawEncoding(max_distance=2, query_minus_key=False, key_term=True, query_term=True, value_term=True)",
     posenc.ShawEncoding(np.ones((5, 8)), None, max_distance=2, query_term=True)),
    (posenc.PasskeyPrompt(key="12345", prompt=[1, 2, 3], answer=[7, 8], key_position=1, depth=0.5),
     "PasskeyPrompt(key='12345', prompt=<3 tokens>, answer=[7, 8], key_position=1, depth=0.5)",
     posenc.PasskeyPrompt(key="12345", prompt=[1, 2, 4], answer=[7, 8], key_position=1, depth=0.5)),
]
IDS = [type(case[0]).__name__ for case in CASES]


@pytest.mark.parametrize("value, shown, other", CASES, ids=IDS)
def test_repr(value, shown, other):
    assert repr(value) == shown


@pytest.mark.parametrize("value, shown, other", CASES, ids=IDS)
def test_pickle_and_copy_rebuild_an_equal_object(value, shown, other):
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        rebuilt = pickle.loads(pickle.dumps(value, protocol))
        assert type(rebuilt) is type(value) and rebuilt == value and repr(rebuilt) == shown
    assert copy.deepcopy(value) == value and copy.copy(value) == value


@pytest.mark.parametrize("value, shown, other", CASES, ids=IDS)
def test_equality_and_hash_by_value(value, shown, other):
    same = pickle.loads(pickle.dumps(value))
    assert value == same and hash(value) == hash(same) and not value != same
    assert value != other and other != value
    assert value != shown and value != None  # noqa: E711  another type is never equal


def test_value_classes_are_exported_where_pickles_name_them():
    for value, _, _ in CASES:
        cls = type(value)
        module = {"RopeSpec": "posenc.rope", "PasskeyPrompt": "posenc.passkey"}.get(cls.__name__, "posenc.attention")
        assert cls.__module__ == module and getattr(posenc, cls.__name__) is cls


def test_rope_spec_max_position_embeddings_is_pickled_but_not_compared():
    spec = posenc.RopeSpec.from_hf_config({"hidden_size": 256, "num_attention_heads": 4,
                                           "max_position_embeddings": 2048})
    assert spec.max_position_embeddings == 2048 and spec == posenc.RopeSpec(head_dim=64)
    assert pickle.loads(pickle.dumps(spec)).max_position_embeddings == 2048
    spec.max_position_embeddings = 4096
    assert spec.to_hf_config()["max_position_embeddings"] == 4096
    with pytest.raises(AttributeError):
        spec.theta = 1.0
    with pytest.raises(AttributeError):
        spec.anything = 1


def test_rope_spec_arguments_use_the_one_checker():
    """RopeSpec converts its numbers as every other binding does (posenc._args):
    a str theta was float()'s own ValueError before, without the parameter."""
    with pytest.raises(ValueError, match=r"^\[rope\] theta = 'big': must be a number$"):
        posenc.RopeSpec(theta="big", head_dim=64)
    with pytest.raises(ValueError, match=r"^\[rope\] partial_rotary_factor = True: must be a number$"):
        posenc.RopeSpec(head_dim=64, partial_rotary_factor=True)

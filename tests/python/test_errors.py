"""Bad input raises ValueError naming the operation, parameter, value and rule:
"[op] parameter = value: rule" (posenc::Error from C++, or the binding's
array checks in the same format)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import posenc

X = np.zeros((2, 3, 4, 64), np.float32)


def raises(message_regex):
    return pytest.raises(ValueError, match=message_regex)


# ---- spec ------------------------------------------------------------------------


def test_odd_rotary_dim():
    with raises(r"^\[rope\] rotary_dim = 63: must be even \(dimensions rotate in pairs\)$"):
        posenc.RopeSpec(head_dim=64, rotary_dim=63)
    with raises(r"^\[rope\] head_dim = 63: must be even"):
        posenc.RopeSpec(head_dim=63)
    with raises(r"\[rope\] partial_rotary_factor = 0\.(3|29999)\d*: must give an even rotary_dim, "
                r"got int\(64 \* factor\) = 19"):
        posenc.RopeSpec(head_dim=64, partial_rotary_factor=0.3)


def test_odd_rotary_dim_from_hf_config():
    with raises(r"\[rope\] rotary_dim = 33: must be even"):
        posenc.RopeSpec.from_hf_config({"model_type": "gptj", "n_embd": 256, "n_head": 4,
                                        "rotary_dim": 33})


@pytest.mark.parametrize("factor, shown", [(0, "0"), (-1.5, "-1.5"), (float("inf"), "inf"),
                                           (float("nan"), "nan")])
def test_factor_not_positive(factor, shown):
    with raises(rf"^\[rope\] factor = {re.escape(shown)}: must be a finite number > 0$"):
        posenc.RopeSpec(head_dim=64, scaling={"rope_type": "linear", "factor": factor})
    with raises(rf"^\[rope\] factor = {re.escape(shown)}: must be a finite number > 0$"):
        posenc.RopeSpec(head_dim=64, scaling={"rope_type": "yarn", "factor": factor,
                                              "original_max_position_embeddings": 4096})


def test_factor_zero_in_hf_config():
    with raises(r"^\[rope\] factor = 0: must be a finite number > 0$"):
        posenc.RopeSpec.from_hf_config({"hidden_size": 4096, "num_attention_heads": 32,
                                        "rope_scaling": {"type": "linear", "factor": 0.0}})


def test_beta_fast_not_above_beta_slow():
    with raises(r"^\[rope\] beta_fast = 1: must be greater than beta_slow = 32$"):
        posenc.RopeSpec(head_dim=128, scaling={"rope_type": "yarn", "factor": 4,
                                               "original_max_position_embeddings": 4096,
                                               "beta_fast": 1, "beta_slow": 32})
    with raises(r"^\[rope\] beta_fast = 2: must be greater than beta_slow = 2$"):
        posenc.RopeSpec(head_dim=128, scaling={"rope_type": "yarn", "factor": 4,
                                               "original_max_position_embeddings": 4096,
                                               "beta_fast": 2, "beta_slow": 2})


def test_unknown_rope_type():
    with raises(r'^\[rope\] scaling\.rope_type = "su-per": unknown; must be one of default, none, '
                r"linear, ntk, dynamic \(with factor, or alpha\), yarn, llama3, longrope \(or su\), factors, mrope$"):
        posenc.RopeSpec(head_dim=64, scaling={"rope_type": "su-per", "factor": 2})
    # mrope is read from a config.json (its sections), with mrope's keys only.
    with raises(r'^\[hf-config\] rope_scaling\.factor = 2: unknown key for rope_type "mrope"; '
                r"known keys: mrope_section$"):
        posenc.RopeSpec.from_hf_config({"hidden_size": 4096, "num_attention_heads": 32,
                                        "rope_scaling": {"type": "mrope", "factor": 2}})
    with raises(r'^\[rope\] scaling\.rope_type = "mrope": is a model\'s 3-D positions'):
        posenc.RopeSpec(head_dim=64, scaling={"rope_type": "mrope", "mrope_section": [8, 12, 12]})


def test_missing_required_field():
    llama3 = {"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}
    with raises(r'^\[rope\] scaling\.low_freq_factor = missing: rope_type "llama3" needs it$'):
        posenc.RopeSpec(head_dim=128, scaling=llama3)
    with raises(r"^\[hf-config\] rope_scaling\.low_freq_factor = missing: "
                r'rope_type "llama3" needs it$'):
        posenc.RopeSpec.from_hf_config({"hidden_size": 4096, "num_attention_heads": 32,
                                        "rope_theta": 500000.0, "rope_scaling": llama3})
    with raises(r'^\[rope\] scaling\.original_max_position_embeddings = missing'):
        posenc.RopeSpec(head_dim=128, scaling={"rope_type": "yarn", "factor": 4})
    with raises(r'^\[rope\] scaling\.rope_type = missing'):
        posenc.RopeSpec(head_dim=128, scaling={"factor": 4})


def test_misspelt_or_mistyped_scaling_keys():
    with raises(r'^\[rope\] scaling\.factr = 2: unknown key for rope_type "linear"; '
                r"known keys: factor$"):
        posenc.RopeSpec(head_dim=64, scaling={"rope_type": "linear", "factor": 2, "factr": 2})
    with raises(r'^\[rope\] scaling\.factor = "4": must be a number$'):
        posenc.RopeSpec(head_dim=64, scaling={"rope_type": "linear", "factor": "4"})
    with raises(r'^\[rope\] scaling\.truncate = 1: must be true or false$'):
        posenc.RopeSpec(head_dim=64, scaling={"rope_type": "yarn", "factor": 4,
                                              "original_max_position_embeddings": 64,
                                              "truncate": 1})
    with raises(r'^\[rope\] short_factor\.size\(\) = 3: must equal rotary_dim / 2 = 32$'):
        posenc.RopeSpec(head_dim=64, scaling={"rope_type": "longrope", "short_factor": [1.0] * 3,
                                              "long_factor": [1.0] * 32,
                                              "original_max_position_embeddings": 4096})
    with raises(r'^\[rope\] scaling\.type = "linear": disagrees with '
                r'scaling\.rope_type = "yarn"$'):
        posenc.RopeSpec(head_dim=64, scaling={"rope_type": "yarn", "type": "linear", "factor": 2})


def test_other_spec_rules():
    with raises(r'^\[rope\] layout = "sideways": must be "interleaved" or "half-split"$'):
        posenc.RopeSpec(head_dim=64, layout="sideways")
    with raises(r"^\[rope\] theta = 1: must be a finite number > 1$"):
        posenc.RopeSpec(theta=1.0, head_dim=64)
    with raises(r"^\[rope\] head_dim = 0: must be > 0$"):
        posenc.RopeSpec()
    with raises(r"^\[rope\] rotary_dim = 128: must be in \[0, head_dim = 64\]"):
        posenc.RopeSpec(head_dim=64, rotary_dim=128)
    with raises(r"^\[rope\] rotary_dim = 32: disagrees with partial_rotary_factor"):
        posenc.RopeSpec(head_dim=64, rotary_dim=32, partial_rotary_factor=0.25)
    with raises(r"^\[rope\] seq_len = -1: must not be negative$"):
        posenc.RopeSpec(head_dim=64).frequencies(-1)
    with raises(r"^\[rope\] head_dim = 64\.5: must be an integer$"):
        posenc.RopeSpec(head_dim=64.5)


def test_bad_hf_config_sources(tmp_path):
    with raises(r"^\[hf-config\] config\.json = unparsable: must be valid JSON"):
        posenc.RopeSpec.from_hf_config("{not json")
    with raises(r"^\[hf-config\] config = .*nope\.json.*: neither a JSON object nor an existing file$"):
        posenc.RopeSpec.from_hf_config(str(tmp_path / "nope.json"))
    with raises(r"^\[hf-config\] head_dim = missing"):
        posenc.RopeSpec.from_hf_config({"rope_theta": 10000.0})
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 4096, "num_attention_heads": 32}')
    assert posenc.RopeSpec.from_hf_config(path).head_dim == 128


# ---- positions ---------------------------------------------------------------------


def test_negative_positions():
    spec = posenc.RopeSpec(head_dim=64)
    with raises(r"^\[rope\] offset = -1: must not be negative$"):
        posenc.apply_rope(spec, X, offset=-1, layout="bshd")
    with raises(r"^\[rope\] offsets\[1\] = -3: must not be negative$"):
        posenc.apply_rope(spec, X, offsets=[0, -3], layout="bshd")
    ids = np.arange(6).reshape(2, 3)
    ids[1, 2] = -7
    with raises(r"^\[rope\] position_ids\[5\] = -7: must not be negative$"):
        posenc.apply_rope(spec, X, position_ids=ids, layout="bshd")
    with raises(r"^\[rope\] offset = -1: must not be negative$"):
        posenc.reference.apply_rope(spec, X, offset=-1, layout="bshd")


def test_position_shapes_and_types():
    spec = posenc.RopeSpec(head_dim=64)
    with raises(r"^\[rope\] offsets\.size\(\) = 3: must equal batch = 2 \(one per sequence\)$"):
        posenc.apply_rope(spec, X, offsets=[0, 1, 2], layout="bshd")
    with raises(r"^\[rope\] position_ids\.shape = \(2, 4\): must be \(batch, seq\) = \(2, 3\)"):
        posenc.apply_rope(spec, X, position_ids=np.zeros((2, 4), np.int64), layout="bshd")
    with raises(r"^\[rope\] position_ids\.dtype = float64: must be an integer type"):
        posenc.apply_rope(spec, X, position_ids=np.zeros((2, 3)), layout="bshd")
    with raises(r"^\[rope\] position_ids = given: give only one of offset, offsets and "
                r"position_ids \(also got offsets\)$"):
        posenc.apply_rope(spec, X, offsets=[0, 0], position_ids=np.zeros((2, 3), np.int64), layout="bshd")
    with raises(r"^\[rope\] offset = 2\.5: must be an integer$"):
        posenc.apply_rope(spec, X, offset=2.5, layout="bshd")


# ---- tensors ---------------------------------------------------------------------


def test_shape_mismatch():
    spec = posenc.RopeSpec(head_dim=64)
    k = np.zeros((3, 3, 2, 64), np.float32)
    with raises(r"^\[rope\] operands\[1\]\.batch = 3: must equal operands\[0\]\.batch = 2$"):
        posenc.apply_rope(spec, X, k, layout="bshd")
    with raises(r"^\[rope\] operands\[1\]\.seq = 5: must equal operands\[0\]\.seq = 3$"):
        posenc.apply_rope(spec, X, np.zeros((2, 5, 2, 64), np.float32), layout="bshd")
    with raises(r"^\[rope\] operands\[0\]\.head_dim = 64: must equal the spec's head_dim = 128$"):
        posenc.apply_rope(posenc.RopeSpec(head_dim=128), X, layout="bshd")
    with raises(r"^\[rope\] operands\[0\]\.head_dim = 64: must equal the spec's head_dim = 128$"):
        posenc.reference.apply_rope(posenc.RopeSpec(head_dim=128), X, layout="bshd")


def test_wrong_dtype():
    spec = posenc.RopeSpec(head_dim=64)
    with raises(r'^\[rope\] operands\[0\]\.dtype = "float64": must be float32, float16 or '
                r"bfloat16 \(ml_dtypes\.bfloat16\)$"):
        posenc.apply_rope(spec, X.astype(np.float64), layout="bshd")
    with raises(r'^\[rope\] operands\[1\]\.dtype = "int32"'):
        posenc.apply_rope(spec, X, X.astype(np.int32), layout="bshd")
    with raises(r'^\[rope\] operands\.dtype = "f16": all operands of one call must share a dtype$'):
        posenc.apply_rope(spec, X, X.astype(np.float16), layout="bshd")


def test_wrong_ndim_and_strides():
    spec = posenc.RopeSpec(head_dim=64)
    with raises(r"^\[rope\] operands\[0\]\.ndim = 3: must be 4 \(\[batch, seq, heads, head_dim\]\)$"):
        posenc.apply_rope(spec, X[0], layout="bshd")
    wide = np.zeros((2, 3, 4, 128), np.float32)
    with raises(r"^\[rope\] operands\[0\]\.strides\[3\] = 2: the last axis must be contiguous"):
        posenc.apply_rope(spec, wide[..., ::2], layout="bshd")
    with raises(r"^\[rope\] operands\[0\]\.strides\[3\] = -1: the last axis"):
        posenc.apply_rope(spec, X[..., ::-1], layout="bshd")
    frozen = X.copy()
    frozen.setflags(write=False)
    with raises(r"^\[rope\] operands\[0\] = read-only: must be a writeable array"):
        posenc.apply_rope(spec, frozen, inplace=True, layout="bshd")
    assert posenc.apply_rope(spec, frozen, layout="bshd").flags.writeable  # not in place: fine
    with raises(r"^\[rope\] operands\[0\] = list: inplace=True needs NumPy arrays$"):
        posenc.apply_rope(spec, X.tolist(), inplace=True, layout="bshd")


def test_other_call_arguments():
    spec = posenc.RopeSpec(head_dim=64)
    with raises(r"^\[rope\] operands = \(\): give at least one"):
        posenc.apply_rope(spec, layout="bshd")
    with raises(r"^\[rope\] direction = 'sideways': must be \"forward\", \"backward\" or \"inverse\"$"):
        posenc.apply_rope(spec, X, direction="sideways", layout="bshd")
    with raises(r"^\[rope\] spec = dict: must be a posenc\.RopeSpec$"):
        posenc.apply_rope({"head_dim": 64}, X, layout="bshd")
    with raises(r"^\[rope\] inv_freq\.size\(\) = 3: must equal rotary_dim / 2 = 32$"):
        posenc.apply_rope(spec, X, frequencies=(np.ones(3), 1.0), layout="bshd")
    with raises(r"^\[rope\] attention_factor = 0: must be a finite number > 0$"):
        posenc.apply_rope(spec, X, frequencies=(np.ones(32), 0.0), layout="bshd")


def test_permute_and_threads():
    with raises(r"^\[permute\] w\.shape\[0\] = 100: must equal heads \* head_dim = 2 \* 64$"):
        posenc.permute_qk_weights(np.zeros((100, 8)), heads=2, head_dim=64)
    with raises(r"^\[permute\] rotary_dim = 33: must be even and in \(0, head_dim = 64\]$"):
        posenc.permute_qk_weights(np.zeros((128, 8)), heads=2, head_dim=64, rotary_dim=33)
    with raises(r'^\[permute\] to = "neox": must be "half-split" or "interleaved"$'):
        posenc.permute_qk_weights(np.zeros((128, 8)), heads=2, head_dim=64, to="neox")
    with raises(r"^\[threads\] n = 0: must be at least 1$"):
        posenc.set_num_threads(0)


def test_errors_are_value_errors_from_the_cpp_library():
    # posenc::Error derives from std::invalid_argument: a ValueError, not a RuntimeError.
    with pytest.raises(ValueError) as info:
        posenc.RopeSpec(head_dim=64, rotary_dim=63)
    assert type(info.value) is ValueError

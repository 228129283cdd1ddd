"""posenc's frequency tables against Hugging Face's ROPE_INIT_FUNCTIONS.

Each case is a configuration named after the model it comes from, built with
transformers' own config class, read into posenc with
RopeSpec.from_hf_config, and compared with
transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type](config, ...).

Tolerance: Hugging Face computes inv_freq in float32 (base ** (2k/d) and the
scaling arithmetic in float32 tensors), posenc in float64. float32 carries
2^-24 = 6e-8 relative per operation and the exponent 2k/d itself is rounded
when d is not a power of two, which is amplified by ln(theta) (<= 14 here):
the observed differences stay below ~5e-7, so rtol = 1e-6 (RTOL below) is the
float32 rounding of the oracle, not a posenc tolerance. The attention factor
is a Python float (double) on both sides: rtol 1e-12.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch
from transformers import GPTNeoXConfig, LlamaConfig, Phi3Config, Qwen2Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

import posenc
from rope_oracles import DEEPSEEK_V2_LITE

RTOL = 1e-6

# microsoft/Phi-3-mini-128k-instruct, config.json as updated in July 2024
# ("rope_scaling": {"type": "longrope", ...}; 48 = head_dim 96 / 2 factors each).
# The lists were cross-checked against a Microsoft LongRoPE evaluation script
# that carries the same table and a llama.cpp GGUF dump of the model
# (phi3.rope.scaling.attn_factor = 1.190238118171692, which test_phi3 checks).
PHI3_MINI_128K_LONG_FACTOR = [
    1.0700000524520874, 1.1200000047683716, 1.149999976158142, 1.4199999570846558,
    1.5699999332427979, 1.7999999523162842, 2.129999876022339, 2.129999876022339,
    3.009999990463257, 5.910000324249268, 6.950000286102295, 9.070000648498535,
    9.930000305175781, 10.710000038146973, 11.130000114440918, 14.609999656677246,
    15.409998893737793, 19.809999465942383, 37.279998779296875, 38.279998779296875,
    38.599998474121094, 40.12000274658203, 46.20000457763672, 50.940006256103516,
    53.66000747680664, 54.9373893737793, 56.89738845825195, 57.28738784790039,
    59.98738479614258, 60.86738586425781, 60.887386322021484, 61.71739196777344,
    62.91739273071289, 62.957393646240234, 63.41739273071289, 63.8173942565918,
    63.83739471435547, 63.897396087646484, 63.93739700317383, 64.06739807128906,
    64.11434936523438, 64.12435150146484, 64.15435028076172, 64.19435119628906,
    64.24435424804688, 64.57435607910156, 64.69000244140625, 64.76000213623047,
]
PHI3_MINI_128K_SHORT_FACTOR = [
    1.1, 1.1, 1.1, 1.3000000000000003, 1.3500000000000003, 1.3500000000000003,
    1.4000000000000004, 1.5500000000000005, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
    2.000000000000001, 2.000000000000001, 2.000000000000001, 2.0500000000000007,
    2.0500000000000007, 2.0500000000000007, 2.0500000000000007, 2.0500000000000007,
    2.0500000000000007, 2.1000000000000005, 2.1000000000000005, 2.1500000000000004,
    2.25, 2.25, 2.25, 2.25, 2.25, 2.3999999999999995, 2.4499999999999993,
    2.499999999999999, 2.6999999999999984, 2.6999999999999984, 2.7499999999999982,
    2.799999999999998, 2.8999999999999977, 3.049999999999997,
]


def llama2_7b(**overrides):
    kw = dict(hidden_size=4096, num_attention_heads=32, num_key_value_heads=32,
              max_position_embeddings=4096, rope_theta=10000.0)
    kw.update(overrides)
    return LlamaConfig(**kw)


def llama31_8b():
    return LlamaConfig(hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                       max_position_embeddings=131072, rope_theta=500000.0,
                       rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0,
                                     "original_max_position_embeddings": 8192})


def qwen2_7b_yarn():
    # Qwen2-7B-Instruct's documented long-context setting (YaRN x4 over 32K).
    return Qwen2Config(hidden_size=3584, num_attention_heads=28, num_key_value_heads=4,
                       max_position_embeddings=32768, rope_theta=1000000.0,
                       rope_scaling={"type": "yarn", "factor": 4.0,
                                     "original_max_position_embeddings": 32768})


def phi3_mini_128k():
    return Phi3Config(hidden_size=3072, num_attention_heads=32, num_key_value_heads=32,
                      max_position_embeddings=131072, original_max_position_embeddings=4096,
                      rope_theta=10000.0,
                      rope_scaling={"type": "longrope",
                                    "short_factor": PHI3_MINI_128K_SHORT_FACTOR,
                                    "long_factor": PHI3_MINI_128K_LONG_FACTOR})


def gpt_neox_20b():
    return GPTNeoXConfig(hidden_size=6144, num_attention_heads=64, rotary_pct=0.25,
                         rotary_emb_base=10000, max_position_embeddings=2048)


def vicuna_13b_16k():
    # Llama-2-13B with linear position interpolation x4 (lmsys vicuna-13b-v1.5-16k).
    return LlamaConfig(hidden_size=5120, num_attention_heads=40, num_key_value_heads=40,
                       max_position_embeddings=4096, rope_theta=10000.0,
                       rope_scaling={"type": "linear", "factor": 4.0})


def llama2_7b_dynamic():
    return llama2_7b(rope_scaling={"type": "dynamic", "factor": 2.0})


def hf_frequencies(config, seq_len=None):
    """(inv_freq float64, attention_factor) from transformers' own init function."""
    scaling = config.rope_scaling or {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS[rope_type](config, torch.device("cpu"),
                                                                seq_len=seq_len)
    assert inv_freq.dtype == torch.float32  # what the RTOL above is about
    return inv_freq.double().numpy(), float(attention_factor)


def check_against_hf(config, seq_len=None, expect_type=None, expect_rotary_dim=None):
    spec = posenc.RopeSpec.from_hf_config(config)
    if expect_type is not None:
        assert spec.scaling_type == expect_type
    if expect_rotary_dim is not None:
        assert spec.rotary_dim == expect_rotary_dim
    inv_freq, attention_factor = spec.frequencies(seq_len or 0)
    hf_inv_freq, hf_attention_factor = hf_frequencies(config, seq_len)
    assert inv_freq.dtype == np.float64 and inv_freq.shape == hf_inv_freq.shape
    np.testing.assert_allclose(inv_freq, hf_inv_freq, rtol=RTOL, atol=0)
    assert attention_factor == pytest.approx(hf_attention_factor, rel=1e-12)
    # A spec rebuilt from its own scaling dict and from to_hf_config is the same spec.
    rebuilt = posenc.RopeSpec(theta=spec.theta, head_dim=spec.head_dim, rotary_dim=spec.rotary_dim,
                              layout=spec.layout, scaling=spec.scaling)
    assert rebuilt == spec
    assert posenc.RopeSpec.from_hf_config(spec.to_hf_config()) == spec
    return spec, float(np.max(np.abs(inv_freq / hf_inv_freq - 1.0)))


def test_llama2_7b_default():
    spec, rel = check_against_hf(llama2_7b(), expect_type="none", expect_rotary_dim=128)
    assert spec.layout == "half-split" and spec.theta == 10000.0 and spec.pairs == 64


def test_llama31_8b_llama3():
    check_against_hf(llama31_8b(), expect_type="llama3", expect_rotary_dim=128)


def test_llama31_8b_matches_a_directly_built_spec():
    direct = posenc.RopeSpec(theta=500000.0, head_dim=128, scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192})
    assert direct == posenc.RopeSpec.from_hf_config(llama31_8b())


def test_qwen2_7b_yarn():
    # transformers 4.49 takes YaRN's original length from max_position_embeddings,
    # posenc from rope_scaling.original_max_position_embeddings (newer transformers
    # and vLLM do the same); Qwen2-7B sets both to 32768, so they agree here.
    spec, _ = check_against_hf(qwen2_7b_yarn(), expect_type="yarn", expect_rotary_dim=128)
    _, attention_factor = spec.frequencies()
    assert attention_factor == pytest.approx(0.1 * math.log(4.0) + 1.0, rel=1e-15)


@pytest.mark.parametrize("seq_len", [1, 4096, 4097, 131072], ids=lambda n: f"seq{n}")
def test_phi3_mini_128k_longrope(seq_len):
    # At most original_max_position_embeddings (4096) tokens: short factors;
    # beyond: long factors. Same rule in HF (seq_len > original) and posenc.
    spec, _ = check_against_hf(phi3_mini_128k(), seq_len=seq_len, expect_type="longrope",
                               expect_rotary_dim=96)
    inv_freq, attention_factor = spec.frequencies(seq_len)
    plain = 1.0 / 10000.0 ** (np.arange(0, 96, 2) / 96.0)
    factors = PHI3_MINI_128K_LONG_FACTOR if seq_len > 4096 else PHI3_MINI_128K_SHORT_FACTOR
    np.testing.assert_allclose(inv_freq, plain / np.array(factors), rtol=1e-14)
    # factor = 131072 / 4096 = 32: sqrt(1 + ln 32 / ln 4096), as llama.cpp's GGUF stores it.
    assert attention_factor == pytest.approx(1.190238118171692, rel=1e-7)


def test_gpt_neox_20b_partial_rotary():
    spec, _ = check_against_hf(gpt_neox_20b(), expect_type="none", expect_rotary_dim=24)
    assert spec.head_dim == 96 and spec.partial_rotary_factor == 0.25


def test_linear_vicuna_13b_16k():
    spec, _ = check_against_hf(vicuna_13b_16k(), expect_type="linear", expect_rotary_dim=128)
    np.testing.assert_allclose(spec.frequencies()[0],
                               posenc.RopeSpec(head_dim=128).frequencies()[0] / 4.0, rtol=1e-15)


@pytest.mark.parametrize("seq_len", [None, 2048, 4096, 4097, 8192, 16384],
                         ids=lambda n: f"seq{n}")
def test_dynamic_ntk_llama2_7b(seq_len):
    # At or below max_position_embeddings (4096) dynamic NTK is the plain
    # table (HF resets to it); above, the base grows with the current length.
    spec, _ = check_against_hf(llama2_7b_dynamic(), seq_len=seq_len, expect_type="dynamic")
    inv_freq, _ = spec.frequencies(seq_len or 0)
    plain, _ = posenc.RopeSpec(head_dim=128).frequencies()
    if seq_len is None or seq_len <= 4096:
        np.testing.assert_array_equal(inv_freq, plain)
    else:
        assert np.all(inv_freq[1:] < plain[1:])  # slower everywhere but pair 0


def test_dynamic_ntk_is_a_pure_function_of_the_length():
    # transformers#25306: a long prompt must not leak its base into a later short one.
    spec = posenc.RopeSpec.from_hf_config(llama2_7b_dynamic())
    short_before = spec.frequencies(100)[0]
    spec.frequencies(100000)
    np.testing.assert_array_equal(spec.frequencies(100)[0], short_before)


def test_observed_float32_difference_is_documented():
    """The largest relative difference over all cases above stays well within RTOL."""
    worst = 0.0
    for config, seq_len in [(llama2_7b(), None), (llama31_8b(), None), (qwen2_7b_yarn(), None),
                            (phi3_mini_128k(), 1), (phi3_mini_128k(), 131072),
                            (gpt_neox_20b(), None), (vicuna_13b_16k(), None),
                            (llama2_7b_dynamic(), 16384)]:
        worst = max(worst, check_against_hf(config, seq_len)[1])
    print(f"largest |posenc/HF - 1| over the HF frequency cases: {worst:.2e}")
    assert worst < RTOL


# ---- DeepSeek-V2: YaRN with mscale / mscale_all_dim ------------------------
#
# transformers 4.49 has no DeepSeek-V2 and its YaRN ignores mscale and
# mscale_all_dim. The oracle is DeepSeek-V2's own published definition, the
# remote code shipped with the checkpoints (deepseek-ai/DeepSeek-V2,
# modeling_deepseek.py: yarn_find_correction_dim, yarn_find_correction_range,
# yarn_get_mscale, yarn_linear_ramp_mask and DeepseekV2YarnRotaryEmbedding.
# _set_cos_sin_cache, which multiplies cos and sin by
# yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim)).
# Reimplemented below in torch float32 from that definition.

def deepseek_v2_yarn_oracle(dim, base, factor, original, beta_fast, beta_slow, mscale,
                            mscale_all_dim):
    def get_mscale(scale, m):
        # 1 at or below factor 1, else 1 + 0.1 m ln(scale).
        return 1.0 if scale <= 1 else 1.0 + 0.1 * m * math.log(scale)

    def pair_of(rotations):
        # The (fractional) pair index whose wavelength fits `rotations` turns
        # into the original context.
        return dim * math.log(original / (2 * math.pi * rotations)) / (2 * math.log(base))

    low = max(math.floor(pair_of(beta_fast)), 0)
    high = min(math.ceil(pair_of(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    pair = torch.arange(dim // 2, dtype=torch.float32)
    ramp = torch.clamp((pair - low) / (high - low), 0.0, 1.0)
    keep_original = 1.0 - ramp  # 1: fast pairs extrapolate, 0: slow pairs interpolate
    exponent = torch.arange(0, dim, 2, dtype=torch.float32) / dim
    extrapolated = 1.0 / base ** exponent
    interpolated = 1.0 / (factor * base ** exponent)
    inv_freq = interpolated * (1.0 - keep_original) + extrapolated * keep_original
    return inv_freq.double().numpy(), get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)


@pytest.mark.parametrize("mscale, mscale_all_dim", [(0.707, 0.707), (1.0, 0.707), (0.707, 1.0)],
                         ids=["deepseek-v2-lite", "ratio-1.0-0.707", "ratio-0.707-1.0"])
def test_deepseek_v2_yarn_mscale(mscale, mscale_all_dim):
    scaling = dict(DEEPSEEK_V2_LITE["rope_scaling"], mscale=mscale, mscale_all_dim=mscale_all_dim)
    spec = posenc.RopeSpec.from_hf_config(dict(DEEPSEEK_V2_LITE, rope_scaling=scaling))
    assert spec.head_dim == 64 and spec.rotary_dim == 64
    assert spec.layout == "interleaved"  # DeepSeek rotates (2k, 2k+1) pairs
    inv_freq, attention_factor = spec.frequencies()
    oracle_inv_freq, oracle_attention_factor = deepseek_v2_yarn_oracle(
        64, 10000.0, 40.0, 4096, 32, 1, mscale, mscale_all_dim)
    np.testing.assert_allclose(inv_freq, oracle_inv_freq, rtol=RTOL, atol=0)
    assert attention_factor == pytest.approx(oracle_attention_factor, rel=1e-12)
    if mscale == mscale_all_dim:
        assert attention_factor == 1.0  # the published configs: RoPE leaves the scale alone


def test_deepseek_v2_mscale_without_mscale_all_dim_follows_hugging_face():
    """A documented difference between oracles, not a bug: with mscale but no
    (or zero) mscale_all_dim, DeepSeek's code divides by yarn_get_mscale(s, 0)
    = 1 and scales by 1 + 0.1 mscale ln s, while Hugging Face's later YaRN
    (and vLLM's generic YaRN) use the ratio only when both are non-zero and
    otherwise 1 + 0.1 ln s. posenc follows Hugging Face (rope_spec.h); no
    published DeepSeek config is affected (they set both)."""
    spec = posenc.RopeSpec(head_dim=64, scaling={
        "rope_type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
        "mscale": 0.707})
    _, attention_factor = spec.frequencies()
    assert attention_factor == pytest.approx(1.0 + 0.1 * math.log(40.0), rel=1e-15)
    _, deepseek = deepseek_v2_yarn_oracle(64, 10000.0, 40.0, 4096, 32, 1, 0.707, 0.0)
    assert deepseek == pytest.approx(1.0 + 0.0707 * math.log(40.0), rel=1e-15)


def test_yarn_explicit_attention_factor_overrides_mscale():
    spec = posenc.RopeSpec(head_dim=64, scaling={
        "rope_type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
        "mscale": 1.0, "mscale_all_dim": 0.707, "attention_factor": 1.25})
    assert spec.frequencies()[1] == 1.25


def test_model_keys_in_rope_scaling_are_refused_where_hugging_face_ignores_them():
    """transformers 4.49 reads rope_theta from the top of config.json only: a
    rope_theta in rope_scaling draws "Unrecognized keys" and changes nothing,
    as does a misspelt original_max_position_embeddings (YaRN then counts
    from max_position_embeddings). posenc refuses both keys by name rather
    than read a value Hugging Face does not use, or drop it unsaid."""
    warnings = []
    rope_logger = logging.getLogger("transformers.modeling_rope_utils")  # does not propagate to pytest's
    handler = logging.Handler()
    handler.emit = lambda record: warnings.append(record.getMessage())
    rope_logger.addHandler(handler)
    try:
        config = llama2_7b(rope_scaling={"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6})
    finally:
        rope_logger.removeHandler(handler)
    assert any("Unrecognized keys in `rope_scaling`" in w and "rope_theta" in w for w in warnings), warnings
    np.testing.assert_allclose(hf_frequencies(config)[0],
                               hf_frequencies(llama2_7b(rope_scaling={"rope_type": "linear",
                                                                      "factor": 4.0}))[0], rtol=0)
    with pytest.raises(ValueError, match=r'^\[hf-config\] rope_scaling\.rope_theta = 1000000\.0: unknown key '
                                         r'for rope_type "linear"; known keys: factor \(rope_theta is the model'):
        posenc.RopeSpec.from_hf_config(config)
    with pytest.raises(ValueError, match=r'^\[rope\] scaling\.rope_theta = 1000000\.0: unknown key'):
        posenc.RopeSpec(head_dim=128, scaling={"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6})
    misspelt = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embedding": 4096}
    with pytest.raises(ValueError, match=r'^\[rope\] scaling\.original_max_position_embedding = 4096: unknown '
                                         r'key for rope_type "yarn"; known keys: .*original_max_position_embeddings'):
        posenc.RopeSpec(head_dim=128, scaling=misspelt)

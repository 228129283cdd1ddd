"""Config variants of issue 51 against outside oracles.

* LongRoPE's "su" alias (Phi-3's first name for it: transformers'
  Phi3Config renames it) and PhiMoE's short_mscale/long_mscale, against
  ROPE_INIT_FUNCTIONS["longrope"] and PhimoeRotaryEmbedding;
* Qwen2-VL's multimodal RoPE against Qwen2VLRotaryEmbedding and
  apply_multimodal_rotary_pos_emb;
* ``dynamic`` with ``alpha`` (Hunyuan's NTK-alpha base theta alpha^(d/(d-2)))
  and DeepSeek-V2/V3's softmax scale against their published formulas
  (transformers 4.49 implements neither);
* Llama 4's NoPE layers against Llama4TextConfig's rule, restated from it.

Tolerances: Hugging Face forms angles in float32 (RTOL 1e-6 on inv_freq, as
in test_rope_frequencies_hf.py); M-RoPE outputs of a float32 rotation at
positions below 100 within 2e-6 absolute (|x| <= 1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import PhimoeConfig, Phi3Config, Qwen2VLConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.phimoe.modeling_phimoe import PhimoeRotaryEmbedding
from transformers.models.qwen2_vl.modeling_qwen2_vl import (Qwen2VLRotaryEmbedding,
                                                            apply_multimodal_rotary_pos_emb)

import posenc
from test_rope_frequencies_hf import PHI3_MINI_128K_LONG_FACTOR, PHI3_MINI_128K_SHORT_FACTOR

RTOL = 1e-6


def phi3_mini_128k(rope_type):
    return {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32,
            "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
            "rope_theta": 10000.0,
            "rope_scaling": {"type": rope_type, "short_factor": PHI3_MINI_128K_SHORT_FACTOR,
                             "long_factor": PHI3_MINI_128K_LONG_FACTOR}}


@pytest.mark.parametrize("seq_len", [4096, 4097])
def test_su_is_longrope(seq_len):
    raw = phi3_mini_128k("su")
    spec = posenc.RopeSpec.from_hf_config(raw)
    assert spec.scaling_type == "longrope"
    assert spec == posenc.RopeSpec.from_hf_config(phi3_mini_128k("longrope"))
    config = Phi3Config(**{k: v for k, v in phi3_mini_128k("su").items() if k != "model_type"})
    assert config.rope_scaling["type"] == "longrope"  # transformers renames it too
    hf_inv_freq, hf_attention = ROPE_INIT_FUNCTIONS["longrope"](config, torch.device("cpu"), seq_len=seq_len)
    inv_freq, attention = spec.frequencies(seq_len)
    np.testing.assert_allclose(inv_freq, hf_inv_freq.double().numpy(), rtol=RTOL, atol=0)
    assert attention == pytest.approx(hf_attention, rel=1e-12)


def phimoe_scaling():
    factors = [1.0 + 0.1 * i for i in range(32)]
    return {"type": "longrope", "short_factor": factors, "long_factor": [2 * f for f in factors],
            "short_mscale": 1.243, "long_mscale": 1.5, "original_max_position_embeddings": 2048}


@pytest.mark.parametrize("seq_len", [100, 2048, 2049, 3000])
def test_phimoe_short_and_long_mscale(seq_len):
    kw = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=8192,
              original_max_position_embeddings=2048, rope_theta=10000.0)
    config = PhimoeConfig(**kw, rope_scaling=phimoe_scaling())
    cos, sin = PhimoeRotaryEmbedding(config).forward(torch.zeros(1), seq_len=seq_len)
    spec = posenc.RopeSpec.from_hf_config(dict(kw, model_type="phimoe", rope_scaling=phimoe_scaling()))
    inv_freq, attention = spec.frequencies(seq_len)
    assert attention == (1.5 if seq_len > 2048 else 1.243)
    angles = np.arange(seq_len)[:, None] * inv_freq[None, :]
    expected_cos = np.concatenate([np.cos(angles), np.cos(angles)], axis=1) * attention
    expected_sin = np.concatenate([np.sin(angles), np.sin(angles)], axis=1) * attention
    # float32 angles up to ~3000 rad: 3000 * 2^-24 of absolute error.
    np.testing.assert_allclose(cos.double().numpy(), expected_cos, rtol=0, atol=5e-4)
    np.testing.assert_allclose(sin.double().numpy(), expected_sin, rtol=0, atol=5e-4)
    # and the mscale is the factor of the whole table, exactly.
    assert float(cos[0, 0]) == pytest.approx(attention, rel=1e-7)


def qwen2vl_spec_and_rotary(sections):
    kw = dict(hidden_size=256, num_attention_heads=2, num_key_value_heads=2, rope_theta=10000.0)
    scaling = {"type": "mrope", "mrope_section": sections}
    spec = posenc.RopeSpec.from_hf_config(dict(kw, model_type="qwen2_vl", rope_scaling=dict(scaling)))
    return spec, Qwen2VLRotaryEmbedding(config=Qwen2VLConfig(**kw, rope_scaling=dict(scaling)))


@pytest.mark.parametrize("reference", [False, True], ids=["kernel", "reference"])
def test_mrope_matches_apply_multimodal_rotary_pos_emb(rng, reference):
    sections = [16, 24, 24]  # Qwen2-VL's, of head_dim 128
    spec, rotary = qwen2vl_spec_and_rotary(sections)
    assert spec.mrope_section == sections
    batch, seq, heads, dim = 2, 9, 2, 128
    # An image of 2 x 3 patches after 2 text tokens, then text: Qwen2-VL's
    # get_rope_index pattern (temporal, height, width per token).
    t = [0, 1, 2, 2, 2, 2, 2, 2, 5]
    h = [0, 1, 2, 2, 2, 3, 3, 3, 5]
    w = [0, 1, 2, 3, 4, 2, 3, 4, 5]
    positions = np.array([[t, t[::-1]], [h, h], [w, w]], dtype=np.int64)  # (3, batch, seq)
    q = rng.uniform(-1, 1, (batch, seq, heads, dim)).astype(np.float32)
    k = rng.uniform(-1, 1, (batch, seq, heads, dim)).astype(np.float32)
    cos, sin = rotary(torch.zeros(1, dtype=torch.float32), torch.from_numpy(positions))
    hf_q, hf_k = apply_multimodal_rotary_pos_emb(torch.from_numpy(q).transpose(1, 2),
                                                 torch.from_numpy(k).transpose(1, 2), cos, sin, sections)
    apply = posenc._posenc.reference.apply_mrope if reference else posenc.rope.apply_mrope
    got_q, got_k = apply(spec, q, k, positions=positions)
    np.testing.assert_allclose(got_q, hf_q.transpose(1, 2).numpy(), rtol=0, atol=2e-6)
    np.testing.assert_allclose(got_k, hf_k.transpose(1, 2).numpy(), rtol=0, atol=2e-6)
    # Text tokens (three equal positions) are plain RoPE.
    text = np.stack([np.arange(seq)] * 3)
    np.testing.assert_allclose(apply(spec, q, positions=text),
                               posenc.apply_rope(spec, q, offset=0, layout="bshd"), rtol=0, atol=1e-6)


def test_mrope_errors():
    with pytest.raises(ValueError, match=r"rope_scaling\.mrope_section = \[16, 24, 20\]: must sum to "
                                         r"rotary_dim / 2 = 64 \(pairs\), not 60"):
        qwen2vl_spec_and_rotary([16, 24, 20])
    spec, _ = qwen2vl_spec_and_rotary([16, 24, 24])
    x = np.zeros((1, 4, 1, 128), np.float32)
    with pytest.raises(ValueError, match=r"positions\.shape = \(2, 4\): must be \(3, seq\)"):
        posenc.rope.apply_mrope(spec, x, positions=np.zeros((2, 4), np.int64))
    with pytest.raises(ValueError, match=r"spec\.mrope_section = \[\]: must be set"):
        posenc.rope.apply_mrope(posenc.RopeSpec(head_dim=128), x, positions=np.zeros((3, 4), np.int64))


def test_dynamic_alpha_is_hunyuans_ntk_alpha_base():
    """Hunyuan's modeling code: base = rope_theta * alpha ** (dim / (dim - 2))."""
    config = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 10000.0,
              "max_position_embeddings": 32768,
              "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}}
    spec = posenc.RopeSpec.from_hf_config(config)
    dim = 128
    base = 10000.0 * 1000.0 ** (dim / (dim - 2))
    expected = 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    for seq_len in (0, 1000, 100000):  # fixed: no length in it
        inv_freq, attention = spec.frequencies(seq_len)
        np.testing.assert_allclose(inv_freq, expected, rtol=1e-14, atol=0)
        assert attention == 1.0
    for alpha in (0, -1.5):
        bad = dict(config, rope_scaling={"type": "dynamic", "alpha": alpha})
        with pytest.raises(ValueError, match=rf"rope_scaling\.alpha = {alpha:g}: must be a finite number > 0"):
            posenc.RopeSpec.from_hf_config(bad)


def yarn_get_mscale(scale=1, mscale=1):
    """DeepSeek-V2's modeling_deepseek.py, verbatim."""
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


@pytest.mark.parametrize("name, nope, rope, factor, mscale_all_dim", [
    ("deepseek-v2-lite", 128, 64, 40, 0.707), ("deepseek-v3", 128, 64, 40, 1.0)])
def test_deepseek_softmax_scale(name, nope, rope, factor, mscale_all_dim):
    """DeepseekV2Attention: softmax_scale = q_head_dim ** -0.5, times
    yarn_get_mscale(factor, mscale_all_dim) ** 2 when mscale_all_dim is set."""
    config = {"model_type": "deepseek_v3" if name == "deepseek-v3" else "deepseek_v2",
              "hidden_size": 2048, "num_attention_heads": 16, "qk_nope_head_dim": nope,
              "qk_rope_head_dim": rope, "max_position_embeddings": 163840, "rope_theta": 10000,
              "rope_scaling": {"type": "yarn", "factor": factor, "original_max_position_embeddings": 4096,
                               "beta_fast": 32, "beta_slow": 1, "mscale": mscale_all_dim,
                               "mscale_all_dim": mscale_all_dim}}
    spec = posenc.RopeSpec.from_hf_config(config)
    mscale = yarn_get_mscale(factor, mscale_all_dim)
    assert spec.softmax_scale == pytest.approx((nope + rope) ** -0.5 * mscale * mscale, rel=1e-15)
    no_all_dim = dict(config["rope_scaling"])
    del no_all_dim["mscale_all_dim"]
    assert posenc.RopeSpec.from_hf_config(dict(config, rope_scaling=no_all_dim)).softmax_scale is None


def test_llama4_nope_layers():
    """Llama4TextConfig: no_rope_layers[i] = int((i + 1) % no_rope_layer_interval != 0)
    unless given (1: the layer uses RoPE)."""
    base = {"model_type": "llama4_text", "hidden_size": 512, "num_attention_heads": 4,
            "num_hidden_layers": 12, "rope_theta": 500000.0}
    for interval in (4, 3):
        spec = posenc.RopeSpec.from_hf_config(dict(base, no_rope_layer_interval=interval))
        assert spec.layer_positions == ["rope" if (i + 1) % interval != 0 else "nope" for i in range(12)]
    given = [1, 1, 0] * 4
    spec = posenc.RopeSpec.from_hf_config(dict(base, no_rope_layers=given))
    assert spec.layer_positions == ["rope" if g else "nope" for g in given]
    assert posenc.RopeSpec.from_hf_config({"hidden_size": 512, "num_attention_heads": 4}).layer_positions == []


def test_unknown_rope_type_lists_the_known_ones():
    with pytest.raises(ValueError, match=r'rope_type = "yarn2": unknown; must be one of default, none, linear, '
                                         r"ntk, dynamic \(with factor, or alpha\), yarn, llama3, longrope \(or su\), "
                                         r"factors, mrope$"):
        posenc.RopeSpec(head_dim=64, scaling={"rope_type": "yarn2", "factor": 2})

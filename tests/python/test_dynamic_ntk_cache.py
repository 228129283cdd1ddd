"""scripts/dynamic-ntk-cache (issue 51, item 5c) measures dynamic NTK under
Hugging Face's cache against one base for the whole window. What its numbers
rest on, checked here on the random-weight llama (random_llama_gguf.py):

- feeding a window in chunks or one token a step through a DynamicCache
  scores what one forward pass scores (at a fixed base), so the behaviours
  differ by their frequencies alone;
- "consistent" is HF's dynamic NTK at the window's length: plain RoPE at the
  base dynamic_base() gives HF's ROPE_INIT_FUNCTIONS["dynamic"] inv_freq;
- "hf-cached" is HF's own dynamic rotary embedding: after a decode step at
  position t it holds the inv_freq of seq_len t + 1.
"""

from __future__ import annotations

import pathlib
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader

import numpy as np
import pytest
import torch
from transformers import DynamicCache, LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

import posenc.hf
from random_llama_gguf import VOCAB, write_random_llama

ROOT = pathlib.Path(__file__).resolve().parents[2]


def script():
    loader = SourceFileLoader("dynamic_ntk_cache", str(ROOT / "scripts" / "dynamic-ntk-cache"))
    module = module_from_spec(spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gguf(tmp_path_factory):
    return write_random_llama(tmp_path_factory.mktemp("dyn") / "random-llama.gguf", context_length=32)


def test_chunks_and_steps_score_what_one_pass_scores(gguf):
    m = script()
    model = posenc.hf.from_gguf(gguf, rope_theta=30000.0)
    model.config._attn_implementation = "eager"
    ids = np.random.default_rng(0).integers(0, VOCAB, 48)
    one_pass = posenc.hf.nll_by_position(model, ids, context=48)[0]
    chunked = m.chunked_nll(model, ids, DynamicCache(), 0, 47, 16)
    cache = DynamicCache()
    stepped = np.concatenate([m.chunked_nll(model, ids, cache, 0, 32, 8), m.chunked_nll(model, ids, cache, 32, 47, 1)])
    np.testing.assert_allclose(chunked, one_pass, atol=1e-4, rtol=0)
    np.testing.assert_allclose(stepped, one_pass, atol=1e-4, rtol=0)


@pytest.mark.parametrize("seq_len", [8193, 9216, 16384])
def test_consistent_base_is_hugging_face_dynamic(seq_len):
    m = script()
    config = LlamaConfig(hidden_size=576, num_attention_heads=9, max_position_embeddings=8192, rope_theta=100000.0,
                         rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    hf, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, torch.device("cpu"), seq_len=seq_len)
    base = m.dynamic_base(100000.0, 2.0, seq_len, 8192, 64)
    plain = 1.0 / base ** (np.arange(0, 64, 2) / 64)
    np.testing.assert_allclose(plain, hf.double().numpy(), rtol=1e-6, atol=0)


def test_hf_cached_steps_recompute_the_frequencies(gguf):
    m = script()
    model = posenc.hf.from_gguf(gguf, max_position_embeddings=32, rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    model.config._attn_implementation = "eager"
    ids = np.random.default_rng(1).integers(0, VOCAB, 40)
    cache = DynamicCache()
    m.chunked_nll(model, ids, cache, 0, 32, 16)
    rotary = model.model.rotary_emb
    theta, dim = float(model.config.rope_theta), int(model.config.head_dim)
    np.testing.assert_allclose(rotary.inv_freq.double().numpy(), 1.0 / theta ** (np.arange(0, dim, 2) / dim), rtol=1e-6)
    for t in range(32, 36):
        m.chunked_nll(model, ids, cache, t, t + 1, 1)
        base = m.dynamic_base(theta, 2.0, t + 1, 32, dim)
        np.testing.assert_allclose(rotary.inv_freq.double().numpy(), 1.0 / base ** (np.arange(0, dim, 2) / dim),
                                   rtol=1e-6)


def test_posenc_keys_as_written_is_hugging_face_cached(gguf):
    """posenc's decode pass with the keys kept as written (posenc ppl --decode
    --keys-as-written) against Hugging Face's own: the dynamic NTK model fed a
    token at a time through a DynamicCache, its rotary embedding recomputing
    inv_freq every step and the cached keys left as they were. And the
    default (every key at the window's one base) against HF at that base."""
    m = script()
    ids = np.random.default_rng(2).integers(0, VOCAB, 64)
    hf_dynamic = posenc.hf.from_gguf(gguf, max_position_embeddings=32,
                                     rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    hf_dynamic.config._attn_implementation = "eager"
    hf_cached = m.chunked_nll(hf_dynamic, ids, DynamicCache(), 0, 63, 1)
    theta, dim = float(hf_dynamic.config.rope_theta), int(hf_dynamic.config.head_dim)
    hf_one_base = posenc.hf.from_gguf(gguf, rope_theta=m.dynamic_base(theta, 2.0, 64, 32, dim))
    hf_one_base.config._attn_implementation = "eager"
    hf_consistent = m.chunked_nll(hf_one_base, ids, DynamicCache(), 0, 63, 16)

    model = posenc.DecoderModel(gguf)
    as_written = posenc.perplexity(model, ids, context=64, method="dynamic-ntk:factor=2", decode=True,
                                   keys_as_written=True)["position_nll"]
    consistent = posenc.perplexity(model, ids, context=64, method="dynamic-ntk:factor=2",
                                   decode=True)["position_nll"]
    np.testing.assert_allclose(as_written, hf_cached, atol=2e-4, rtol=0)
    np.testing.assert_allclose(consistent, hf_consistent, atol=2e-4, rtol=0)
    # Up to L tokens the steps are plain RoPE; past it the stale keys change
    # the loss (by more than the tolerance, so that the comparisons above can
    # fail).
    plain = posenc.perplexity(model, ids, context=64, method="none")["position_nll"]
    np.testing.assert_allclose(as_written[:32], plain[:32], atol=1e-5, rtol=0)
    assert np.max(np.abs(as_written[32:] - plain[32:])) > 1e-2
    assert np.max(np.abs(hf_cached[32:] - hf_consistent[32:])) > 1e-2


def test_keys_as_written_needs_the_decode_pass(gguf):
    model = posenc.DecoderModel(gguf)
    ids = np.random.default_rng(3).integers(0, VOCAB, 40)
    with pytest.raises(ValueError, match=r"cached_keys = as-written: needs the decode pass"):
        posenc.perplexity(model, ids, context=40, method="dynamic-ntk", keys_as_written=True)

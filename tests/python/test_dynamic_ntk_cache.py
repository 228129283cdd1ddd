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

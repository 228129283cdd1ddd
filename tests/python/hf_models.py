"""Hugging Face models for the posenc tests: a GGUF as posenc.hf.from_gguf
builds it, the same GGUF as transformers' own GGUF loader builds it (the
oracle of from_gguf), and SmolLM2 fetched (or the test skipped).

Attention is HF's "eager" implementation in both.
"""

from __future__ import annotations

import pathlib
import subprocess

import pytest
import transformers

import posenc.hf

ROOT = pathlib.Path(__file__).resolve().parents[2]


def hf_llama(path: pathlib.Path, rope_scaling=None):
    """The model posenc.hf.from_gguf loads, with HF's rope_scaling when a test
    compares a scaling method."""
    return posenc.hf.from_gguf(path, **({} if rope_scaling is None else {"rope_scaling": dict(rope_scaling)}))


def transformers_gguf_model(path: pathlib.Path):
    """What ``from_pretrained(dir, gguf_file=name)`` builds, by its own parts
    (AutoConfig from the GGUF metadata, then load_gguf_checkpoint, which
    dequantizes with gguf-py and un-permutes llama.cpp's Q/K rows), without
    its need of the `accelerate` package."""
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    config = transformers.AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    config._attn_implementation = "eager"
    model = transformers.MODEL_FOR_CAUSAL_LM_MAPPING[type(config)](config)
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    assert not unexpected
    assert set(missing) <= ({"lm_head.weight"} if config.tie_word_embeddings else set()), missing
    model.tie_weights()
    return model.eval()


def smollm_gguf() -> pathlib.Path:
    """SmolLM2-135M-Instruct Q4_1 (scripts/fetch-model), or the test skipped with the reason."""
    path = ROOT / "build" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        try:
            result = subprocess.run([str(ROOT / "scripts" / "fetch-model")], capture_output=True, text=True,
                                    timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            pytest.skip(f"{path} is missing and scripts/fetch-model could not run: {e}")
        if result.returncode != 0 or not path.is_file():
            pytest.skip(f"{path} is missing and scripts/fetch-model could not download it (no network?): "
                        + result.stderr.strip()[-300:])
    return path

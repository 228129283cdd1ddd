"""Hugging Face models for the posenc tests: a GGUF loaded as
``from_pretrained(dir, gguf_file=name)`` builds it, SmolLM2 fetched (or the
test skipped), and HF's perplexity over posenc's windows.

The loader does what from_pretrained does (AutoConfig from the GGUF metadata,
then transformers.modeling_gguf_pytorch_utils.load_gguf_checkpoint, which
dequantizes with gguf-py and un-permutes llama.cpp's Q/K rows) without
from_pretrained's requirement of the `accelerate` package, which is no
dependency of posenc. Attention is HF's "eager" implementation.
"""

from __future__ import annotations

import math
import pathlib
import subprocess

import numpy as np
import pytest
import torch
import transformers
from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[2]


def hf_llama(path: pathlib.Path, rope_scaling=None):
    """LlamaForCausalLM from a GGUF, as from_pretrained(gguf_file=...) builds it."""
    config = transformers.AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    config._attn_implementation = "eager"
    if rope_scaling is not None:
        config.rope_scaling = dict(rope_scaling)
    model = transformers.LlamaForCausalLM(config)
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    assert not unexpected
    assert set(missing) <= ({"lm_head.weight"} if config.tie_word_embeddings else set()), missing
    model.tie_weights()
    return model.eval()


def hf_window_perplexity(model, ids: np.ndarray, context: int, windows: int):
    """Non-overlapping windows from position 0; each scores all its tokens
    but the first. Returns (ppl, per-token NLL in float64)."""
    nll = []
    with torch.no_grad():
        for w in range(windows):
            x = torch.as_tensor(ids[w * context:(w + 1) * context])[None]
            logp = torch.log_softmax(model(x).logits[0].double(), -1)
            nll.append(-logp[torch.arange(context - 1), x[0, 1:]])
    nll = torch.cat(nll).numpy()
    return math.exp(nll.mean()), nll


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

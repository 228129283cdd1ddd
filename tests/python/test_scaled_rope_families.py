"""posenc.DecoderModel on the families that scale their RoPE (issue 51, item
2) against Hugging Face transformers 4.49 (float32, eager attention) on
tiny random-weight models: Qwen2 (biases on q, k, v; plain and with a YaRN
rope_scaling), Llama 3.x (rope_scaling llama3, which GGUF files carry as
llama.cpp's rope_freqs tensor) and Phi-3 (fused projections; LongRoPE's
short and long factors and its attention factor).

Each transformers model is built from its config, written to GGUF as
llama.cpp's converter writes it (hf_to_gguf.py), and the two are held
together at two lengths: the original length (original_max_position_embeddings;
LongRoPE's short factors) and three times it (past it: the long factors).
The bound is 1e-4 on the logits (max |logit| about 10); each case also
shows that the oracle can tell: the same model without its scaling (or its
biases) is far from posenc's logits.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

import posenc
from hf_to_gguf import HEAD_DIM, VOCAB, config, hf_logits, random_model, write_gguf

pytest.importorskip("gguf")

ORIGINAL = 32  # original_max_position_embeddings of every case
LENGTHS = (ORIGINAL, 3 * ORIGINAL)
TOLERANCE = 1e-4

_rng = np.random.default_rng(51)
SHORT_FACTOR = [float(x) for x in 1.0 + 0.5 * _rng.random(HEAD_DIM // 2)]
LONG_FACTOR = [float(x) for x in np.geomspace(1.0, 16.0, HEAD_DIM // 2)]

# id -> (kind, max_position_embeddings, rope_scaling, extra config fields)
CASES = {
    "qwen2": ("qwen2", ORIGINAL, None, {}),
    "qwen2-yarn": ("qwen2", ORIGINAL,
                   {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL}, {}),
    "llama3": ("llama", 4 * ORIGINAL,
               {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": ORIGINAL},
               # where llama.cpp's converter reads the original length for rope_freqs
               {"original_max_position_embeddings": ORIGINAL}),
    "phi3-longrope": ("phi3", 4 * ORIGINAL,
                      {"type": "longrope", "short_factor": SHORT_FACTOR, "long_factor": LONG_FACTOR},
                      {"original_max_position_embeddings": ORIGINAL}),
}


def tokens(n: int) -> np.ndarray:
    return np.random.default_rng(n).integers(0, VOCAB, n)


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def case(request, tmp_path_factory):
    kind, max_position, rope_scaling, extra = CASES[request.param]
    model = random_model(config(kind, max_position, copy.deepcopy(rope_scaling), **extra), seed=7)
    path = write_gguf(model, tmp_path_factory.mktemp(request.param) / f"{request.param}.gguf")
    return request.param, model, posenc.DecoderModel(str(path))


def unscaled(model):
    """The same weights with the model's RoPE unscaled (and, for Qwen2
    without a scaling, without its q/k/v biases): what a family reading the
    file wrong would compute."""
    other = copy.deepcopy(model)
    if model.config.rope_scaling is None:
        for layer in other.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.data.zero_()
        return other
    cfg = copy.deepcopy(model.config)
    cfg.rope_scaling = None
    plain = type(model)(cfg).eval()
    plain.load_state_dict(model.state_dict())
    return plain


def test_reads_the_family(case):
    name, model, ours = case
    hp = ours.hparams
    assert hp["architecture"] == model.config.model_type
    assert hp["tied_output"] == model.config.tie_word_embeddings
    assert hp["context_length"] == model.config.max_position_embeddings


@pytest.mark.parametrize("n", LENGTHS, ids=["within", "past"])
def test_logits_match_hugging_face(case, n):
    name, model, ours = case
    ids = tokens(n)
    got = ours.logits(ids)
    expected = hf_logits(model, ids)
    diff = float(np.abs(got - expected).max())
    wrong = float(np.abs(got - hf_logits(unscaled(model), ids)).max())
    print(f"\n{name} at {n} tokens (original {ORIGINAL}): max |posenc - HF| = {diff:.3g}, "
          f"max |logit| = {np.abs(expected).max():.3g}; without its scaling/biases: {wrong:.3g}")
    assert diff <= TOLERANCE, f"{name} at {n}: {diff}"
    assert wrong > 100 * TOLERANCE, f"{name} at {n}: the oracle cannot tell ({wrong})"

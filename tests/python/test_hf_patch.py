"""posenc.hf: a Hugging Face model's attention run by posenc.

(a) With method "none" the patched model is the model: logits equal HF's
    own eager attention (float32, within 1e-5 of the logit scale) on small
    random Llama, Mistral and Qwen2 models and on a GGUF loaded by
    transformers (the random GGUF; SmolLM2 too when scripts/fetch-model has
    it), through generate's cache and with left padding; parameter
    gradients equal HF's (training through posenc.torch).
(b) Two engines, one answer: for every context-extension method the
    HF-patched model's perplexity past the training length equals posenc's
    own engine (posenc.perplexity on the same GGUF, text and windows)
    within 1e-4 relative.
(c) generate: greedy decoding under Self-Extend through HF's generate and
    its cache equals posenc's LlamaModel.generate.
Plus padding (a left-padded row equals the row alone), bfloat16, remove(),
and the errors.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
import transformers.generation.utils as generation_utils

import posenc
import posenc.hf
from hf_models import hf_llama, hf_window_perplexity
from random_llama_gguf import CONTEXT, VOCAB, write_random_llama

pytest.importorskip("gguf")


@pytest.fixture(autouse=True)
def _generate_without_fsdp(monkeypatch):
    # transformers' generate asks whether the model is FSDP-managed, which
    # imports torch.distributed.fsdp: that import fails under torch 1.13 with
    # Python 3.11 (a dataclass default). No model here is; say so directly.
    monkeypatch.setattr(generation_utils, "is_fsdp_managed_module", lambda module: False)


def tiny(kind: str, seed: int = 0, **extra):
    torch.manual_seed(seed)
    common = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=32, attn_implementation="eager", **extra)
    config = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig,
              "qwen2": transformers.Qwen2Config}[kind](**common)
    model = {"llama": transformers.LlamaForCausalLM, "mistral": transformers.MistralForCausalLM,
             "qwen2": transformers.Qwen2ForCausalLM}[kind](config)
    return model.eval()


def logits(model, ids, **kw) -> torch.Tensor:
    with torch.no_grad():
        return model(ids, **kw).logits.double()


def close(a: torch.Tensor, b: torch.Tensor, rel: float = 1e-5) -> bool:
    return float((a - b).abs().max()) <= rel * float(b.abs().max())


@pytest.mark.parametrize("kind,extra", [("llama", {}), ("mistral", {"sliding_window": None}),
                                        ("mistral", {"sliding_window": 8}), ("qwen2", {})],
                         ids=["llama", "mistral", "mistral-window-8", "qwen2"])
def test_method_none_is_the_model(kind, extra):
    model = tiny(kind, **extra)
    ids = torch.randint(0, 97, (2, 24), generator=torch.Generator().manual_seed(1))
    expected = logits(model, ids)
    posenc.hf.apply(model)
    assert close(logits(model, ids), expected)
    posenc.hf.remove(model)
    assert torch.equal(logits(model, ids), expected)


def test_generate_and_left_padding_match_hf():
    model = tiny("llama")
    ids = torch.randint(3, 97, (2, 12), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    mask[1, :5] = 0
    ids[1, :5] = 0
    expected_logits = logits(model, ids, attention_mask=mask)
    expected = model.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
    posenc.hf.apply(model)
    got = logits(model, ids, attention_mask=mask)
    assert close(got[0], expected_logits[0]) and close(got[1, 5:], expected_logits[1, 5:])
    assert torch.equal(model.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0),
                       expected)


def test_parameter_gradients_match_hf():
    model = tiny("llama").train()
    ids = torch.randint(0, 97, (2, 20), generator=torch.Generator().manual_seed(3))

    def grads():
        model.zero_grad()
        model(ids, labels=ids).loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}

    expected = grads()
    posenc.hf.apply(model)
    got = grads()
    for name, g in expected.items():
        assert close(got[name].double(), g.double(), rel=1e-4), name


@pytest.mark.parametrize("method", ["rerope:window=6", "self-extend:group=3,window=6"])
def test_a_left_padded_row_is_the_row_alone(method):
    """Positions from the mask (as generate computes them): the padded row's
    logits equal the same tokens run alone."""
    model = tiny("llama")
    ids = torch.randint(3, 97, (1, 40), generator=torch.Generator().manual_seed(4))
    posenc.hf.apply(model, method, target_length=64)
    alone = logits(model, ids)
    padded = torch.cat([torch.zeros(1, 7, dtype=ids.dtype), ids], 1)
    batch = torch.cat([padded, torch.randint(3, 97, (1, 47), generator=torch.Generator().manual_seed(5))])
    mask = torch.ones_like(batch)
    mask[0, :7] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    got = logits(model, batch, attention_mask=mask, position_ids=positions)
    assert close(got[0, 7:], alone[0])


def test_bfloat16_model_follows_its_float32_self():
    model = tiny("llama")
    ids = torch.randint(0, 97, (1, 24), generator=torch.Generator().manual_seed(6))
    posenc.hf.apply(model, "rerope:window=8", target_length=64)
    f32 = logits(model, ids)
    model.to(torch.bfloat16)
    bf16 = logits(model, ids)
    assert float((bf16 - f32).abs().max()) <= 0.05 * float(f32.abs().max())


# ---- (b) the HF-patched model and posenc's engine on one GGUF ---------------------------

METHODS = ["none", "linear", "ntk", "dynamic-ntk", "yarn", "rerope", "leaky-rerope", "window", "lambda",
           "self-extend", "ntk:logn", "lambda:sinks=2,logn", "self-extend:group=4,window=16"]


@pytest.fixture(scope="module")
def random_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("hf-patch") / "random.gguf"
    write_random_llama(path, tied=False, dtype="f32", seed=11)
    return path


@pytest.mark.parametrize("method", METHODS)
def test_patched_hf_perplexity_is_posencs(random_gguf, method):
    """Windows of 4 x the training length (context 64 -> 256), 2 of them."""
    context, windows = 4 * CONTEXT, 2
    ids = np.random.default_rng(8).integers(0, VOCAB, context * windows)
    model = posenc.hf.apply(hf_llama(random_gguf), method, target_length=context)
    hf_ppl, _ = hf_window_perplexity(model, ids, context, windows)
    ours = posenc.perplexity(posenc.LlamaModel(random_gguf), ids, context=context, max_windows=windows,
                             method=method)
    assert abs(hf_ppl - ours["ppl"]) <= 1e-4 * ours["ppl"], (hf_ppl, ours["ppl"], ours["method"])


def test_patched_smollm_logits_are_hfs(smollm_hf, smollm_path):
    """SmolLM2 (30 layers) loaded by transformers from the GGUF: method none
    gives HF's own logits over 128 tokens of the GPL-3, within 1e-5 of the
    logit scale."""
    text = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()
    ids = torch.as_tensor(posenc.BpeTokenizer.from_gguf(str(smollm_path)).encode(text)[:128])[None]
    expected = logits(smollm_hf, ids)
    try:
        got = logits(posenc.hf.apply(smollm_hf), ids)
    finally:
        posenc.hf.remove(smollm_hf)
    assert close(got, expected), float((got - expected).abs().max())


@pytest.mark.parametrize("method", ["none", "rerope:window=128", "self-extend:group=4,window=128"])
def test_patched_smollm_perplexity_is_posencs(smollm_hf, smollm_ours, smollm_path, method):
    """SmolLM2 loaded by transformers from the GGUF, 512 tokens of the GPL-3."""
    text = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()
    ids = np.asarray(posenc.BpeTokenizer.from_gguf(str(smollm_path)).encode(text)[:512], np.int64)
    try:
        hf_ppl, _ = hf_window_perplexity(posenc.hf.apply(smollm_hf, method, target_length=512), ids, 512, 1)
    finally:
        posenc.hf.remove(smollm_hf)  # the session's model, shared with test_model_hf.py
    ours = posenc.perplexity(smollm_ours, ids, context=512, max_windows=1, method=method)
    assert abs(hf_ppl - ours["ppl"]) <= 1e-4 * ours["ppl"], (hf_ppl, ours["ppl"])


def test_generate_under_self_extend_is_posencs(random_gguf):
    """A 60-token prompt and 40 new tokens (past the training length of 64):
    HF's generate through the patched model and its DynamicCache, and
    posenc's LlamaModel.generate, both planned for 100 tokens."""
    prompt = np.random.default_rng(9).integers(0, VOCAB - 3, 60)
    ours = posenc.LlamaModel(random_gguf).generate(prompt, max_tokens=40, method="self-extend")
    model = posenc.hf.apply(hf_llama(random_gguf), "self-extend", target_length=100)
    out = model.generate(torch.as_tensor(prompt)[None], max_new_tokens=40, do_sample=False, eos_token_id=None,
                         pad_token_id=0)
    assert out[0, 60:].tolist() == ours["tokens"]


# ---- errors ----------------------------------------------------------------------------


def test_errors_name_the_problem():
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    with pytest.raises(ValueError, match=r"\[hf\] model = a GPT2LMHeadModel: has no decoder layers"):
        posenc.hf.apply(gpt2)
    model = tiny("llama")
    with pytest.raises(ValueError, match=r"\[hf\] target_length = None: must be given for method 'yarn'"):
        posenc.hf.apply(model, "yarn")
    with pytest.raises(ValueError, match=r"unknown|must be one of|is not a known"):
        posenc.hf.apply(model, "xpos", target_length=64)
    scaled = tiny("llama", rope_scaling={"rope_type": "linear", "factor": 2.0})
    with pytest.raises(ValueError, match=r"model rope scaling = \"?linear\"?: must be none"):
        posenc.hf.apply(scaled, "yarn", target_length=64)
    windowed = tiny("mistral", sliding_window=8)
    with pytest.raises(ValueError, match=r"sets a window of 32 on a model with its own sliding_window = 8"):
        posenc.hf.apply(windowed, "window", target_length=64)

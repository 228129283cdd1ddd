"""posenc.DecoderModel and posenc.perplexity against Hugging Face transformers
4.49 (LlamaForCausalLM, torch 1.13, float32 and float64) on the same GGUF files.

The oracle is HF's model of the GGUF as posenc.hf.from_gguf builds it
(hf_models.hf_llama), tensor for tensor what ``from_pretrained(dir,
gguf_file=name)`` builds (test_hf_patch.py checks that against transformers'
own GGUF loader); attention is HF's "eager" implementation.

Tolerances come from the oracle's own float32 error: each case also runs HF
in float64 (the same model, ``.double()``), and posenc must be as close to
that as HF's float32 run is, within a small factor (both are float32 with
different summation orders), and under an absolute bound.

(a) Tiny random models (random_llama_gguf.py: vocab 320, d 64, 2 blocks, GQA
    4/2 heads, context_length 64): tied and untied output, F32, F16 and
    Q8_0 weights; and context extension past the training length:
    posenc "linear"/"yarn"/"dynamic-ntk" vs HF rope_scaling linear/yarn/dynamic
    (HF 4.49 takes YaRN's original length from max_position_embeddings, which
    the GGUF loader sets from llama.context_length: the same L_train).
(b) SmolLM2-135M-Instruct Q4_1 (scripts/fetch-model; skipped with the reason
    when it cannot be had): logits over 128 tokens of the GPL-3,
    perplexity at context 512 over 2 non-overlapping windows, greedy
    generation (DecoderModel.generate vs HF's generate(do_sample=False)
    through its own key/value cache) and a passkey trial (the
    key found; the answer's NLL vs HF's).
"""

from __future__ import annotations

import copy
import math
import pathlib
import time

import numpy as np
import pytest
import torch

import posenc
import posenc.hf
from hf_models import hf_llama
from random_llama_gguf import CONTEXT, VOCAB, write_random_llama

pytest.importorskip("gguf")

GPL3 = pathlib.Path("/usr/share/common-licenses/GPL-3")


def hf_logits(model, tokens) -> np.ndarray:
    with torch.no_grad():
        return model(torch.as_tensor(np.asarray(tokens, np.int64))[None]).logits[0].double().numpy()


def hf_float64(model):
    return copy.deepcopy(model).double()


def compare(ours: np.ndarray, hf32: np.ndarray, hf64: np.ndarray, label: str) -> dict:
    """Errors of posenc and of HF float32 against HF float64, printed."""
    scale = float(np.abs(hf64).max())
    e = {
        "ours_vs_hf32": float(np.abs(ours - hf32).max()),
        "ours_vs_hf64": float(np.abs(ours - hf64).max()),
        "hf32_vs_hf64": float(np.abs(hf32 - hf64).max()),
        "scale": scale,
        "argmax_agree": float((ours.argmax(-1) == hf64.argmax(-1)).mean()),
    }
    print(f"\n{label}: max|posenc - HF f32| = {e['ours_vs_hf32']:.3g}, max|posenc - HF f64| = "
          f"{e['ours_vs_hf64']:.3g}, max|HF f32 - HF f64| = {e['hf32_vs_hf64']:.3g}, max|logit| = {scale:.3g}, "
          f"relative {e['ours_vs_hf32'] / scale:.3g}, argmax agreement {e['argmax_agree']:.3f}")
    return e


# ---- (a) small random-weight models ----------------------------------------------------

VARIANTS = [("tied", "f32"), ("untied", "f32"), ("tied", "f16"), ("untied", "q8_0"), ("tied", "q8_0")]


@pytest.fixture(scope="module")
def random_dir(tmp_path_factory) -> pathlib.Path:
    directory = tmp_path_factory.mktemp("random-llama")
    for tied, dtype in VARIANTS:
        write_random_llama(directory / f"{tied}-{dtype}.gguf", tied=tied == "tied", dtype=dtype, seed=7)
    return directory


def random_tokens(n: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, n)


@pytest.mark.parametrize("tied,dtype", VARIANTS, ids=[f"{t}-{d}" for t, d in VARIANTS])
def test_random_logits_match_hf(random_dir, tied, dtype):
    path = random_dir / f"{tied}-{dtype}.gguf"
    hf = hf_llama(path)
    ours = posenc.DecoderModel(path)
    assert ours.hparams["tied_output"] == (tied == "tied") == hf.config.tie_word_embeddings
    tokens = random_tokens(40)
    got = ours.logits(tokens)
    assert got.dtype == np.float32 and got.shape == (40, VOCAB)
    e = compare(got, hf_logits(hf, tokens), hf_logits(hf_float64(hf), tokens), f"random {tied} {dtype}")
    # HF float32's own error is ~6e-6 on logits of ~13 (measured: posenc
    # 5-8e-6 from either HF run); float32 in another summation order may be
    # a few times that: within 8x of HF's error, and 5e-6 of the logit scale
    # (a wrong layout, norm or scaling moves logits by O(1)).
    assert e["ours_vs_hf64"] <= max(8 * e["hf32_vs_hf64"], 5e-6 * e["scale"])
    assert e["ours_vs_hf32"] <= 5e-6 * e["scale"]
    assert e["argmax_agree"] == 1.0


# posenc method, HF rope_scaling, sequence length (context_length is 64).
EXTENSIONS = [
    ("none", None, 100),
    ("linear:factor=2", {"rope_type": "linear", "factor": 2.0}, 100),
    ("linear", {"rope_type": "linear", "factor": 100 / CONTEXT}, 100),   # default factor L / L_train
    ("yarn:factor=2", {"rope_type": "yarn", "factor": 2.0}, 100),
    ("yarn", {"rope_type": "yarn", "factor": 2.0}, 2 * CONTEXT),        # default factor 128 / 64
    ("yarn:factor=4", {"rope_type": "yarn", "factor": 4.0}, 100),
    ("dynamic-ntk", {"rope_type": "dynamic", "factor": 2.0}, 100),       # HF's documented factor 2 at L = 100
    ("dynamic-ntk", {"rope_type": "dynamic", "factor": 2.0}, 48),        # below L_train: plain RoPE on both sides
]


@pytest.mark.parametrize("method,scaling,n", EXTENSIONS, ids=[f"{m}-{n}" for m, _, n in EXTENSIONS])
def test_random_context_extension_matches_hf(random_dir, method, scaling, n):
    path = random_dir / "untied-f32.gguf"
    hf = hf_llama(path, scaling)
    ours = posenc.DecoderModel(path)
    tokens = random_tokens(n, seed=n)
    got = ours.logits(tokens, method=method)
    e = compare(got, hf_logits(hf, tokens), hf_logits(hf_float64(hf), tokens), f"random {method} n={n}")
    # HF computes inverse frequencies (and YaRN's ramp) in float32, posenc in
    # double: a few ulp of angle more at positions ~100 (measured 1.0-1.4e-5
    # on logits of ~13 for posenc, 0.7-0.9e-5 for HF float32, against HF float64).
    assert e["ours_vs_hf64"] <= max(8 * e["hf32_vs_hf64"], 1e-5 * e["scale"])
    assert e["ours_vs_hf32"] <= 1e-5 * e["scale"]
    assert e["argmax_agree"] == 1.0


def test_random_extension_changes_logits(random_dir):
    # The methods above must really change the model past L_train (else the
    # comparison would be vacuous), and "none" must equal HF without scaling.
    ours = posenc.DecoderModel(random_dir / "untied-f32.gguf")
    tokens = random_tokens(100)
    base = ours.logits(tokens)
    for method in ("linear:factor=2", "yarn:factor=2", "dynamic-ntk"):
        assert np.abs(ours.logits(tokens, method=method) - base).max() > 0.1, method


def test_random_nll_matches_hf(random_dir):
    path = random_dir / "tied-f32.gguf"
    hf = hf_llama(path)
    tokens = random_tokens(60)
    logp = torch.log_softmax(torch.from_numpy(hf_logits(hf_float64(hf), tokens)), -1).numpy()
    expected = -logp[np.arange(59), tokens[1:]]
    got = posenc.DecoderModel(path).next_token_nll(tokens)
    assert got.dtype == np.float64 and got.shape == (59,)
    print(f"\ntiny next_token_nll: max|posenc - HF f64| = {np.abs(got - expected).max():.3g}")
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-4)


# ---- (b) SmolLM2-135M-Instruct Q4_1 ---------------------------------------------

@pytest.fixture(scope="module")
def gpl3_ids(smollm_path) -> np.ndarray:
    # posenc's tokenizer gives HF's ids on this text (test_tokenizer_hf.py).
    if not GPL3.is_file():
        pytest.skip(f"{GPL3} is missing (Debian's base-files)")
    ids = posenc.BpeTokenizer.from_gguf(str(smollm_path)).encode(GPL3.read_text(encoding="utf-8"))
    assert len(ids) >= 1024
    return np.asarray(ids, np.int64)


def test_smollm_hparams(smollm_ours, smollm_hf):
    h, c = smollm_ours.hparams, smollm_hf.config
    assert (h["architecture"], h["vocab_size"], h["embedding_length"], h["feed_forward_length"],
            h["block_count"], h["head_count"], h["head_count_kv"], h["head_dim"], h["context_length"],
            h["tied_output"]) == ("llama", c.vocab_size, c.hidden_size, c.intermediate_size,
                                  c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
                                  c.head_dim, c.max_position_embeddings, c.tie_word_embeddings)
    assert h["rope"].theta == c.rope_theta and h["rope"].layout == "interleaved"
    assert h["rms_norm_eps"] == pytest.approx(c.rms_norm_eps, rel=1e-6)


def test_smollm_logits_match_hf(smollm_ours, smollm_hf, gpl3_ids):
    tokens = gpl3_ids[:128]
    start = time.perf_counter()
    got = smollm_ours.logits(tokens)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    hf32 = hf_logits(smollm_hf, tokens)
    hf_s = time.perf_counter() - start
    e = compare(got, hf32, hf_logits(hf_float64(smollm_hf), tokens), "SmolLM2 128 tokens")
    print(f"forward of 128 tokens: posenc {ours_s:.2f} s, HF float32 {hf_s:.2f} s")
    # 30 layers in float32: HF's own error is ~1e-4 on logits of ~38
    # (measured: posenc 2.7e-4 from HF float32, 1.9e-4 from HF float64). The
    # weights are identical (Q4_1 decoded exactly by both), so the rest is
    # summation order: 2e-3 absolute (5e-5 of the logit scale) leaves 20x
    # room over HF's own float32 error, and far below any real bug (a wrong
    # RoPE layout or norm moves logits by O(1)).
    assert e["ours_vs_hf32"] <= 2e-3
    assert e["ours_vs_hf64"] <= max(20 * e["hf32_vs_hf64"], 2e-3)
    assert e["argmax_agree"] >= 127 / 128  # a near-tie may flip in float32




def test_smollm_perplexity_matches_hf(smollm_ours, smollm_hf, gpl3_ids):
    ids = gpl3_ids[:1024]
    start = time.perf_counter()
    hf_nll = posenc.hf.nll_by_position(smollm_hf, ids, context=512, max_windows=2).ravel()
    hf_ppl = math.exp(hf_nll.mean())
    hf_s = time.perf_counter() - start
    got = posenc.perplexity(smollm_ours, ids, context=512, max_windows=2)
    rel = abs(got["ppl"] - hf_ppl) / hf_ppl
    print(f"\nSmolLM2 perplexity, GPL-3, context 512 x 2 windows: posenc {got['ppl']:.6f}, HF {hf_ppl:.6f}, "
          f"relative difference {rel:.3g}; posenc {got['seconds']:.2f} s ({got['tokens_per_s']:.0f} tokens/s), "
          f"HF float32 {hf_s:.2f} s")
    assert (got["windows"], got["scored"], got["processed"], got["method"]) == (2, 1022, 1024, "none")
    assert got["mean_nll"] == pytest.approx(float(hf_nll.mean()), rel=5e-3)
    assert rel < 5e-3  # the floor; measured 1.2e-7 (21.060658 vs 21.060660)
    # Token by token too: the first window's losses from next_token_nll.
    ours_nll = smollm_ours.next_token_nll(ids[:512])
    print(f"max per-token |NLL posenc - HF| over window 1: {np.abs(ours_nll - hf_nll[:511]).max():.3g}")
    np.testing.assert_allclose(ours_nll, hf_nll[:511], rtol=0, atol=2e-3)
    assert got["mean_nll"] == pytest.approx(
        float(np.concatenate([ours_nll, smollm_ours.next_token_nll(ids[512:])]).mean()), rel=1e-9, abs=1e-9)


def first_divergence(a, b) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def hf_greedy(model, ids, max_tokens: int, stops) -> list:
    """HF's generate(do_sample=False): one forward pass over the prompt, then
    one token at a time through HF's own key/value cache, each token the
    argmax of the last logits, stopping after a stop token."""
    out = model.generate(torch.as_tensor([ids]), max_new_tokens=max_tokens, do_sample=False, eos_token_id=stops,
                         pad_token_id=stops[0])
    return out[0, len(ids):].tolist()


def test_smollm_greedy_generation_matches_hf(smollm_ours, smollm_hf, smollm_path):
    """posenc's DecoderModel.generate (prefill + one token at a time through its
    cache) vs HF greedy decoding through HF's cache, ChatML prompts,
    stopping at <|im_end|> or end of text."""
    tok = posenc.BpeTokenizer.from_gguf(str(smollm_path))
    stops = [tok.eos_id, tok.token_id("<|im_end|>")]
    cases = [
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\nList three colours of the rainbow.<|im_end|>\n<|im_start|>assistant\n",
    ]
    for text in cases:
        ids = tok.encode(text)
        start = time.perf_counter()
        ours = smollm_ours.generate(ids, max_tokens=16, stop_tokens=stops)
        ours_s = time.perf_counter() - start
        start = time.perf_counter()
        expected = hf_greedy(smollm_hf, ids, 16, stops)
        hf_s = time.perf_counter() - start
        print(f"\nSmolLM2 greedy: {tok.decode(ours['tokens'])!r} ({len(ours['tokens'])} tokens; posenc {ours_s:.2f} s, "
              f"prefill {ours['prefill_tokens_per_s']:.0f} tokens/s, decode {ours['decode_tokens_per_s']:.1f} "
              f"tokens/s; HF {hf_s:.2f} s)")
        if ours["tokens"] != expected:
            # Only a near-tie may flip in float32 (cf. the argmax agreement above):
            # at the first difference HF's own top two logits must be within 1e-3.
            i = first_divergence(ours["tokens"], expected)
            top = np.sort(hf_logits(smollm_hf, ids + expected[:i])[-1])[-2:]
            assert i < min(len(ours["tokens"]), len(expected)) and top[1] - top[0] < 1e-3, (ours["tokens"], expected)
        assert ours["tokens"][-1] in stops or len(ours["tokens"]) == 16


def test_smollm_passkey(smollm_ours, smollm_hf, smollm_path):
    """A passkey trial well inside the training length: the model finds the
    key, and the answer's NLL equals HF's on prompt + answer (float32, as the
    per-token NLL in test_smollm_perplexity_matches_hf)."""
    tok = posenc.BpeTokenizer.from_gguf(str(smollm_path))
    prompt = posenc.passkey_prompt(tok, 256, 0.5, posenc.passkey_key(0, 1), reserve=8)
    score = smollm_ours.score_passkey(tok, prompt, max_new_tokens=8)
    logits = hf_logits(smollm_hf, prompt.prompt + prompt.answer[:-1])[len(prompt.prompt) - 1:]
    logp = torch.log_softmax(torch.from_numpy(logits), -1).numpy()
    nll = -logp[np.arange(len(prompt.answer)), prompt.answer]
    print(f"\nSmolLM2 passkey {prompt.key} at depth 0.5 in {len(prompt.prompt)} tokens: generated "
          f"{score['generated']!r}, answer NLL {score['answer_nll']:.4f} (HF {nll.mean():.4f}), {score['seconds']:.2f} s")
    assert score["generated_has_key"] and score["answer_exact"]
    assert (logits.argmax(-1) == prompt.answer).all()
    assert score["answer_nll"] == pytest.approx(float(nll.mean()), abs=2e-3)

"""posenc.DecoderModel on Gemma 3 270M (Q4_K_M GGUF) against a float64 NumPy
transcription of Hugging Face transformers' Gemma 3 forward
(src/transformers/models/gemma3/modeling_gemma3.py).

The transformers release the tests pin (4.49.0) cannot import Gemma 3 with
torch 1.13, so the oracle is HF's forward written out in NumPy, step by step,
each step naming the HF module it transcribes. It reads the same GGUF: every
weight dequantized by gguf-py (gguf.quants.dequantize, llama.cpp's own
formulas), so the only differences left are float32 (posenc) against float64
(the oracle) arithmetic.

Two facts of llama.cpp's converter (convert_hf_to_gguf.py, Gemma3Model) that
the oracle undoes to get back HF's parameters:
  - every ``*norm.weight`` is written as 1 + HF's weight (HF's Gemma3RMSNorm
    scales by (1 + weight)); the oracle subtracts the 1 again.
  - Q and K rows are not permuted for Gemma (unlike llama), so HF's
    rotate_half RoPE applies to the rows as stored.

The prompt is 544 token ids from a fixed RNG (no tokenizer needed): past the
local layers' window of 512, so the sliding-window mask is exercised. The
float64 logits are made vocabulary block by vocabulary block (the tied
262,144 x 640 output matrix in float64 would be 1.3 GB).

The model comes from `scripts/fetch-model gemma3` (kept in build/models/
once fetched; a fetch that fails fails the test, as in test_tokenizer_spm.py).
It takes about 40 s and 3.2 GB at its peak on the 2-core machine: the
oracle's float64 forward over 544 tokens, the float32 token embeddings
(0.7 GB) and posenc's [544, 262144] float32 logits (0.6 GB).
"""

from __future__ import annotations

import pathlib
import subprocess
import time

import numpy as np
import pytest

import posenc

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROMPT_TOKENS = 544
VOCAB_BLOCK = 16384


def gemma3_path() -> pathlib.Path:
    result = subprocess.run([str(ROOT / "scripts" / "fetch-model"), "gemma3"], capture_output=True, text=True,
                            timeout=900)
    if result.returncode != 0:
        pytest.fail(f"scripts/fetch-model gemma3 failed: {result.stderr.strip()[-500:]}")
    return ROOT / result.stdout.strip()


class GgufWeights:
    """Tensors of a GGUF as float32 arrays in PyTorch's [out, in] order."""

    def __init__(self, path: pathlib.Path):
        self.reader = gguf.GGUFReader(str(path))
        self.tensors = {t.name: t for t in self.reader.tensors}

    def __getitem__(self, name: str) -> np.ndarray:
        t = self.tensors[name]
        return dequantize(t.data, t.tensor_type).reshape([int(x) for x in reversed(t.shape)])

    def meta(self, key: str):
        return self.reader.fields[key].contents()

    def norm(self, name: str) -> np.ndarray:
        """HF's RMSNorm weight: the converter stored 1 + weight."""
        return self[name].astype(np.float64) - 1.0

    def linear(self, name: str) -> np.ndarray:
        return self[name].astype(np.float64)


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    # Gemma3RMSNorm.forward: x * rsqrt(mean(x^2) + eps) * (1 + weight)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + weight)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    # ACT2FN["gelu_pytorch_tanh"] (config.hidden_activation)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def rope(x: np.ndarray, theta: float) -> np.ndarray:
    """Gemma3RotaryEmbedding + apply_rotary_pos_emb: x [heads, n, hd]."""
    n, hd = x.shape[1], x.shape[2]
    inv_freq = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)
    freqs = np.arange(n, dtype=np.float64)[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)  # torch.cat((freqs, freqs), dim=-1)
    rotate_half = np.concatenate([-x[..., hd // 2 :], x[..., : hd // 2]], axis=-1)
    return x * np.cos(emb) + rotate_half * np.sin(emb)


def attention(q, k, v, scaling: float, sliding_window: int | None) -> np.ndarray:
    """eager_attention_forward with the causal or sliding-window causal mask.

    q [heads, n, hd], k and v [kv_heads, n, hd] (repeat_kv for GQA). HF's
    sliding mask keeps key j for query i when i - sliding_window < j <= i
    (masking_utils.sliding_window_overlay), the window counting the query.
    """
    groups = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, groups, axis=0), np.repeat(v, groups, axis=0)
    n = q.shape[1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    visible = j <= i
    if sliding_window is not None:
        visible &= j > i - sliding_window
    scores = np.einsum("hid,hjd->hij", q, k) * scaling
    scores = np.where(visible[None], scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=-1, keepdims=True)
    return np.einsum("hij,hjd->hid", probs, v)


def gemma3_hidden(w: GgufWeights, embed: np.ndarray, ids: np.ndarray, query_pre_attn_scalar=None) -> np.ndarray:
    """Gemma3TextModel.forward up to the final norm: [n, d] in float64.
    query_pre_attn_scalar: Gemma3TextConfig's (None: head_dim, as for 270M)."""
    d = int(w.meta("gemma3.embedding_length"))
    heads = int(w.meta("gemma3.attention.head_count"))
    kv_heads = int(w.meta("gemma3.attention.head_count_kv"))
    hd = int(w.meta("gemma3.attention.key_length"))
    eps = float(w.meta("gemma3.attention.layer_norm_rms_epsilon"))
    window = int(w.meta("gemma3.attention.sliding_window"))
    global_theta = float(w.meta("gemma3.rope.freq_base"))
    local_theta = 10000.0  # Gemma3TextConfig.rope_local_base_freq
    # Gemma3Attention.scaling = query_pre_attn_scalar ** -0.5; 256 = head_dim for 270M.
    scaling = (query_pre_attn_scalar or hd) ** -0.5
    n = len(ids)

    # Gemma3TextScaledWordEmbedding: embed_scale is a float32 tensor of
    # sqrt(hidden_size), cast to the weights' dtype.
    x = embed[ids].astype(np.float64) * np.float64(np.float32(np.sqrt(d)))
    for layer in range(int(w.meta("gemma3.block_count"))):
        blk = f"blk.{layer}."
        # config.layer_types: every 6th layer full attention, the others sliding.
        sliding = (layer + 1) % 6 != 0
        # Gemma3DecoderLayer.forward
        h = rms_norm(x, w.norm(blk + "attn_norm.weight"), eps)  # input_layernorm
        q = (h @ w.linear(blk + "attn_q.weight").T).reshape(n, heads, hd).transpose(1, 0, 2)
        k = (h @ w.linear(blk + "attn_k.weight").T).reshape(n, kv_heads, hd).transpose(1, 0, 2)
        v = (h @ w.linear(blk + "attn_v.weight").T).reshape(n, kv_heads, hd).transpose(1, 0, 2)
        q = rms_norm(q, w.norm(blk + "attn_q_norm.weight"), eps)  # Gemma3Attention.q_norm
        k = rms_norm(k, w.norm(blk + "attn_k_norm.weight"), eps)  # k_norm
        theta = local_theta if sliding else global_theta
        q, k = rope(q, theta), rope(k, theta)
        o = attention(q, k, v, scaling, window if sliding else None).transpose(1, 0, 2).reshape(n, heads * hd)
        o = o @ w.linear(blk + "attn_output.weight").T  # o_proj
        x = x + rms_norm(o, w.norm(blk + "post_attention_norm.weight"), eps)
        h = rms_norm(x, w.norm(blk + "ffn_norm.weight"), eps)  # pre_feedforward_layernorm
        # Gemma3MLP: down_proj(act_fn(gate_proj(x)) * up_proj(x))
        mlp = gelu_tanh(h @ w.linear(blk + "ffn_gate.weight").T) * (h @ w.linear(blk + "ffn_up.weight").T)
        mlp = mlp @ w.linear(blk + "ffn_down.weight").T
        x = x + rms_norm(mlp, w.norm(blk + "post_ffw_norm.weight"), eps)  # post_feedforward_layernorm
    return rms_norm(x, w.norm("output_norm.weight"), eps)  # Gemma3TextModel.norm


def test_gemma3_270m_logits_match_the_float64_transcription_of_hugging_face():
    path = gemma3_path()
    model = posenc.DecoderModel(str(path))
    hp = model.hparams
    assert hp["architecture"] == "gemma3"
    assert (hp["sliding_window"], hp["sliding_window_pattern"], hp["local_rope_theta"]) == (512, 6, 10000.0)

    ids = np.random.default_rng(20250312).integers(0, hp["vocab_size"], size=PROMPT_TOKENS).astype(np.int32)
    start = time.perf_counter()
    ours = model.logits(ids)
    ours_seconds = time.perf_counter() - start

    w = GgufWeights(path)
    embed = w["token_embd.weight"]  # [vocab, d] float32
    hidden = gemma3_hidden(w, embed, ids)
    # Gemma3ForCausalLM.lm_head, tied to embed_tokens (no final softcapping in
    # Gemma 3), block by block of the vocabulary.
    max_diff = np.zeros(len(ids))
    max_logit = np.zeros(len(ids))
    for first in range(0, embed.shape[0], VOCAB_BLOCK):
        ref = hidden @ embed[first : first + VOCAB_BLOCK].astype(np.float64).T
        diff = np.abs(ours[:, first : first + VOCAB_BLOCK] - ref)
        max_diff = np.maximum(max_diff, diff.max(axis=1))
        max_logit = np.maximum(max_logit, np.abs(ref).max(axis=1))
    relative = max_diff / max_logit
    print(
        f"gemma3 270M, {len(ids)} tokens: max relative logit difference {relative.max():.3g} "
        f"(position {int(relative.argmax())}), posenc forward {ours_seconds:.1f} s"
    )
    assert np.all(relative < 1e-4), f"positions over 1e-4: {np.nonzero(relative >= 1e-4)[0][:10]}"


def test_gemma3_27b_query_scale_matches_the_transcription(tmp_path):
    """Gemma 3 27B scales queries by query_pre_attn_scalar ** -0.5 with
    query_pre_attn_scalar = 168 = hidden_size / num_attention_heads (5376 /
    32; its config.json), not head_dim 128; GGUF files do not carry it and
    the 27B model is the one with 62 blocks. A tiny random 62-block Gemma 3
    with hidden / heads = 8 and head_dim 16 against the transcription."""
    rng = np.random.default_rng(27)
    d, heads, kv_heads, hd, ffn, blocks, vocab = 32, 4, 1, 16, 48, 62, 256
    meta = {"general.architecture": "gemma3", "gemma3.context_length": 32, "gemma3.embedding_length": d,
            "gemma3.block_count": blocks, "gemma3.feed_forward_length": ffn, "gemma3.attention.head_count": heads,
            "gemma3.attention.head_count_kv": kv_heads, "gemma3.attention.key_length": hd,
            "gemma3.attention.value_length": hd, "gemma3.rope.dimension_count": hd, "gemma3.rope.freq_base": 1e6,
            "gemma3.attention.layer_norm_rms_epsilon": 1e-6, "gemma3.attention.sliding_window": 8}

    def matrix(rows, cols, scale):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def norm(size):  # stored as 1 + Hugging Face's weight
        return (1 + 0.1 * rng.standard_normal(size)).astype(np.float32)

    tensors = {"token_embd.weight": matrix(vocab, d, 1.0), "output_norm.weight": norm(d)}
    for layer in range(blocks):
        blk = f"blk.{layer}."
        tensors.update({blk + "attn_norm.weight": norm(d), blk + "attn_q.weight": matrix(heads * hd, d, 0.35),
                        blk + "attn_k.weight": matrix(kv_heads * hd, d, 0.35),
                        blk + "attn_v.weight": matrix(kv_heads * hd, d, 0.18),
                        blk + "attn_output.weight": matrix(d, heads * hd, 0.1), blk + "attn_q_norm.weight": norm(hd),
                        blk + "attn_k_norm.weight": norm(hd), blk + "post_attention_norm.weight": norm(d),
                        blk + "ffn_norm.weight": norm(d), blk + "ffn_gate.weight": matrix(ffn, d, 0.18),
                        blk + "ffn_up.weight": matrix(ffn, d, 0.18), blk + "ffn_down.weight": matrix(d, ffn, 0.14),
                        blk + "post_ffw_norm.weight": norm(d)})
    path = tmp_path / "gemma3-62-blocks.gguf"
    posenc.write_gguf(path, meta, tensors)
    model = posenc.DecoderModel(str(path))
    assert model.hparams["query_pre_attn_scalar"] == d / heads

    ids = rng.integers(0, vocab, size=24).astype(np.int32)  # past the window of 8
    w = GgufWeights(path)
    embed = w["token_embd.weight"]
    ref = gemma3_hidden(w, embed, ids, query_pre_attn_scalar=d / heads) @ embed.astype(np.float64).T
    relative = np.abs(model.logits(ids) - ref).max() / np.abs(ref).max()
    assert relative < 1e-4, relative
    # The head_dim scale would be another model: the test can tell them apart.
    other = gemma3_hidden(w, embed, ids, query_pre_attn_scalar=hd) @ embed.astype(np.float64).T
    assert np.abs(other - ref).max() / np.abs(ref).max() > 100 * relative

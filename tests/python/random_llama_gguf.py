"""Tiny random-weight Llama models as GGUF files, for the model tests.

:func:`write_random_llama` writes a llama-architecture GGUF with llama.cpp's
tensor names and shapes and gguf-py's GGUFWriter, small enough that
Hugging Face (``AutoModelForCausalLM.from_pretrained(dir, gguf_file=name)``)
and posenc both load it in well under a second:

    vocab 320 (256 byte tokens + 61 BPE merges + 3 special tokens), d 64,
    2 blocks, 4 heads, 2 KV heads (GQA), head_dim 16, ffn 96, RoPE base
    10000, context_length 64, RMS eps 1e-5.

Tensor layout (NumPy order [rows, cols]; GGUF stores the reverse):
token_embd.weight [vocab, d], blk.N.attn_{q,k,v,output}.weight,
blk.N.ffn_{gate,up,down}.weight, blk.N.{attn,ffn}_norm.weight [d],
output_norm.weight [d] and, unless tied, output.weight [vocab, d].

The weights are random, so there is nothing to permute: a GGUF's Q/K rows
are in llama.cpp's permuted (interleaved-pair) order, which Hugging Face's
loader un-permutes on the way in; random rows read either way are still a
valid model, and both sides read the same file.

The tokenizer section is a real byte-level BPE ("gpt2" model, GPT-2
pre-tokenizer) with merges learned from /usr/share/common-licenses/GPL-3:
Hugging Face does not need it to load the model (it reads
``llama.vocab_size``), but it makes the file a complete model that
posenc's BpeTokenizer and AutoTokenizer can also read.

Usage::

    path = write_random_llama(tmp_path / "random-llama.gguf", tied=True, dtype="f32")
"""

from __future__ import annotations

import collections
import pathlib
from typing import Dict, List, Tuple

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

VOCAB = 320
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
D = 64
BLOCKS = 2
HEADS = 4
KV_HEADS = 2
HEAD_DIM = D // HEADS
FFN = 96
THETA = 10000.0
CONTEXT = 64
EPS = 1e-5

DTYPES = ("f32", "f16", "q8_0")


def _byte_to_unicode() -> Dict[int, str]:
    """GPT-2's printable stand-in character for each byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def _learn_merges(count: int) -> List[Tuple[str, str]]:
    """`count` BPE merges learned greedily from a fixed English text (GPL-3,
    or a built-in sentence where Debian's license files are missing)."""
    path = pathlib.Path("/usr/share/common-licenses/GPL-3")
    text = path.read_text(encoding="utf-8") if path.is_file() else (
        "the quick brown fox jumps over the lazy dog; this is the license of the program " * 20)
    b2u = _byte_to_unicode()
    # GPT-2-like words: a leading space joins the word after it.
    words = collections.Counter()
    for i, w in enumerate(text.split()):
        words[tuple(b2u[b] for b in (" " + w if i else w).encode("utf-8"))] += 1
    merges: List[Tuple[str, str]] = []
    for _ in range(count):
        pairs = collections.Counter()
        for word, n in words.items():
            for a, b in zip(word, word[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        merged = collections.Counter()
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return merges


def tokenizer_vocabulary() -> Tuple[List[str], List[str], List[int]]:
    """(tokens, merges as "a b" strings, token types) of VOCAB entries."""
    b2u = _byte_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    merges = _learn_merges(VOCAB - 256 - len(SPECIAL_TOKENS))
    tokens += [a + b for a, b in merges]
    tokens += SPECIAL_TOKENS
    assert len(tokens) == VOCAB and len(set(tokens)) == VOCAB
    types = [int(gguf.TokenType.NORMAL)] * (VOCAB - len(SPECIAL_TOKENS)) + [int(gguf.TokenType.CONTROL)] * len(SPECIAL_TOKENS)
    return tokens, [f"{a} {b}" for a, b in merges], types


def random_weights(seed: int = 0, tied: bool = True) -> Dict[str, np.ndarray]:
    """llama.cpp tensor name -> float32 array in NumPy order.

    Linear weights are N(0, 1/in_features) so that each projection keeps
    unit scale: attention scores q.k/sqrt(head_dim) are O(1) (attention is
    far from uniform, so position handling matters). Token embeddings are
    N(0, 0.35^2): the input RMS norm removes their scale, and tied logits
    come out with a standard deviation of ~3 (next-token losses of a few nats,
    like a real model's, rather than tens).
    Norm weights are 1 + N(0, 0.1^2) so that a missing norm multiply shows."""
    rng = np.random.default_rng(seed)

    def linear(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm() -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)

    w = {"token_embd.weight": (0.35 * rng.standard_normal((VOCAB, D))).astype(np.float32)}
    for b in range(BLOCKS):
        p = f"blk.{b}."
        w[p + "attn_norm.weight"] = norm()
        w[p + "attn_q.weight"] = linear(HEADS * HEAD_DIM, D)
        w[p + "attn_k.weight"] = linear(KV_HEADS * HEAD_DIM, D)
        w[p + "attn_v.weight"] = linear(KV_HEADS * HEAD_DIM, D)
        w[p + "attn_output.weight"] = linear(D, HEADS * HEAD_DIM)
        w[p + "ffn_norm.weight"] = norm()
        w[p + "ffn_gate.weight"] = linear(FFN, D)
        w[p + "ffn_up.weight"] = linear(FFN, D)
        w[p + "ffn_down.weight"] = linear(D, FFN)
    w["output_norm.weight"] = norm()
    if not tied:
        w["output.weight"] = linear(VOCAB, D) * 3.0  # logits of the scale the tied embedding gives
    return w


def write_random_llama(path, tied: bool = True, dtype: str = "f32", seed: int = 0,
                     context_length: int = CONTEXT, with_vocab_size: bool = True) -> pathlib.Path:
    """Writes the random-weight model to `path` and returns it (a pathlib.Path).

    Args:
        tied: no output.weight (logits use token_embd, as SmolLM2).
        dtype: "f32", "f16" or "q8_0": the type of the 2-D weight tensors
            (norm weights stay F32, as llama.cpp writes them).
        seed: the weights' random seed.
        context_length: llama.context_length (the training length).
        with_vocab_size: write llama.vocab_size (llama.cpp writes it).
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype = {dtype!r}: must be one of {DTYPES}")
    path = pathlib.Path(path)
    tokens, merges, types = tokenizer_vocabulary()
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(f"posenc-random-llama-{'tied' if tied else 'untied'}-{dtype}")
    writer.add_context_length(context_length)
    writer.add_embedding_length(D)
    writer.add_block_count(BLOCKS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(THETA)
    writer.add_layer_norm_rms_eps(EPS)
    writer.add_rope_dimension_count(HEAD_DIM)
    if with_vocab_size:
        writer.add_vocab_size(VOCAB)
    writer.add_file_type({"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                          "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[dtype])
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_merges(merges)
    writer.add_token_types(types)
    writer.add_bos_token_id(VOCAB - 3)
    writer.add_eos_token_id(VOCAB - 3)
    for name, array in random_weights(seed, tied).items():
        if array.ndim == 1 or dtype == "f32":
            writer.add_tensor(name, array)
        elif dtype == "f16":
            writer.add_tensor(name, array.astype(np.float16))
        else:
            writer.add_tensor(name, quants.quantize(array, Q.Q8_0), raw_dtype=Q.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def stored_weights(path) -> Dict[str, np.ndarray]:
    """The tensors of a written file, dequantized by gguf-py (what both
    Hugging Face and posenc see: F16/Q8_0 rounding included)."""
    reader = gguf.GGUFReader(str(path))
    return {t.name: quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(
        tuple(int(x) for x in reversed(t.shape))) for t in reader.tensors}


if __name__ == "__main__":  # writes the three variants into the current directory
    for tied_ in (True, False):
        for dtype_ in DTYPES:
            print(write_random_llama(f"random-llama-{'tied' if tied_ else 'untied'}-{dtype_}.gguf", tied_, dtype_))

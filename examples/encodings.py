"""Encodings besides RoPE in Python: ALiBi slopes, T5 buckets, sinusoidal, a learned table, DeBERTa's reference."""
import os
import tempfile
import numpy as np
import posenc

rng = np.random.default_rng(0)
posenc.alibi_slopes(12)                                   # 1/2 ... 1/256, then 2^-0.5, 2^-1.5, ...
posenc.t5_relative_bucket(np.arange(-3, 4))               # t5-small: 32 buckets, max_distance 128
x = np.zeros((1, 4, 512), dtype=np.float32)               # [batch, seq, dim]
ids = np.array([[0, 0, 1, 2]])                            # left padding
y = posenc.add_sinusoidal(x, position_ids=ids, input_scale=512 ** 0.5)
path = os.path.join(tempfile.mkdtemp(), "wpe.npy")
np.save(path, rng.standard_normal((1024, 64), dtype=np.float32))   # GPT-2's wpe is [1024, 768]
table = posenc.LearnedTable.load(path)                    # strict .npy / .safetensors readers
q, k, v = (rng.standard_normal((1, 2, 6, 16)) for _ in range(3))   # [batch, heads, len, head_dim]
kr, qr = (rng.standard_normal((2, 2 * 256, 16)) for _ in range(2))   # [heads, 2 * position_buckets, head_dim]
r = posenc.reference.deberta_attention(q, k, v, pos_key=kr, pos_query=qr, layout="bhsd")   # r.scores, r.probs, r.output

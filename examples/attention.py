"""Attention in Python: the tiled kernel under each positional policy, masks and modifiers."""
import numpy as np
import posenc

rng = np.random.default_rng(0)
q = rng.standard_normal((1, 16, 8, 128), dtype=np.float32)     # [batch, q_len, q_heads, head_dim]
k = rng.standard_normal((1, 16, 2, 128), dtype=np.float32)     # [batch, kv_len, kv_heads, head_dim] (GQA)
v = rng.standard_normal((1, 16, 2, 128), dtype=np.float32)
slopes = posenc.alibi_slopes(8)                                # one per q head
w = rng.standard_normal((32, 8))                               # T5: [num_buckets, q_heads]

spec = posenc.RopeSpec.from_hf_config("examples/configs/llama-3.1-8b.json")
# q: 8 heads, k: 2 (GQA) fixes the axis order; shapes that fit both [batch, seq, heads, dim] and
# [batch, heads, seq, dim] need layout="bshd" or "bhsd" (Hugging Face's).
out = posenc.attention(q, k, v, encoding=posenc.RopeEncoding(spec))          # causal by default
out = posenc.attention(q, k, v, encoding=spec, window=4096)                 # Mistral's sliding_window = 4096
out = posenc.attention(q, k, v, window=1024, sinks=4)                       # Λ mask (StreamingLLM)
out = posenc.attention(q, k, v, encoding=posenc.ReRopeEncoding(spec, window=512, leak=16))
out = posenc.attention(q, k, v, encoding=posenc.AlibiEncoding(slopes, form="key-position"))   # BLOOM
out = posenc.attention(q, k, v, encoding=posenc.T5BiasEncoding(w, max_distance=128, bidirectional=False),
                       softmax_scale=1.0)                                   # w: relative_attention_bias.weight
out = posenc.attention(q, k, v, encoding=posenc.UrpeEncoding(w, np.full_like(w, 0.9), bidirectional=False))  # URPE
past = 12                                                                   # decode: 4 new queries after 12 cached keys
out = posenc.attention(q[:, -4:], k, v, encoding=spec, softcap=50.0, q_offset=past, kv_lengths=[16])
assert out.shape == (1, 4, 8, 128)

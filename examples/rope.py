"""RoPE in Python: a spec from a Hugging Face config.json, q and k rotated and rotated back."""
import numpy as np
import posenc

spec = posenc.RopeSpec.from_hf_config("examples/configs/llama-3.1-8b.json")
inv_freq, attention_factor = spec.frequencies(seq_len=8192)

q = np.random.randn(1, 16, 32, 128).astype(np.float32)
k = np.random.randn(1, 16, 8, 128).astype(np.float32)
q_rot, k_rot = posenc.apply_rope(spec, q, k, offset=100, layout="bshd")      # or offsets=[...], position_ids=...
q_back, = posenc.apply_rope(spec, q_rot, offset=100, direction="inverse", layout="bshd")
assert np.allclose(q_back, q, atol=1e-4)

"""The Tiny-LLM course's RoPE class, as a drop-in: each offset form is one posenc.apply_rope call."""
import numpy as np
import torch
import posenc

rope = posenc.RoPE(dims=64, seq_len=1024, base=10000, traditional=False)   # the course's arguments
x = np.random.randn(2, 10, 8, 64).astype(np.float32)                        # [N, S, H, D]

y0 = rope(x)                                              # offset None: positions 0..9
y1 = rope(x, offset=slice(100, 110))                      # every row at positions 100..109
y2 = rope(x, offset=[slice(0, 10), slice(500, 510)])      # one slice per row (batched decode)
t = rope(torch.from_numpy(x), offset=slice(100, 110))     # PyTorch in, PyTorch out (MLX arrays too)

# The same calls on the kernel: rope.spec is RopeSpec(theta=base, head_dim=dims, layout=...).
assert np.array_equal(y0, posenc.apply_rope(rope.spec, x, layout="bshd"))
assert np.array_equal(y1, posenc.apply_rope(rope.spec, x, offset=100, layout="bshd"))
assert np.array_equal(y2, posenc.apply_rope(rope.spec, x, offsets=[0, 500], layout="bshd"))
assert np.array_equal(t.numpy(), y1)

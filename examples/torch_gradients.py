"""Gradients from PyTorch: posenc.torch's RoPE and attention as autograd Functions, on HF-layout tensors."""
import torch
import posenc
import posenc.torch

# RoPE with YaRN, 4x past a training length of 256 (any Hugging Face rope_scaling dict).
spec = posenc.RopeSpec(theta=10000.0, head_dim=64,
                       scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256})
q = torch.randn(2, 8, 256, 64, requires_grad=True)         # Hugging Face's [batch, heads, seq, head_dim]
k = torch.randn(2, 2, 256, 64, requires_grad=True)         # GQA: 2 key heads
v = torch.randn(2, 2, 256, 64, requires_grad=True)

# Leaky ReRoPE inside the attention: the kernel forward, the materialized backward.
out = posenc.torch.attention(q, k, v, encoding=posenc.ReRopeEncoding(spec, window=64, leak=8.0), layout="bhsd")
out.square().mean().backward()

# A trainable T5 bias table (relative_attention_bias.weight) gets its gradient too.
table = torch.nn.Parameter(torch.zeros(32, 8))
out = posenc.torch.attention(q, k, v, encoding=posenc.torch.T5BiasEncoding(table, max_distance=128),
                             softmax_scale=1.0, layout="bhsd")
out.square().mean().backward()

q_rot, k_rot = posenc.torch.apply_rope(spec, q, k, offset=100, layout="bhsd")   # backward: the inverse rotation
(q_rot.sum() + k_rot.sum()).backward()
assert q.grad.shape == q.shape and table.grad.abs().sum() > 0

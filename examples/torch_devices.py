"""posenc.torch and posenc.hf on any device: the same method as torch operations where the tensors are."""
import torch
import transformers
import posenc
import posenc.hf
import posenc.torch

device = "cuda" if torch.cuda.is_available() else "cpu"
backend = "torch" if device == "cpu" else None      # None: the kernel on the CPU, torch operations elsewhere

# Self-Extend planned for 512 tokens of a model trained on 128: posenc's exact groups, windows and frequencies.
spec = posenc.RopeSpec(theta=10000.0, head_dim=64)
plan = posenc.extension_attention("self-extend", spec, train_length=128, target_length=512)
q = torch.randn(1, 8, 512, 64, device=device, requires_grad=True)  # Hugging Face's [batch, heads, seq, head_dim]
k = torch.randn(1, 2, 512, 64, device=device)                      # GQA: 2 key heads
v = torch.randn(1, 2, 512, 64, device=device)
out = posenc.torch.attention(q, k, v, layout="bhsd", backend=backend, **plan)   # on q's device
out.square().mean().backward()                                     # autograd through torch's own operations

kernel = posenc.torch.attention(q.detach().cpu(), k.cpu(), v.cpu(), layout="bhsd", backend="kernel", **plan)
assert float((out.detach().cpu() - kernel).abs().max()) < 1e-5      # the CPU kernel's function

# A Hugging Face model where it lives: each layer runs the torch path there.
config = transformers.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
model = transformers.LlamaForCausalLM(config).to(device)
posenc.hf.apply(model, "leaky-rerope", target_length=512, backend=backend)
ids = torch.randint(0, 1000, (1, 512), device=device)
print(model(ids, labels=ids).loss.item(), q.grad.device)

"""posenc.hf: a Hugging Face Llama run through posenc's attention, Self-Extend past its training length."""
import torch
import transformers
import posenc.hf

config = transformers.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
model = transformers.LlamaForCausalLM(config)          # or .from_pretrained(...): any Llama, Mistral, Qwen2 or Phi-3
ids = torch.randint(0, 1000, (2, 1024))                # 4x the training length

posenc.hf.apply(model, "self-extend", target_length=1024)            # every attention layer, one call
loss = model(ids, labels=ids).loss                                     # the cache, padding masks, generate as usual
loss.backward()                                                        # gradients through posenc.torch
posenc.hf.apply(model, "rerope:window=128", target_length=1024)      # another method: re-apply
posenc.hf.remove(model)                                                # Hugging Face's own attention again

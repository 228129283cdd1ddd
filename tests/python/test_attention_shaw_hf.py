"""The kernel's Shaw policy against Hugging Face BERT's relative_key and
relative_key_query self-attention (BertSelfAttention, float64)."""
import numpy as np
import pytest
import torch
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertSelfAttention

import posenc


@pytest.mark.parametrize("kind", ["relative_key", "relative_key_query"])
def test_bert_relative_self_attention(kind):
    torch.manual_seed(0)
    heads, head_dim, seq, max_pos = 4, 16, 23, 32  # a bert-base-like layer, small
    config = BertConfig(hidden_size=heads * head_dim, num_attention_heads=heads, max_position_embeddings=max_pos,
                        position_embedding_type=kind, attention_probs_dropout_prob=0.0)
    layer = BertSelfAttention(config, position_embedding_type=kind).double().eval()
    x = torch.randn(2, seq, heads * head_dim, dtype=torch.float64)
    with torch.no_grad():
        expected = layer(x)[0].numpy()  # [batch, seq, hidden], before the output projection
        q, k, v = (proj(x).numpy().reshape(2, seq, heads, head_dim) for proj in (layer.query, layer.key, layer.value))
    # HF's table row is distance + max_pos - 1 with distance = i - j: K = max_pos - 1, query minus key.
    table = layer.distance_embedding.weight.detach().numpy()
    encoding = posenc.ShawEncoding(table, None, max_distance=max_pos - 1, query_minus_key=True,
                                    key_term=True, query_term=kind == "relative_key_query")
    got = posenc.attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32),
                           encoding=encoding, causal=False, layout="bshd")
    np.testing.assert_allclose(got.reshape(2, seq, -1), expected, atol=2e-5, rtol=2e-5)


def test_shaw_table_shape_is_checked():
    with pytest.raises(ValueError, match=r"rel_k\.shape"):
        posenc.ShawEncoding(np.zeros((4, 8)), max_distance=2)

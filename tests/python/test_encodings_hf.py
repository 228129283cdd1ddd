"""posenc's absolute and relative encodings against Hugging Face (transformers 4.49).

Oracles, with small seeded random configs named after the models they mimic:
  * T5 (t5-small: 32 buckets, max_distance 128): T5Attention._relative_position_bucket
    (exact, every distance in [-2000, 2000], encoder and decoder), compute_bias
    (prefill and decode with cache_position) and the attention probabilities
    and output of T5Attention.
  * BLOOM (bloom-560m: 16 heads; also 5, 6, 12, 20, 24 heads): build_alibi_tensor
    with left padding, and BloomAttention's probabilities and output.
  * BERT relative_key / relative_key_query (BertSelfAttention).
  * XLNet (xlnet-base-like, small): relative_positional_encoding and
    XLNetRelativeAttention.rel_attn_core with memory, segments and a mask.
  * DeBERTa-v2 (deberta-v3-base-like, small): make_log_bucket_position,
    build_relative_position and DisentangledSelfAttention (c2p+p2c, c2p only,
    share_att_key on/off, buckets off).
  * DistilBERT create_sinusoidal_embeddings, OPT's learned positions (+2 offset).

Every module runs in float64 (posenc's float64 references must agree to
~1e-12) and float32 (TOLERANCE["f32"]); the encodings added to embeddings
are also checked in float16/bfloat16 with TOLERANCE. test_observed_errors
runs every case again (under pytest-xdist the others run in other workers),
prints the largest errors (pytest -s) and holds them to what the dtypes'
rounding explains: every comparison seen, each error within a budget in
units of its dtype's rounding, and larger in a coarser dtype.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from transformers import BertConfig, BloomConfig, DebertaV2Config, T5Config, XLNetConfig
from transformers.models.bert.modeling_bert import BertSelfAttention
from transformers.models.bloom import modeling_bloom
from transformers.models.deberta_v2 import modeling_deberta_v2
from transformers.models.distilbert import modeling_distilbert
from transformers.models.opt.modeling_opt import OPTLearnedPositionalEmbedding
from transformers.models.t5.modeling_t5 import T5Attention
from transformers.models.xlnet.modeling_xlnet import XLNetModel, XLNetRelativeAttention

import posenc
from rope_oracles import DTYPES, TOLERANCE, UNIT, f64, hf_fp32_angle_slack, to_numpy, to_torch

OBSERVED: dict = {}

# float64 modules against float64 references: only summation order differs.
F64_TOL = 1e-10
TORCH_DTYPES = {"f64": torch.float64, "f32": torch.float32}
MODULE_DTYPES = list(TORCH_DTYPES)
ATTN_TOL = {"f64": F64_TOL, "f32": TOLERANCE["f32"]}
# T5 and BLOOM take their softmax in float32 even for float64 modules.
SOFTMAX_F32_TOL = {"f64": 1e-6, "f32": TOLERANCE["f32"]}
# DeBERTa forms its scale sqrt(head_dim * factor) in float32 even for float64
# modules (scaled_size_sqrt): a 3e-8 relative error on every logit.
DEBERTA_TOL = {"f64": 1e-7, "f32": TOLERANCE["f32"]}


def record(name: str, error: float) -> None:
    OBSERVED[name] = max(OBSERVED.get(name, 0.0), float(error))


def check(name: str, got, want, tol: float) -> None:
    got, want = f64(got), f64(want)
    assert got.shape == want.shape, (name, got.shape, want.shape)
    error = float(np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))) if got.size else 0.0
    record(name, error)
    assert error <= tol, f"{name}: max error {error:.3g} > {tol:.3g}"


def seed(n: int) -> None:
    torch.manual_seed(n)
    np.random.seed(n)


def heads_of(x: torch.Tensor, heads: int) -> np.ndarray:
    """[batch, len, heads * d] -> float64 [batch, heads, len, d]."""
    b, l, hd = x.shape
    return x.detach().double().numpy().reshape(b, l, heads, hd // heads).transpose(0, 2, 1, 3).copy()


def merge_heads(x: np.ndarray) -> np.ndarray:
    b, h, l, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, l, h * d)


def linear(module: torch.nn.Linear, x: np.ndarray) -> np.ndarray:
    y = x @ module.weight.detach().double().numpy().T
    if module.bias is not None:
        y = y + module.bias.detach().double().numpy()
    return y


# ---- T5 ---------------------------------------------------------------------------

T5_BUCKET_CONFIGS = [  # (num_buckets, max_distance): t5-small, t5-v1.1-xl-like, small ones, odd causal
    (32, 128), (64, 256), (16, 32), (8, 20), (32, 64), (33, 100)]
BIDIRECTIONAL = [True, False]
IS_DECODER = [False, True]


@pytest.mark.parametrize("num_buckets,max_distance", T5_BUCKET_CONFIGS)
@pytest.mark.parametrize("bidirectional", BIDIRECTIONAL)
def test_t5_relative_position_bucket(num_buckets, max_distance, bidirectional):
    if bidirectional and num_buckets % 2:
        with pytest.raises(ValueError, match=r"\[t5_bias\] num_buckets = 33: must be even"):
            posenc.t5_relative_bucket([0], num_buckets=num_buckets, bidirectional=True)
        return
    rel = torch.arange(-2000, 2001)
    want = T5Attention._relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                                 max_distance=max_distance).numpy()
    got = posenc.t5_relative_bucket(rel.numpy(), num_buckets=num_buckets, max_distance=max_distance,
                                    bidirectional=bidirectional)
    mismatches = np.flatnonzero(got != want)
    record("t5 bucket mismatches", len(mismatches))
    assert len(mismatches) == 0, f"distances {rel.numpy()[mismatches][:10]}: posenc {got[mismatches][:10]}, HF {want[mismatches][:10]}"


def t5_small_attention(dtype, is_decoder=False):
    config = T5Config(d_model=64, d_kv=16, num_heads=4, relative_attention_num_buckets=32,
                      relative_attention_max_distance=128, dropout_rate=0.0, is_decoder=is_decoder)
    attn = T5Attention(config, has_relative_attention_bias=True, layer_idx=0).eval().to(dtype)
    with torch.no_grad():
        attn.relative_attention_bias.weight.normal_(0, 1)
    return attn


@pytest.mark.parametrize("dtype", MODULE_DTYPES)
@pytest.mark.parametrize("is_decoder", IS_DECODER)
def test_t5_compute_bias(dtype, is_decoder):
    seed(1)
    attn = t5_small_attention(TORCH_DTYPES[dtype], is_decoder)
    weights = attn.relative_attention_bias.weight.detach().double().numpy()
    for q_len, k_len, cache in [(40, 40, None), (300, 300, None), (1, 200, 199), (3, 150, 147)]:
        cache_position = None if cache is None else torch.arange(cache, cache + q_len)
        with torch.no_grad():
            want = attn.compute_bias(q_len, k_len, cache_position=cache_position)[0]
        got = posenc.t5_bias(weights, q_len, k_len, query_offset=cache or 0, bidirectional=not is_decoder)
        check(f"t5 compute_bias {dtype}", got, want, 0.0)  # a gather: exact


@pytest.mark.parametrize("dtype", MODULE_DTYPES)
@pytest.mark.parametrize("is_decoder", IS_DECODER)
def test_t5_attention(dtype, is_decoder):
    seed(2)
    attn = t5_small_attention(TORCH_DTYPES[dtype], is_decoder)
    batch, length = 2, 150  # past max_distance: the last bucket is used
    hidden = torch.randn(batch, length, 64, dtype=TORCH_DTYPES[dtype]) * 0.3
    mask = None
    if is_decoder:
        mask = torch.zeros(1, 1, length, length, dtype=hidden.dtype).masked_fill(
            torch.ones(length, length, dtype=torch.bool).triu(1), torch.finfo(hidden.dtype).min)
    with torch.no_grad():
        out, _, _, probs = attn(hidden, mask=mask, output_attentions=True, cache_position=torch.arange(length))
    h = hidden.double().numpy()
    q, k, v = (heads_of(torch.from_numpy(linear(m, h)), 4) for m in (attn.q, attn.k, attn.v))
    r = posenc.reference.t5_attention(q, k, v, attn.relative_attention_bias.weight.detach().double().numpy(),
                                      bidirectional=not is_decoder, causal=is_decoder, layout="bhsd")
    check(f"t5 attention probs {dtype}", r.probs, probs, SOFTMAX_F32_TOL[dtype])
    check(f"t5 attention output {dtype}", linear(attn.o, merge_heads(r.output)), out, SOFTMAX_F32_TOL[dtype])


# ---- BLOOM / ALiBi ----------------------------------------------------------------

BLOOM_HEADS = [16, 8, 12, 5, 6, 20, 24, 1]  # bloom-560m has 16
BLOOM_TABLE_DTYPES = ["f32", "bf16"]
LEFT_PADDING = [False, True]


@pytest.mark.parametrize("heads", BLOOM_HEADS)
@pytest.mark.parametrize("dtype", BLOOM_TABLE_DTYPES)
def test_bloom_build_alibi_tensor(heads, dtype):
    mask = torch.tensor([[1] * 9, [0, 0, 0] + [1] * 6, [0] * 8 + [1]])  # left padding
    want = modeling_bloom.build_alibi_tensor(mask, heads, DTYPES[dtype][1])
    got = posenc.alibi_key_bias_from_mask(heads, mask.numpy())
    tol = {"f32": 1e-6, "bf16": TOLERANCE["bf16"]}[dtype]
    check(f"bloom build_alibi_tensor {dtype}", got.reshape(3 * heads, 1, 9), to_numpy(want), tol)
    # The slopes themselves (position 1 of row 0).
    check(f"bloom slopes {dtype}", posenc.alibi_slopes(heads), want.float().numpy().reshape(3, heads, 9)[0, :, 1],
          1e-6 if dtype == "f32" else TOLERANCE["bf16"])


@pytest.mark.parametrize("dtype", MODULE_DTYPES)
@pytest.mark.parametrize("left_padding", LEFT_PADDING)
def test_bloom_attention(dtype, left_padding):
    seed(3)
    heads, hidden_size, batch, length = 16, 64, 2, 20  # bloom-560m's 16 heads, small width
    config = BloomConfig(hidden_size=hidden_size, n_head=heads, attention_dropout=0.0, hidden_dropout=0.0)
    attn = modeling_bloom.BloomAttention(config, layer_idx=0).eval().to(TORCH_DTYPES[dtype])
    hidden = torch.randn(batch, length, hidden_size, dtype=TORCH_DTYPES[dtype])
    pad = torch.ones(batch, length, dtype=torch.long)
    if left_padding:
        pad[1, :6] = 0
    alibi = modeling_bloom.build_alibi_tensor(pad, heads, hidden.dtype)
    blocked = torch.ones(length, length, dtype=torch.bool).triu(1)[None, None] | (pad[:, None, None, :] == 0)
    mask = torch.zeros(batch, 1, length, length, dtype=hidden.dtype).masked_fill(blocked, torch.finfo(hidden.dtype).min)
    with torch.no_grad():
        out, _, probs = attn(hidden, torch.zeros_like(hidden), alibi, mask, output_attentions=True)
    fused = linear(attn.query_key_value, hidden.double().numpy()).reshape(batch, length, heads, 3, -1)
    q, k, v = (fused[..., i, :].transpose(0, 2, 1, 3).copy() for i in range(3))
    bias = posenc.alibi_key_bias_from_mask(heads, pad.numpy())[:, :, None, :] * np.ones((1, 1, length, 1))
    r = posenc.reference.biased_attention(q, k, v, bias, causal=True, key_padding=pad.numpy(), layout="bhsd")
    rows = pad.numpy().astype(bool)  # fully padded query rows differ by convention (HF: uniform)
    probs_np = probs.double().numpy()
    check(f"bloom attention probs {dtype}", r.probs.transpose(0, 2, 1, 3)[rows], probs_np.transpose(0, 2, 1, 3)[rows],
          SOFTMAX_F32_TOL[dtype])
    got_out = linear(attn.dense, merge_heads(r.output))
    check(f"bloom attention output {dtype}", got_out[rows], out.double().numpy()[rows], SOFTMAX_F32_TOL[dtype])
    if not left_padding:
        # Without padding the key-position form is ALiBi itself on causal rows.
        r2 = posenc.reference.alibi_attention(q, k, v, form="key-position", causal=True, layout="bhsd")
        check(f"bloom reference.alibi_attention {dtype}", r2.probs, probs_np, SOFTMAX_F32_TOL[dtype])
        r3 = posenc.reference.alibi_attention(q, k, v, form="distance", causal=True, layout="bhsd")
        check(f"bloom alibi distance form {dtype}", r3.probs, probs_np, SOFTMAX_F32_TOL[dtype])


# ---- BERT relative_key / relative_key_query --------------------------------------

BERT_KINDS = ["relative_key", "relative_key_query"]


@pytest.mark.parametrize("dtype", MODULE_DTYPES)
@pytest.mark.parametrize("kind", BERT_KINDS)
def test_bert_relative_attention(dtype, kind):
    seed(4)
    max_pos, heads, hidden_size, batch, length = 16, 4, 32, 2, 12
    config = BertConfig(hidden_size=hidden_size, num_attention_heads=heads, max_position_embeddings=max_pos,
                        position_embedding_type=kind, attention_probs_dropout_prob=0.0)
    attn = BertSelfAttention(config).eval().to(TORCH_DTYPES[dtype])
    hidden = torch.randn(batch, length, hidden_size, dtype=TORCH_DTYPES[dtype])
    with torch.no_grad():
        context, probs = attn(hidden, output_attentions=True)
    h = hidden.double().numpy()
    q, k, v = (heads_of(torch.from_numpy(linear(m, h)), heads) for m in (attn.query, attn.key, attn.value))
    r = posenc.reference.shaw_attention(q, k, v, max_distance=max_pos - 1,
                                        rel_k=attn.distance_embedding.weight.detach().double().numpy(),
                                        distance="query-minus-key", query_term=kind == "relative_key_query", layout="bhsd")
    check(f"bert {kind} probs {dtype}", r.probs, probs, ATTN_TOL[dtype])
    check(f"bert {kind} context {dtype}", merge_heads(r.output), context, ATTN_TOL[dtype])


# ---- XLNet ------------------------------------------------------------------------

XLNET_ENCODING_CASES = [(6, 6, -1), (5, 12, -1), (7, 9, 4)]  # qlen, klen, clamp_len
XLNET_CORE_CASES = [(6, 0, False, False), (5, 7, False, False), (6, 3, True, False), (6, 4, True, True)]


def xlnet_config():
    return XLNetConfig(d_model=32, n_head=4, d_head=8, n_layer=1, d_inner=64, dropout=0.0, clamp_len=-1)


@pytest.mark.parametrize("qlen,klen,clamp_len", XLNET_ENCODING_CASES)
def test_xlnet_relative_positional_encoding(qlen, klen, clamp_len):
    config = xlnet_config()
    config.clamp_len = clamp_len
    model = XLNetModel(config).eval()
    want = model.relative_positional_encoding(qlen, klen, bsz=1)[:, 0]
    got = posenc.xlnet_relative_encoding(32, qlen, klen, clamp_len=max(clamp_len, 0))
    # HF forms the angles in float32: ~1 ulp of angles up to klen radians.
    check("xlnet relative_positional_encoding f32", got, want, 1e-5)


@pytest.mark.parametrize("dtype", MODULE_DTYPES)
@pytest.mark.parametrize("qlen,mlen,segments,masked", XLNET_CORE_CASES)
def test_xlnet_rel_attn_core(dtype, qlen, mlen, segments, masked):
    seed(5)
    td = TORCH_DTYPES[dtype]
    config = xlnet_config()
    attn = XLNetRelativeAttention(config).eval().to(td)
    with torch.no_grad():  # the parameters are created uninitialized
        for p in (attn.q, attn.k, attn.v, attn.o, attn.r):
            p.normal_(0, 0.2)
        for p in (attn.r_r_bias, attn.r_s_bias, attn.r_w_bias, attn.seg_embed):
            p.normal_(0, 0.5)
    bsz, klen, n, d = 2, qlen + mlen, 4, 8
    h = torch.randn(klen, bsz, 32, dtype=td)  # [mems; current] as XLNet concatenates them
    pos_emb = XLNetModel(config).relative_positional_encoding(qlen, klen, bsz=bsz).to(td)  # [rlen, bsz, d_model]
    q_head = torch.einsum("ibh,hnd->ibnd", h[mlen:], attn.q)
    k_head_h = torch.einsum("ibh,hnd->ibnd", h, attn.k)
    v_head_h = torch.einsum("ibh,hnd->ibnd", h, attn.v)
    k_head_r = torch.einsum("ibh,hnd->ibnd", pos_emb, attn.r)
    seg_mat = attn_mask = segment_differs = None
    if segments:
        seg_id = torch.randint(0, 2, (klen, bsz))
        differs = (seg_id[mlen:, None] != seg_id[None, :]).long()  # [qlen, klen, bsz]
        seg_mat = torch.nn.functional.one_hot(differs, 2).to(td)
        segment_differs = differs.permute(2, 0, 1).numpy().astype(np.uint8)
    if masked:  # causal over [mems; current]
        attn_mask = torch.ones(qlen, klen).triu(mlen + 1)[:, :, None, None].expand(qlen, klen, bsz, n).to(td)
    with torch.no_grad():
        vec, prob = attn.rel_attn_core(q_head, k_head_h, v_head_h, k_head_r, seg_mat=seg_mat, attn_mask=attn_mask,
                                       output_attentions=True)
    to_bhld = lambda t: t.detach().double().numpy().transpose(1, 2, 0, 3).copy()  # ibnd -> bnid
    r = posenc.reference.xlnet_attention(
        to_bhld(q_head), to_bhld(k_head_h), to_bhld(v_head_h), rel_k=to_bhld(k_head_r),
        r_w_bias=attn.r_w_bias.detach().double().numpy(), r_r_bias=attn.r_r_bias.detach().double().numpy(),
        r_s_bias=attn.r_s_bias.detach().double().numpy() if segments else None,
        seg_embed=attn.seg_embed.detach().double().numpy() if segments else None,
        segment_differs=segment_differs, causal=masked, layout="bhsd")
    check(f"xlnet probs {dtype}", r.probs, prob.permute(2, 3, 0, 1), ATTN_TOL[dtype])
    check(f"xlnet attn_vec {dtype}", r.output, vec.permute(1, 2, 0, 3), ATTN_TOL[dtype])


# ---- DeBERTa-v2 -------------------------------------------------------------------

DEBERTA_BUCKET_CASES = [(256, 512), (8, 16), (32, 100), (6, 10)]  # bucket_size, max_position


@pytest.mark.parametrize("bucket_size,max_position", DEBERTA_BUCKET_CASES)
def test_deberta_make_log_bucket_position(bucket_size, max_position):
    rel = torch.arange(-3000, 3001)
    want = modeling_deberta_v2.make_log_bucket_position(rel, bucket_size, max_position).long().numpy()
    got = posenc.deberta_log_bucket(rel.numpy(), bucket_size, max_position)
    mismatches = np.flatnonzero(got != want)
    record("deberta bucket mismatches", len(mismatches))
    assert len(mismatches) == 0, f"{rel.numpy()[mismatches][:10]}: posenc {got[mismatches][:10]}, HF {want[mismatches][:10]}"
    q = torch.zeros(1, 300, 1)
    want_matrix = modeling_deberta_v2.build_relative_position(q, q, bucket_size, max_position)[0].numpy()
    got_matrix = posenc.deberta_relative_positions(300, 300, position_buckets=bucket_size,
                                                   max_relative_positions=max_position)
    assert np.array_equal(got_matrix, want_matrix)


DEBERTA_CASES = {  # deberta-v3-base: share_att_key, p2c|c2p, 256 buckets, 512 positions (scaled down here)
    "v3-base-like": dict(share_att_key=True, pos_att_type=["p2c", "c2p"], position_buckets=8,
                         max_relative_positions=16),
    "c2p-only": dict(share_att_key=True, pos_att_type=["c2p"], position_buckets=8, max_relative_positions=16),
    "separate-proj": dict(share_att_key=False, pos_att_type=["p2c", "c2p"], position_buckets=8,
                          max_relative_positions=16),
    "no-buckets": dict(share_att_key=True, pos_att_type=["p2c", "c2p"], position_buckets=-1,
                       max_relative_positions=10),
}


@pytest.mark.parametrize("dtype", MODULE_DTYPES)
@pytest.mark.parametrize("case", list(DEBERTA_CASES))
def test_deberta_disentangled_attention(dtype, case):
    seed(6)
    td = TORCH_DTYPES[dtype]
    params = DEBERTA_CASES[case]
    heads, hidden_size, batch, length = 4, 32, 2, 40  # past max_relative_positions: clamped buckets
    config = DebertaV2Config(hidden_size=hidden_size, num_attention_heads=heads, relative_attention=True,
                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **params)
    attn = modeling_deberta_v2.DisentangledSelfAttention(config).eval().to(td)
    span = attn.pos_ebd_size
    hidden = torch.randn(batch, length, hidden_size, dtype=td)
    rel_emb = torch.randn(2 * span, hidden_size, dtype=td)
    mask = torch.ones(batch, 1, length, length, dtype=torch.bool)
    with torch.no_grad():
        context, probs = attn(hidden, mask, output_attentions=True, rel_embeddings=rel_emb)
    h, e = hidden.double().numpy(), rel_emb.double().numpy()[None]
    q, k, v = (heads_of(torch.from_numpy(linear(m, h)), heads)
               for m in (attn.query_proj, attn.key_proj, attn.value_proj))
    key_proj = attn.key_proj if params["share_att_key"] else getattr(attn, "pos_key_proj", None)
    query_proj = attn.query_proj if params["share_att_key"] else getattr(attn, "pos_query_proj", None)
    pos_key = heads_of(torch.from_numpy(linear(key_proj, e)), heads)[0] if "c2p" in params["pos_att_type"] else None
    pos_query = heads_of(torch.from_numpy(linear(query_proj, e)), heads)[0] if "p2c" in params["pos_att_type"] else None
    r = posenc.reference.deberta_attention(q, k, v, pos_key=pos_key, pos_query=pos_query,
                                           position_buckets=params["position_buckets"],
                                           max_relative_positions=params["max_relative_positions"], layout="bhsd")
    check(f"deberta {case} probs {dtype}", r.probs, probs, DEBERTA_TOL[dtype])
    check(f"deberta {case} context {dtype}", merge_heads(r.output), context, DEBERTA_TOL[dtype])


# ---- absolute encodings -----------------------------------------------------------

SINUSOID_DIMS = [4, 32, 768]
SINUSOID_ORDERS = ["interleaved", "concat"]


@pytest.mark.parametrize("dim", SINUSOID_DIMS)
def test_distilbert_sinusoidal_embeddings(dim):
    out = torch.empty(600, dim)
    modeling_distilbert.create_sinusoidal_embeddings(600, dim, out)
    check("distilbert create_sinusoidal_embeddings f32", posenc.sinusoidal_table(dim, 600), out.numpy(), 1e-6)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("order", SINUSOID_ORDERS)
def test_add_sinusoidal_against_float64(dtype, order, rng):
    np_dtype = DTYPES[dtype][0]
    x = rng.standard_normal((3, 17, 33)).astype(np.float32).astype(np_dtype)
    ids = np.array([np.arange(17) + 1000003, rng.permutation(17), np.r_[np.zeros(5), np.arange(12)]], np.int64)
    got = posenc.add_sinusoidal(x, position_ids=ids, input_scale=math.sqrt(33), order=order)
    want = math.sqrt(33) * f64(x) + posenc.sinusoidal_table(33, ids.reshape(-1), order=order).reshape(3, 17, 33)
    check(f"add_sinusoidal {dtype}", got, want, TOLERANCE[dtype])  # error relative to max(1, |value|)
    ref = posenc.add_sinusoidal(x, position_ids=ids, input_scale=math.sqrt(33), order=order, reference=True)
    check(f"add_sinusoidal fast vs reference {dtype}", got, ref, TOLERANCE[dtype])


def test_opt_learned_positions_with_left_padding(tmp_path):
    seed(7)
    emb = OPTLearnedPositionalEmbedding(30, 8)  # OPT: 30 positions + 2 offset rows
    mask = torch.tensor([[1] * 10, [0, 0, 0, 0] + [1] * 6])
    with torch.no_grad():
        want = emb(mask).numpy()
    from safetensors.torch import save_file
    path = tmp_path / "opt_positions.safetensors"
    save_file({"decoder.embed_positions.weight": emb.weight.detach().clone()}, str(path))
    table = posenc.LearnedTable.load(path, "decoder.embed_positions.weight")
    assert (table.rows, table.dim, table.source_dtype) == (32, 8, "F32")
    ids = posenc.position_ids_from_mask(mask.numpy())
    got = table.lookup(ids, row_offset=2)
    real = mask.numpy().astype(bool)  # padding rows differ by convention (OPT reads row 1)
    check("opt learned positions f32", got[real], want[real], 0.0)
    x = np.zeros((2, 10, 8), np.float32)
    added = table.add(x, position_ids=ids, row_offset=2)
    check("opt learned add f32", added[real], want[real], 0.0)
    with pytest.raises(ValueError, match=r"\[learned_table\] position\[0, 0\] = 30: must be < 30"):
        table.add(x, offset=30, row_offset=2)


def test_npy_table_round_trip(tmp_path):
    values = np.random.default_rng(8).standard_normal((50, 6))
    for dtype, name in [(np.float32, "<f4"), (np.float16, "<f2"), (np.float64, "<f8")]:
        path = tmp_path / f"wpe_{name[1:]}.npy"
        np.save(path, values.astype(dtype))
        table = posenc.LearnedTable.load(path)
        assert table.source_dtype == name
        np.testing.assert_array_equal(table.values, values.astype(dtype).astype(np.float32))
    np.save(tmp_path / "bad.npy", values.astype(np.int32))
    with pytest.raises(ValueError, match=r"\[npy\] header.descr = \"<i4\""):
        posenc.LearnedTable.load(tmp_path / "bad.npy")
    np.save(tmp_path / "fortran.npy", np.asfortranarray(values))
    with pytest.raises(ValueError, match=r"fortran_order = True"):
        posenc.LearnedTable.load(tmp_path / "fortran.npy")


# ---- the observed errors --------------------------------------------------------------

COMPARISONS = (
    ["t5 bucket mismatches", "deberta bucket mismatches", "xlnet relative_positional_encoding f32",
     "distilbert create_sinusoidal_embeddings f32", "opt learned positions f32", "opt learned add f32"]
    + [f"{stem} {dtype}" for dtype in MODULE_DTYPES for stem in (
        "t5 compute_bias", "t5 attention probs", "t5 attention output", "bloom attention probs",
        "bloom attention output", "bloom reference.alibi_attention", "bloom alibi distance form",
        *(f"bert {kind} {what}" for kind in BERT_KINDS for what in ("probs", "context")),
        "xlnet probs", "xlnet attn_vec",
        *(f"deberta {case} {what}" for case in DEBERTA_CASES for what in ("probs", "context")))]
    + [f"bloom {what} {dtype}" for what in ("build_alibi_tensor", "slopes") for dtype in BLOOM_TABLE_DTYPES]
    + [f"add_sinusoidal{what} {dtype}" for what in ("", " fast vs reference") for dtype in DTYPES])
# check()'s error is relative to max(1, |value|), so one rounding of a value to a dtype costs at most
# one UNIT of it (rope_oracles: half an ulp of a value in [1, 2)).
# float64 on both sides: only the order of the sums differs (seen: up to 16 units).
FLOAT64 = 64 * UNIT["f64"]
# A Hugging Face module's float32 arithmetic: its projections, sums over up to 150 keys, exp, and pow
# (BLOOM's slopes: a float32 base raised to up to the 16th power) (seen: up to 9.7 units).
FLOAT32 = 32 * UNIT["f32"]
# T5 and BLOOM take their softmax in float32 and DeBERTa its scale, even for float64 modules.
FLOAT32_IN_FLOAT64 = ("t5 attention", "bloom", "deberta")
# posenc's add_sinusoidal in float32: sqrt(d) and the table's value rounded, the product, the sum.
ADD_F32 = 4 * UNIT["f32"]


def budget(name: str) -> float:
    """What the comparison `name` (its stem, then its dtype) may differ by."""
    if name.endswith("mismatches") or name.startswith(("t5 compute_bias", "opt learned")):
        return 0.0  # bucket ids and gathers: exact
    stem, dtype = name.rsplit(" ", 1)
    if stem == "distilbert create_sinusoidal_embeddings":
        return UNIT[dtype]  # Hugging Face's float64 table, rounded once
    if stem == "xlnet relative_positional_encoding":  # float32 angles up to klen radians, then sin, cos
        return hf_fp32_angle_slack(max(klen for _, klen, _ in XLNET_ENCODING_CASES)) + 2 * UNIT[dtype]
    if stem == "add_sinusoidal":  # rounded once from float32
        return ADD_F32 + (UNIT[dtype] if dtype != "f32" else 0.0)
    if stem == "add_sinusoidal fast vs reference":  # the fast one from float32, the reference from float64
        return ADD_F32 + (UNIT["f32"] if dtype == "f32" else 2 * UNIT[dtype])
    if stem.startswith(("bloom build_alibi_tensor", "bloom slopes")):  # float32, then bf16 once
        return FLOAT32 + (UNIT[dtype] if dtype == "bf16" else 0.0)
    if dtype == "f64" and not stem.startswith(FLOAT32_IN_FLOAT64):
        return FLOAT64
    return FLOAT32


# Whose error the dtype does not order: both dtypes round the same way (the exact ones; fast vs
# reference), or the float32 softmax that both of T5's and BLOOM's dtypes take dominates.
UNORDERED = ("t5 compute_bias", "opt learned", "add_sinusoidal fast vs reference", "t5 attention",
             "bloom attention", "bloom alibi")


def test_observed_errors(rng, tmp_path):
    # Every case again, here: under pytest-xdist the cases above run in other workers.
    start = copy.deepcopy(rng)
    OBSERVED.clear()
    for num_buckets, max_distance in T5_BUCKET_CONFIGS:
        for bidirectional in BIDIRECTIONAL:
            test_t5_relative_position_bucket(num_buckets, max_distance, bidirectional)
    for heads in BLOOM_HEADS:
        for dtype in BLOOM_TABLE_DTYPES:
            test_bloom_build_alibi_tensor(heads, dtype)
    for qlen, klen, clamp_len in XLNET_ENCODING_CASES:
        test_xlnet_relative_positional_encoding(qlen, klen, clamp_len)
    for bucket_size, max_position in DEBERTA_BUCKET_CASES:
        test_deberta_make_log_bucket_position(bucket_size, max_position)
    for dtype in MODULE_DTYPES:
        for is_decoder in IS_DECODER:
            test_t5_compute_bias(dtype, is_decoder)
            test_t5_attention(dtype, is_decoder)
        for left_padding in LEFT_PADDING:
            test_bloom_attention(dtype, left_padding)
        for kind in BERT_KINDS:
            test_bert_relative_attention(dtype, kind)
        for case in XLNET_CORE_CASES:
            test_xlnet_rel_attn_core(dtype, *case)
        for case in DEBERTA_CASES:
            test_deberta_disentangled_attention(dtype, case)
    for dim in SINUSOID_DIMS:
        test_distilbert_sinusoidal_embeddings(dim)
    for dtype in DTYPES:
        for order in SINUSOID_ORDERS:
            test_add_sinusoidal_against_float64(dtype, order, copy.deepcopy(start))
    test_opt_learned_positions_with_left_padding(tmp_path)
    for name in sorted(OBSERVED):
        print(f"{name:50s} {OBSERVED[name]:.3g}   (budget {budget(name):.3g})")
    assert set(OBSERVED) == set(COMPARISONS), f"not run or unknown: {sorted(set(COMPARISONS) ^ set(OBSERVED))}"
    for name, error in OBSERVED.items():
        assert error <= budget(name), f"{name}: max error {error:.3g} > {budget(name):.3g}"
    # Each dtype reaches the computation: coarser storage, larger errors.
    by_stem: dict = {}
    for name in COMPARISONS:
        stem, dtype = name.rsplit(" ", 1)
        if dtype in UNIT:
            by_stem.setdefault(stem, []).append(dtype)
    for stem, dtypes in by_stem.items():
        if len(dtypes) > 1 and not stem.startswith(UNORDERED):
            errors = [OBSERVED[f"{stem} {dtype}"] for dtype in sorted(dtypes, key=list(UNIT).index)]
            assert errors == sorted(errors) and len(set(errors)) == len(errors), f"{stem}: {dtypes} {errors}"

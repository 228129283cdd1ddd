"""posenc.hf: a Hugging Face model's attention run by posenc.

(a) With method "none" the patched model is the model: logits equal HF's
    own eager attention (float32, within 1e-5 of the logit scale) on small
    random Llama, Mistral, Qwen2 and Phi-3 models (Phi-3's fused qkv_proj;
    its LongRoPE within and past the original length; Llama with llama3
    frequencies and with dynamic NTK past its length) and on a GGUF loaded
    by transformers (the random GGUF; SmolLM2 too when scripts/fetch-model
    has it), through generate's cache and with left padding; parameter
    gradients equal HF's (training through posenc.torch). Phi-3 under a
    method equals the Llama built from its weights under that method.
    transformers 4.49 has no Gemma 3 class (Gemma3Attention arrived in 4.50).
(a') The torch backend (a model on CUDA runs it; backend="torch" on the
    CPU here) gives the kernel's logits and parameter gradients for every
    method, and generate's tokens through the cache with left padding.
(b) Two engines, one answer: for every context-extension method the
    HF-patched model's perplexity past the training length equals posenc's
    own engine (posenc.perplexity on the same GGUF, text and windows)
    within 1e-4 relative.
(c) generate: greedy decoding under Self-Extend through HF's generate and
    its cache equals posenc's DecoderModel.generate; the module docstring's
    example runs as shipped, in a fresh interpreter, with nothing patched
    by the test (transformers' generate on torch 1.13 under Python 3.11).
(d) from_gguf: the model equals, tensor for tensor and in its config, what
    transformers' own GGUF loader builds (gguf-py's dequantization), for
    Llama (tied, untied; F32, F16, Q8_0; SmolLM2's Q4_1) and Qwen2.
(e) masks and caches never silently wrong: a 4-D mask other than
    causality by position and padding (a packed sequence's) is refused, as
    is a posenc-filled cache read by HF's attention after remove().
Plus padding (a left-padded row equals the row alone), bfloat16, remove(),
and the errors.
"""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import transformers

import posenc
import posenc.hf
from hf_models import hf_llama, transformers_gguf_model
from random_llama_gguf import CONTEXT, VOCAB, write_random_llama

pytest.importorskip("gguf")


def hf_perplexity(model, ids, context: int, windows: int) -> float:
    return math.exp(posenc.hf.nll_by_position(model, ids, context=context, max_windows=windows).mean())


def tiny(kind: str, seed: int = 0, **extra):
    torch.manual_seed(seed)
    common = dict(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=32, attn_implementation="eager")
    if kind == "phi3":
        common["pad_token_id"] = 0  # Phi3Config's default (32000) is past this vocabulary
    config = {"llama": transformers.LlamaConfig, "mistral": transformers.MistralConfig,
              "qwen2": transformers.Qwen2Config, "phi3": transformers.Phi3Config}[kind](**{**common, **extra})
    model = {"llama": transformers.LlamaForCausalLM, "mistral": transformers.MistralForCausalLM,
             "qwen2": transformers.Qwen2ForCausalLM, "phi3": transformers.Phi3ForCausalLM}[kind](config)
    return model.eval()


# Phi-3-128k's form (LongRoPE: short factors up to original_max_position_embeddings, long ones past it,
# the attention factor of max/original), and Llama 3.1's llama3 frequencies; head_dim 16: 8 factors.
LONGROPE = dict(max_position_embeddings=64, original_max_position_embeddings=16,
                rope_scaling={"type": "longrope", "short_factor": [1.0 + 0.1 * i for i in range(8)],
                              "long_factor": [1.5 + 0.4 * i for i in range(8)]})
LLAMA3 = dict(max_position_embeddings=64, rope_theta=500000.0,
              rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 16})


def logits(model, ids, **kw) -> torch.Tensor:
    with torch.no_grad():
        return model(ids, **kw).logits.double()


def close(a: torch.Tensor, b: torch.Tensor, rel: float = 1e-5) -> bool:
    return float((a - b).abs().max()) <= rel * float(b.abs().max())


@pytest.mark.parametrize("kind,extra,length", [
    ("llama", {}, 24), ("mistral", {"sliding_window": None}, 24), ("mistral", {"sliding_window": 8}, 24),
    ("qwen2", {}, 24), ("phi3", {}, 24), ("phi3", {"sliding_window": 8}, 24), ("phi3", LONGROPE, 12),
    ("phi3", LONGROPE, 40), ("llama", LLAMA3, 40), ("llama", {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
                                                     48)],
    ids=["llama", "mistral", "mistral-window-8", "qwen2", "phi3", "phi3-window-8", "phi3-longrope-short",
         "phi3-longrope-long", "llama3-scaling", "llama-dynamic-past-length"])
def test_method_none_is_the_model(kind, extra, length):
    """Lengths past the original one where the config scales (LongRoPE's
    long factors, llama3's frequencies, dynamic NTK's base of the call's
    length) and within it (LongRoPE's short factors): method "none" is the
    model's RoPE of each forward pass, as HF computes it."""
    model = tiny(kind, **extra)
    ids = torch.randint(0, 97, (2, length), generator=torch.Generator().manual_seed(1))
    expected = logits(model, ids)
    posenc.hf.apply(model)
    assert close(logits(model, ids), expected)
    posenc.hf.remove(model)
    assert torch.equal(logits(model, ids), expected)


def phi3_as_llama(phi3):
    """The Llama with Phi-3's weights: the fused qkv_proj split into q, k, v
    rows and gate_up_proj into gate and up halves, as Phi3Attention and
    Phi3MLP split them; everything else is one architecture."""
    c = phi3.config
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, max_position_embeddings=c.max_position_embeddings,
        rms_norm_eps=c.rms_norm_eps, rope_theta=c.rope_theta, attn_implementation="eager")).eval()
    state = {}
    q_rows, kv_rows = c.hidden_size, c.num_key_value_heads * (c.hidden_size // c.num_attention_heads)
    for name, tensor in phi3.state_dict().items():
        if name.endswith("qkv_proj.weight"):
            stem = name[:-len("qkv_proj.weight")]
            q, k, v = tensor.split([q_rows, kv_rows, kv_rows])
            state.update({stem + "q_proj.weight": q, stem + "k_proj.weight": k, stem + "v_proj.weight": v})
        elif name.endswith("gate_up_proj.weight"):
            gate, up = tensor.chunk(2)
            stem = name[:-len("gate_up_proj.weight")]
            state.update({stem + "gate_proj.weight": gate, stem + "up_proj.weight": up})
        else:
            state[name] = tensor
    llama.load_state_dict(state)
    return llama


@pytest.mark.parametrize("method", ["yarn", "rerope:window=6", "self-extend:group=3,window=6", "lambda:sinks=2,logn"])
def test_phi3_under_a_method_is_the_same_llama(method):
    """Phi-3 is Llama with fused projections: the Llama built from its
    weights gives its logits unpatched (the oracle is sound), and the two
    patched with one method agree past the training length (the patched
    Llama is held to posenc's engine by test_patched_hf_perplexity_is_posencs)."""
    phi3 = tiny("phi3")
    llama = phi3_as_llama(phi3)
    ids = torch.randint(0, 97, (2, 80), generator=torch.Generator().manual_seed(12))
    assert close(logits(llama, ids), logits(phi3, ids))
    expected = logits(posenc.hf.apply(llama, method, target_length=96), ids)
    assert close(logits(posenc.hf.apply(phi3, method, target_length=96), ids), expected)


@pytest.mark.parametrize("kind", ["llama", "phi3"])
@pytest.mark.parametrize("backend", ["kernel", "torch"])
def test_generate_and_left_padding_match_hf(kind, backend):
    model = tiny(kind)
    ids = torch.randint(3, 97, (2, 12), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    mask[1, :5] = 0
    ids[1, :5] = 0
    expected_logits = logits(model, ids, attention_mask=mask)
    expected = model.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0)
    posenc.hf.apply(model, backend=backend)
    got = logits(model, ids, attention_mask=mask)
    assert close(got[0], expected_logits[0]) and close(got[1, 5:], expected_logits[1, 5:])
    assert torch.equal(model.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=0),
                       expected)


def test_parameter_gradients_match_hf():
    model = tiny("llama").train()
    ids = torch.randint(0, 97, (2, 20), generator=torch.Generator().manual_seed(3))

    def grads():
        model.zero_grad()
        model(ids, labels=ids).loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}

    expected = grads()
    posenc.hf.apply(model)
    got = grads()
    for name, g in expected.items():
        assert close(got[name].double(), g.double(), rel=1e-4), name


@pytest.mark.parametrize("method",
                         ["rerope:window=6", "self-extend:group=3,window=6", "self-extend-kv:group=3,window=6"])
def test_a_left_padded_row_is_the_row_alone(method):
    """Positions from the mask (as generate computes them): the padded row's
    logits equal the same tokens run alone."""
    model = tiny("llama")
    ids = torch.randint(3, 97, (1, 40), generator=torch.Generator().manual_seed(4))
    posenc.hf.apply(model, method, target_length=64)
    alone = logits(model, ids)
    padded = torch.cat([torch.zeros(1, 7, dtype=ids.dtype), ids], 1)
    batch = torch.cat([padded, torch.randint(3, 97, (1, 47), generator=torch.Generator().manual_seed(5))])
    mask = torch.ones_like(batch)
    mask[0, :7] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    got = logits(model, batch, attention_mask=mask, position_ids=positions)
    assert close(got[0, 7:], alone[0])


def test_bfloat16_model_follows_its_float32_self():
    model = tiny("llama")
    ids = torch.randint(0, 97, (1, 24), generator=torch.Generator().manual_seed(6))
    posenc.hf.apply(model, "rerope:window=8", target_length=64)
    f32 = logits(model, ids)
    model.to(torch.bfloat16)
    bf16 = logits(model, ids)
    assert float((bf16 - f32).abs().max()) <= 0.05 * float(f32.abs().max())


# ---- (b) the HF-patched model and posenc's engine on one GGUF ---------------------------

METHODS = ["none", "linear", "ntk", "dynamic-ntk", "yarn", "rerope", "leaky-rerope", "window", "lambda",
           "self-extend", "ntk:logn", "lambda:sinks=2,logn", "self-extend:group=4,window=16", "self-extend-kv",
           "self-extend-kv:group=4,window=16"]


@pytest.fixture(scope="module")
def random_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("hf-patch") / "random.gguf"
    write_random_llama(path, tied=False, dtype="f32", seed=11)
    return path


@pytest.mark.parametrize("method", METHODS)
def test_patched_hf_perplexity_is_posencs(random_gguf, method):
    """Windows of 4 x the training length (context 64 -> 256), 2 of them."""
    context, windows = 4 * CONTEXT, 2
    ids = np.random.default_rng(8).integers(0, VOCAB, context * windows)
    model = posenc.hf.apply(hf_llama(random_gguf), method, target_length=context)
    hf_ppl = hf_perplexity(model, ids, context, windows)
    ours = posenc.perplexity(posenc.DecoderModel(random_gguf), ids, context=context, max_windows=windows,
                             method=method)
    assert abs(hf_ppl - ours["ppl"]) <= 1e-4 * ours["ppl"], (hf_ppl, ours["ppl"], ours["method"])


@pytest.mark.parametrize("method", METHODS)
def test_the_torch_backend_is_the_kernel(method):
    """apply(..., backend="torch") runs each layer as torch operations (the
    path a model on CUDA takes); on the CPU it must give the kernel's logits
    (1e-5 of the logit scale) and parameter gradients (1e-5 relative),
    past the training length."""
    model = tiny("phi3" if method == "yarn" else "llama").train()
    ids = torch.randint(0, 97, (2, 72), generator=torch.Generator().manual_seed(13))
    results = {}
    for backend in ("kernel", "torch"):
        posenc.hf.apply(model, method, target_length=96, backend=backend)
        model.zero_grad()
        out = model(ids, labels=ids)
        out.loss.backward()
        results[backend] = (out.logits.detach().double(),
                            {name: p.grad.clone() for name, p in model.named_parameters()})
    assert close(results["torch"][0], results["kernel"][0])
    for name, g in results["kernel"][1].items():
        assert close(results["torch"][1][name].double(), g.double()), name


def test_patched_smollm_logits_are_hfs(smollm_hf, smollm_path):
    """SmolLM2 (30 layers) loaded by transformers from the GGUF: method none
    gives HF's own logits over 128 tokens of the GPL-3, within 1e-5 of the
    logit scale."""
    text = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()
    ids = torch.as_tensor(posenc.BpeTokenizer.from_gguf(str(smollm_path)).encode(text)[:128])[None]
    expected = logits(smollm_hf, ids)
    try:
        got = logits(posenc.hf.apply(smollm_hf), ids)
    finally:
        posenc.hf.remove(smollm_hf)
    assert close(got, expected), float((got - expected).abs().max())


@pytest.mark.parametrize("method", ["none", "rerope:window=128", "self-extend:group=4,window=128"])
def test_patched_smollm_perplexity_is_posencs(smollm_hf, smollm_ours, smollm_path, method):
    """SmolLM2 loaded by transformers from the GGUF, 512 tokens of the GPL-3."""
    text = open("/usr/share/common-licenses/GPL-3", encoding="utf-8").read()
    ids = np.asarray(posenc.BpeTokenizer.from_gguf(str(smollm_path)).encode(text)[:512], np.int64)
    try:
        hf_ppl = hf_perplexity(posenc.hf.apply(smollm_hf, method, target_length=512), ids, 512, 1)
    finally:
        posenc.hf.remove(smollm_hf)  # the session's model, shared with test_model_hf.py
    ours = posenc.perplexity(smollm_ours, ids, context=512, max_windows=1, method=method)
    assert abs(hf_ppl - ours["ppl"]) <= 1e-4 * ours["ppl"], (hf_ppl, ours["ppl"])


def test_generate_under_self_extend_is_posencs(random_gguf):
    """A 60-token prompt and 40 new tokens (past the training length of 64):
    HF's generate through the patched model and its DynamicCache, and
    posenc's DecoderModel.generate, both planned for 100 tokens."""
    prompt = np.random.default_rng(9).integers(0, VOCAB - 3, 60)
    ours = posenc.DecoderModel(random_gguf).generate(prompt, max_tokens=40, method="self-extend")
    model = posenc.hf.apply(hf_llama(random_gguf), "self-extend", target_length=100)
    out = model.generate(torch.as_tensor(prompt)[None], max_new_tokens=40, do_sample=False, eos_token_id=None,
                         pad_token_id=0)
    assert out[0, 60:].tolist() == ours["tokens"]


# ---- errors ----------------------------------------------------------------------------


def test_errors_name_the_problem():
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    with pytest.raises(ValueError, match=r"\[hf\] model = a GPT2LMHeadModel: has no decoder layers"):
        posenc.hf.apply(gpt2)
    model = tiny("llama")
    with pytest.raises(ValueError, match=r"\[hf\] target_length = None: must be given for method 'yarn'"):
        posenc.hf.apply(model, "yarn")
    with pytest.raises(ValueError, match=r"unknown|must be one of|is not a known"):
        posenc.hf.apply(model, "xpos", target_length=64)
    # A frequency method has no fixed table to rescale under dynamic NTK (a
    # linear or YaRN model composes: docs/composition.md).
    dynamic = tiny("llama", rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    with pytest.raises(ValueError, match=r'method = "yarn": does not compose with the model\'s rope scaling "dynamic"'):
        posenc.hf.apply(dynamic, "yarn", target_length=64)
    with pytest.raises(ValueError, match=r"\[hf\] backend = 'cuda': must be None"):
        posenc.hf.apply(model, backend="cuda")
    windowed = tiny("mistral", sliding_window=8)
    with pytest.raises(ValueError, match=r"sets a window of 32 on a model with its own sliding_window = 8"):
        posenc.hf.apply(windowed, "window", target_length=64)


# ---- (c) the documented example, as shipped --------------------------------------------


def documented_example() -> str:
    """The first example of help(posenc.hf): the indented block after its first '::'."""
    block = posenc.hf.__doc__.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    return textwrap.dedent(block)


def test_the_documented_example_runs_as_shipped(random_gguf):
    """help(posenc.hf)'s example, generate first, on the random GGUF in a
    fresh interpreter with nothing patched by the test. transformers'
    generate imports torch.distributed.fsdp, which torch 1.13 cannot import
    under Python 3.11 unless import posenc.hf has fixed it (_hf_compat.py)."""
    code = documented_example()
    assert "model.generate(" in code and '"SmolLM2-135M-Instruct.Q4_1.gguf"' in code
    code = code.replace('"SmolLM2-135M-Instruct.Q4_1.gguf"', repr(str(random_gguf)))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip()


def test_the_torch_fix_is_torch_2s():
    """After import posenc.hf, the module torch 1.13 could not import loads,
    and each ShardedTensorMetadata gets a fresh default TensorProperties, as
    torch 2.0's default_factory gives (a fresh interpreter: generate in
    another test may have imported it already)."""
    code = ("import posenc.hf\n"
            "from torch.distributed._shard.sharded_tensor.metadata import ShardedTensorMetadata, TensorProperties\n"
            "a, b = ShardedTensorMetadata(), ShardedTensorMetadata()\n"
            "assert a.tensor_properties == TensorProperties() and a.tensor_properties is not b.tensor_properties\n"
            "import torch.distributed.fsdp\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


# ---- (d) from_gguf against transformers' GGUF loader --------------------------------------

CONFIG_FIELDS = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "max_position_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
                 "tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id"]


def assert_same_model(ours, theirs):
    assert type(ours) is type(theirs)
    for field in CONFIG_FIELDS:
        assert getattr(ours.config, field) == getattr(theirs.config, field), field
    attention = (ours.model.layers[0].self_attn, theirs.model.layers[0].self_attn)
    assert attention[0].head_dim == attention[1].head_dim
    assert ours.config._attn_implementation == theirs.config._attn_implementation == "eager"
    a, b = ours.state_dict(), theirs.state_dict()
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


@pytest.mark.parametrize("tied,dtype", [("tied", "f32"), ("untied", "f16"), ("untied", "q8_0")])
def test_from_gguf_is_transformers_gguf_loader(tmp_path, tied, dtype):
    path = write_random_llama(tmp_path / f"{tied}-{dtype}.gguf", tied=tied == "tied", dtype=dtype, seed=12)
    assert_same_model(posenc.hf.from_gguf(path), transformers_gguf_model(path))


def write_random_qwen2(path, tied: bool):
    """A Qwen2 GGUF as llama.cpp's converter writes one (q/k/v biases, rows
    as HF has them), random float32 weights, vocabulary from its tokens."""
    rng = np.random.default_rng(5)
    d, ffn, vocab, heads, kv_heads, head_dim = 64, 96, 97, 4, 2, 16

    def w(*shape):
        return (rng.standard_normal(shape) * 0.1).astype(np.float32)

    tensors = {"token_embd.weight": w(vocab, d), "output_norm.weight": 1 + w(d)}
    for b in range(2):
        tensors.update({f"blk.{b}.attn_norm.weight": 1 + w(d), f"blk.{b}.ffn_norm.weight": 1 + w(d),
                        f"blk.{b}.attn_q.weight": w(heads * head_dim, d), f"blk.{b}.attn_q.bias": w(heads * head_dim),
                        f"blk.{b}.attn_k.weight": w(kv_heads * head_dim, d),
                        f"blk.{b}.attn_k.bias": w(kv_heads * head_dim),
                        f"blk.{b}.attn_v.weight": w(kv_heads * head_dim, d),
                        f"blk.{b}.attn_v.bias": w(kv_heads * head_dim),
                        f"blk.{b}.attn_output.weight": w(d, heads * head_dim),
                        f"blk.{b}.ffn_gate.weight": w(ffn, d), f"blk.{b}.ffn_up.weight": w(ffn, d),
                        f"blk.{b}.ffn_down.weight": w(d, ffn)})
    if not tied:
        tensors["output.weight"] = w(vocab, d)
    metadata = {"general.architecture": "qwen2", "general.name": "random qwen2",
                "qwen2.context_length": np.uint32(64),
                "qwen2.embedding_length": np.uint32(d), "qwen2.block_count": np.uint32(2),
                "qwen2.feed_forward_length": np.uint32(ffn), "qwen2.attention.head_count": np.uint32(heads),
                "qwen2.attention.head_count_kv": np.uint32(kv_heads), "qwen2.rope.freq_base": 1000000.0,
                "qwen2.attention.layer_norm_rms_epsilon": 1e-6, "tokenizer.ggml.model": "gpt2",
                "tokenizer.ggml.tokens": [f"t{i}" for i in range(vocab)],
                "tokenizer.ggml.eos_token_id": np.uint32(3)}
    posenc.write_gguf(path, metadata, tensors)
    return path


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_from_gguf_qwen2_is_transformers_gguf_loader(tmp_path, tied):
    path = write_random_qwen2(tmp_path / "qwen2.gguf", tied)
    model = posenc.hf.from_gguf(path)
    assert_same_model(model, transformers_gguf_model(path))
    ids = torch.randint(0, 97, (1, 20), generator=torch.Generator().manual_seed(3))
    expected = logits(model, ids)
    assert close(logits(posenc.hf.apply(model), ids), expected)


def test_from_gguf_smollm_is_transformers_gguf_loader(smollm_hf, smollm_path):
    """SmolLM2's Q4_1 (the session's model, loaded by from_gguf)."""
    assert_same_model(smollm_hf, transformers_gguf_model(smollm_path))


def rewritten(source, path, drop=(), **metadata):
    """`source` written again by posenc with `metadata` changed (F32 tensors)."""
    f = posenc.GgufFile(source)
    meta = {k: v for k, v in f.metadata.items() if k not in drop and not k.startswith("general.alignment")}
    meta.update(metadata)
    posenc.write_gguf(path, meta, {name: f.dequantize(name) for name in f.tensor_names()})
    return path


def test_from_gguf_errors(random_gguf, tmp_path):
    gemma = rewritten(random_gguf, tmp_path / "gemma3.gguf", **{"general.architecture": "gemma3"})
    with pytest.raises(ValueError, match=r"\[hf\] .*gemma3.gguf: general.architecture = 'gemma3': from_gguf "
                                         r"loads \"llama\" \(LlamaForCausalLM\), \"qwen2\" \(Qwen2ForCausalLM\); "
                                         r"transformers 4\.49\.0 has no Gemma 3 class"):
        posenc.hf.from_gguf(gemma)
    with pytest.raises(ValueError, match=r"\[hf\] rope_scalng = \{'factor': 2\.0\}: is not a LlamaConfig field"):
        posenc.hf.from_gguf(random_gguf, rope_scalng={"factor": 2.0})
    scaled = rewritten(random_gguf, tmp_path / "linear.gguf", **{"llama.rope.scaling.type": "linear",
                                                                   "llama.rope.scaling.factor": 2.0})
    with pytest.raises(ValueError, match=r"\[hf\] llama.rope.scaling.type = 'linear': from_gguf builds the RoPE "
                                         r"of the file's base only: pass rope_scaling="):
        posenc.hf.from_gguf(scaled)
    linear = {"rope_type": "linear", "factor": 2.0}
    assert posenc.hf.from_gguf(scaled, rope_scaling=linear).config.rope_scaling == linear
    unscaled = rewritten(random_gguf, tmp_path / "unscaled.gguf", **{"llama.rope.scale_linear": 1.0})
    assert posenc.hf.from_gguf(unscaled).config.rope_scaling is None  # llama.cpp's "no scaling" value
    headless = rewritten(random_gguf, tmp_path / "no-heads.gguf", drop=("llama.attention.head_count",))
    with pytest.raises(ValueError, match=r"\[hf\] llama.attention.head_count = missing: must be a count >= 1"):
        posenc.hf.from_gguf(headless)


def test_nll_by_position_errors(random_gguf):
    model = hf_llama(random_gguf)
    ids = np.arange(40) % VOCAB
    assert posenc.hf.nll_by_position(model, ids, context=16).shape == (2, 15)
    assert posenc.hf.nll_by_position(model, ids, context=16, max_windows=1).shape == (1, 15)
    with pytest.raises(ValueError, match=r"\[hf\] context = 1: must be >= 2"):
        posenc.hf.nll_by_position(model, ids, context=1)
    with pytest.raises(ValueError, match=r"\[hf\] len\(tokens\) = 40: must be >= context = 41"):
        posenc.hf.nll_by_position(model, ids, context=41)
    with pytest.raises(ValueError, match=rf"\[hf\] tokens\[3\] = {VOCAB}: must be < vocab_size = {VOCAB}"):
        posenc.hf.nll_by_position(model, [1, 2, 3, VOCAB], context=2)


# ---- (e) masks and caches --------------------------------------------------------------


def additive(visible: torch.Tensor) -> torch.Tensor:
    """HF's additive form of a [batch, 1, q, kv] boolean mask."""
    return torch.zeros(visible.shape).masked_fill(~visible, torch.finfo(torch.float32).min)


def test_a_packed_sequence_mask_is_refused():
    """Two sequences of 4 packed in one row (block-diagonal mask, positions
    restarting at 0): HF honours the mask; posenc cannot, so it says so."""
    model = tiny("llama")
    ids = torch.randint(0, 97, (1, 8), generator=torch.Generator().manual_seed(7))
    visible = torch.zeros(1, 1, 8, 8, dtype=torch.bool)
    for start in (0, 4):
        visible[0, 0, start:start + 4, start:start + 4] = torch.ones(4, 4, dtype=torch.bool).tril()
    positions = torch.tensor([[0, 1, 2, 3, 0, 1, 2, 3]])
    expected = logits(model, ids, attention_mask=additive(visible), position_ids=positions)
    assert close(expected[0, 4:], logits(model, ids[:, 4:])[0])  # HF: the second sequence alone
    posenc.hf.apply(model)
    with pytest.raises(ValueError, match=r"\[hf\] attention_mask\[0, 0, 0, 4\] = hidden: posenc.hf applies "
                                         r"causality by position \(here the key at position 0 is visible to the "
                                         r"query at position 0\).*packed sequences"):
        model(ids, attention_mask=additive(visible), position_ids=positions)


def test_a_4d_causal_mask_with_padding_is_the_model():
    """HF's own mask given as 4-D (causal, the second row left-padded by 3):
    accepted, and HF's logits (padded queries aside)."""
    model = tiny("llama")
    ids = torch.randint(3, 97, (2, 10), generator=torch.Generator().manual_seed(8))
    visible = torch.ones(10, 10, dtype=torch.bool).tril().expand(2, 1, 10, 10).clone()
    visible[1, :, :, :3] = False
    expected = logits(model, ids, attention_mask=additive(visible))
    posenc.hf.apply(model)
    got = logits(model, ids, attention_mask=additive(visible))
    assert close(got[0], expected[0]) and close(got[1, 3:], expected[1, 3:])
    biased = additive(visible)
    biased[0, 0, 5, 2] = -5.0
    with pytest.raises(ValueError, match=r"\[hf\] attention_mask\[0, 0, 5, 2\] = -5: an additive mask must hold 0 "
                                         r"\(visible\) or <= -10000 \(hidden\)"):
        model(ids, attention_mask=biased)


def test_qwen2_window_its_layers_do_not_use():
    """HF 4.49's eager mask hides keys past config.sliding_window even with
    use_sliding_window=False, where Qwen2's layers use no window (its flash
    path and posenc.hf follow the layers): the mask check lets that pass and
    the patched model is HF's without the window."""
    windowless = tiny("qwen2", sliding_window=None)
    model = tiny("qwen2", sliding_window=8)  # the same weights (one seed)
    ids = torch.randint(0, 97, (1, 24), generator=torch.Generator().manual_seed(9))
    expected = logits(windowless, ids)
    assert not close(logits(model, ids), expected)  # HF's mask did hide them
    posenc.hf.apply(model)
    assert close(logits(model, ids), expected)


def test_a_posenc_cache_is_refused_by_hf_after_remove():
    """The cache holds unrotated keys: HF's own attention must not read them
    as rotated. A new cache works; the patched model reads the old one."""
    model = tiny("llama")
    ids = torch.randint(0, 97, (1, 12), generator=torch.Generator().manual_seed(10))
    full = logits(model, ids)
    posenc.hf.apply(model)
    with torch.no_grad():
        cache = model(ids[:, :10], use_cache=True).past_key_values
    posenc.hf.remove(model)
    with pytest.raises(ValueError, match=r"\[hf\] past_key_value = a DynamicCache posenc.hf filled: it holds "
                                         r"unrotated keys"):
        model(ids[:, 10:], past_key_values=cache, use_cache=True)
    with torch.no_grad():
        fresh = model(ids[:, :10], use_cache=True).past_key_values
    assert close(logits(model, ids[:, 10:], past_key_values=fresh), full[:, 10:])
    posenc.hf.apply(model)
    assert close(logits(model, ids[:, 10:], past_key_values=cache), full[:, 10:])


def test_help_names_the_entry_points_first():
    """help(posenc) points to posenc.torch and posenc.hf; help(posenc.torch)
    lists apply_rope and attention in its first lines, not after the
    nn.Module methods PositionScheme inherits (a thousand lines)."""
    import pydoc

    import posenc.torch

    text = pydoc.render_doc(posenc, renderer=pydoc.plaintext)
    assert "posenc.torch" in text and "posenc.hf" in text
    lines = pydoc.render_doc(posenc.torch, renderer=pydoc.plaintext).splitlines()
    head = "\n".join(lines[:20])
    for entry in ("apply_rope(", "attention(", "T5BiasEncoding(", "ShawEncoding(", "PositionScheme("):
        assert entry in head, entry
    assert "from_gguf(" in "\n".join(pydoc.render_doc(posenc.hf, renderer=pydoc.plaintext).splitlines()[:20])

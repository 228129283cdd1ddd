"""Round 3 of the hostile pass (issue 49): each input below crashed the
interpreter, wrote memory twice or was silently coerced. Every one is now a
ValueError in the library's form, naming the parameter. The commands that
used to crash run in a subprocess, so that a crash fails the test instead of
ending pytest.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
from posenc import _posenc

from random_llama_gguf import write_random_llama


def error_of(code: str) -> str:
    """The last line of stderr of `code` run by this Python, which must exit
    with 1 (an uncaught exception), not be killed by a signal."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=300)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    return lines[-1]


# 1. q_len * k_len wrapped to 0: the loop wrote past an empty buffer (SIGSEGV).
@pytest.mark.parametrize("call, expected", [
    ("posenc.alibi_bias(1, 2**32, 2**32)",
     "ValueError: [alibi] q_len = 4294967296: the [heads, q_len, k_len] bias needs 137438953472.0 GiB"),
    ("posenc.deberta_relative_positions(2**32, 2**32)",
     "ValueError: [deberta] q_len = 4294967296: the [q_len, k_len] positions needs 137438953472.0 GiB"),
    ("posenc.xlnet_relative_encoding(8, 2**62, 2**62)",
     "ValueError: [xlnet] k_len = 4611686018427387904: the distances needs"),
])
def test_sizes_too_large_for_memory_are_errors(call, expected):
    assert error_of(f"import numpy as np, posenc; {call}").startswith(expected)


# 2. Solve wrote p_l(0) into a zero-length output (SIGSEGV); a negative length
# was "cannot create std::vector larger than max_size()".
@pytest.mark.parametrize("length", [0, -1])
def test_floater_layer_positions_of_no_length(length):
    line = error_of(f"""
        import posenc.torch as pt
        pt.PositionScheme('floater', heads=2, head_dim=8, train_length=8).layer_positions({length})""")
    assert line == f"ValueError: [scheme] length = {length}: must be in [1, 1048576]"


# 3. A value dim of 0 aborted the interpreter (hwy's aligned allocator); it
# is refused as head_dim 0 is, by the kernel, the reference and posenc.torch.
@pytest.mark.parametrize("call", [
    "posenc.attention(np.zeros((1,4,2,8),'f4'), np.zeros((1,4,2,8),'f4'), np.zeros((1,4,2,0),'f4'), layout='bshd')",
    "posenc.reference.attention(np.zeros((1,4,2,8),'f4'), np.zeros((1,4,2,8),'f4'), np.zeros((1,4,2,0),'f4'), "
    "layout='bshd')",
    "pt.attention(torch.zeros(1,4,2,8), torch.zeros(1,4,2,8), torch.zeros(1,4,2,0), layout='bshd')",
    "pt.attention(torch.zeros(1,4,2,8, dtype=torch.float64), torch.zeros(1,4,2,8, dtype=torch.float64), "
    "torch.zeros(1,4,2,0, dtype=torch.float64), layout='bshd')",
])
def test_attention_with_value_dim_zero(call):
    line = error_of(f"import numpy as np, torch, posenc, posenc.torch as pt; {call}")
    assert line == "ValueError: [attention] v.head_dim = 0: must be > 0"


def test_extension_plans_refuse_value_dim_zero():
    line = error_of("""
        import numpy as np, posenc
        kwargs = posenc.extension_attention("yarn", posenc.RopeSpec(head_dim=8), train_length=4, target_length=16)
        q = np.zeros((1, 4, 2, 8), np.float32)
        posenc.attention(q, q, np.zeros((1, 4, 2, 0), np.float32), layout="bshd", **kwargs)""")
    assert line == "ValueError: [attention] v.head_dim = 0: must be > 0"


# 5. In place, overlapping windows of one array were rotated twice, an
# expanded tensor once per index (and a huge expand ran until killed).
def test_apply_rope_inplace_refuses_overlapping_windows():
    spec = posenc.RopeSpec(head_dim=8)
    x = np.random.default_rng(0).standard_normal((1, 4, 6, 8)).astype(np.float32)
    before = x.copy()
    for apply in (posenc.apply_rope, posenc.reference.apply_rope):
        with pytest.raises(ValueError, match=r"^\[rope\] operands\[1\] = memory shared with operands\[0\]: "
                                             r"each tensor is rotated once"):
            apply(spec, x[:, :, 0:4], x[:, :, 2:6], inplace=True, layout="bshd")
    np.testing.assert_array_equal(x, before)
    # Slices that do not share an element are still one call (fused qkv).
    q, k = x[:, :, 0:4], x[:, :, 4:6]
    expect_q, expect_k = posenc.apply_rope(spec, q, k, layout="bshd")
    posenc.apply_rope(spec, q, k, inplace=True, layout="bshd")
    np.testing.assert_array_equal(x[:, :, 0:4], expect_q)
    np.testing.assert_array_equal(x[:, :, 4:6], expect_k)


@pytest.mark.parametrize("shape", [(1, 4, 3, 8), (1, 2**20, 2**10, 8)])
def test_apply_rope_inplace_refuses_an_expanded_tensor(shape):
    line = error_of(f"""
        import posenc, torch
        x = torch.randn(1, 1, 1, 8).expand{shape}
        posenc.apply_rope(posenc.RopeSpec(head_dim=8), x, inplace=True, layout="bshd")""")
    assert line.startswith(f"ValueError: [rope] operands[0].out = shape [{', '.join(map(str, shape))}], "
                           "strides [8, 0, 0, 1]: has elements in the same memory")


def test_add_sinusoidal_inplace_refuses_overlapping_memory():
    x = np.zeros((1, 6, 8), np.float32)
    expanded = np.lib.stride_tricks.as_strided(x, (1, 4, 8), (0, 0, 4))
    for reference in (False, True):
        with pytest.raises(ValueError, match=r"^\[sinusoidal\] out = shape \[1, 4, 1, 8\], strides \[0, 0, 0, 1\]: "
                                             r"has elements in the same memory"):
            posenc.add_sinusoidal(expanded, inplace=True, reference=reference)
    assert not x.any()


# 9. posenc.torch truncated what the NumPy functions refuse.
@pytest.mark.parametrize("kwargs, message", [
    (dict(position_ids=[0, 1.5, 2, 3]), r"[rope] position_ids.dtype = float64: must be an integer type"),
    (dict(position_ids=torch.tensor([0.0, 1, 2, 3])), r"[rope] position_ids.dtype = float32: must be an integer type"),
    (dict(offset=1.7), r"[rope] offset = 1.7: must be an integer"),
    (dict(offsets=[0.9, 2.2]), r"[rope] offsets.dtype = float64: must be an integer type"),
])
def test_torch_apply_rope_refuses_fractional_positions(kwargs, message):
    spec = posenc.RopeSpec(head_dim=8)
    x = torch.randn(2, 4, 2, 8)
    with pytest.raises(ValueError) as numpy_error:
        posenc.apply_rope(spec, x.numpy(), layout="bshd", **kwargs)
    with pytest.raises(ValueError) as torch_error:
        pt.apply_rope(spec, x, layout="bshd", **kwargs)
    assert str(torch_error.value).startswith(message)
    assert str(numpy_error.value).split(":")[0] == str(torch_error.value).split(":")[0]  # the same parameter


@pytest.mark.parametrize("tokens, shown", [([[300, 1]], "300"), ([[1, -1]], "-1")])
@pytest.mark.parametrize("scheme", ["sinusoidal", "complex-order"])
def test_embed_refuses_tokens_outside_a_byte(scheme, tokens, shown):
    m = pt.PositionScheme(scheme, heads=2, head_dim=8, train_length=8)
    index = "0, 0" if shown == "300" else "0, 1"
    with pytest.raises(ValueError, match=rf"^\[scheme\] tokens\[{index}\] = {shown}: must be a byte id in \[0, 255\]$"):
        m.embed(torch.tensor(tokens), torch.randn(256, 16))


def test_learned_embed_refuses_positions_past_its_table_as_forward_does():
    m = pt.PositionScheme("learned", heads=2, head_dim=8, train_length=8)
    message = r"^\[tiny_lm\] position = 8: past the learned position table of 8 rows"
    with pytest.raises(ValueError, match=message):
        m.embed(torch.zeros(1, 9, dtype=torch.long), torch.randn(256, 16))
    q = torch.zeros(1, 9, 2, 8)
    with pytest.raises(ValueError, match=message):
        m(q, q, q, layout="bshd")
    assert m.embed(torch.zeros(1, 8, dtype=torch.long), torch.randn(256, 16)).shape == (1, 8, 16)


# 10. SchemeCore's arrays are checked against the sizes the trainer reads.
@pytest.mark.parametrize("scheme, call, message", [
    ("complex-order", "c.input_embedding(t, np.zeros(4, 'u1'), np.zeros(0, 'i8'))",
     "[scheme] positions.size = 0: must be in [1, 1048576]"),
    ("complex-order", "c.input_embedding(t, np.zeros(5, 'u1'), np.zeros(2, 'i8'))",
     "[scheme] inputs.size = 5: must be a multiple of positions.size = 2 (batch * T)"),
    ("complex-order", "c.input_embedding(t, np.zeros(2, 'u1'), np.array([0, -3]))",
     "[scheme] positions[1] = -3: must be in [0, 1048575]"),
    ("complex-order", "c.input_embedding_backward(t, np.zeros(4, 'u1'), np.zeros(2, 'i8'), np.zeros(5))",
     "[scheme] dx.size = 5: must equal inputs.size * d_model = 64"),
    ("floater", "c.layer_input_positions_backward(t, 4, [])", "[scheme] len(drows) = 0: must equal layers = 1"),
    ("floater", "c.layer_input_positions_backward(t, 4, [np.zeros(3)])",
     "[scheme] drows[0].size = 3: must equal length * d_model = 64"),
    ("learned", "c.input_positions_backward(t, 8, np.zeros(3))",
     "[scheme] drows.size = 3: must equal length * d_model = 128"),
    ("learned", "c.input_positions(t, -5)", "[scheme] length = -5: must be in [1, 1048576]"),
    ("kerple", "c.terms(t, 0, 2**40)", "[scheme] length = 1099511627776: must be in [1, 1048576]"),
])
def test_scheme_core_checks_sizes(scheme, call, message):
    line = error_of(f"""
        import numpy as np
        from posenc import _posenc
        c = _posenc.SchemeCore({scheme!r}, {{}}, 2, 8, 1, 8)
        t = c.init(0)
        {call}""")
    assert line == "ValueError: " + message


def test_scheme_core_head_sizes_cannot_wrap():
    # 4 * (2^62 + 4) wraps to 16, a valid width.
    with pytest.raises(ValueError, match=r"^\[scheme\] head_dim = 4611686018427387908: must be in \[1, 65536\]$"):
        _posenc.SchemeCore("nope", {}, 4, 2**62 + 4, 1, 8)


def test_nan_frequencies_sinks_and_slopes_are_refused():
    spec = posenc.RopeSpec(head_dim=8)
    inv_freq, factor = spec.frequencies(4)
    inv_freq = np.array(inv_freq)
    inv_freq[1] = np.nan
    x = np.zeros((1, 4, 2, 8), np.float32)
    for apply in (posenc.apply_rope, posenc.reference.apply_rope):
        with pytest.raises(ValueError, match=r"^\[rope\] inv_freq\[1\] = nan: must be finite$"):
            apply(spec, x, frequencies=(inv_freq, factor), layout="bshd")
    for attention in (posenc.attention, posenc.reference.attention):
        with pytest.raises(ValueError, match=r"^\[attention\] sink_logits\[1\] = nan: must be a number <= float32"):
            attention(x, x, x, sink_logits=[0.0, float("nan")], layout="bshd")
        with pytest.raises(ValueError, match=r"^\[attention\] alibi\.slopes\[1\] = nan: must be finite in float32$"):
            attention(x, x, x, encoding=posenc.AlibiEncoding([0.5, float("nan")]), layout="bshd")
    with pytest.raises(ValueError, match=r"^\[attention\] sink_logits\[0\] = nan"):
        pt.attention(torch.zeros(1, 4, 2, 8), torch.zeros(1, 4, 2, 8), torch.zeros(1, 4, 2, 8),
                     sink_logits=torch.tensor([float("nan"), 0.0]), layout="bshd")


def test_token_that_is_not_utf8_is_a_value_error(tmp_path):
    path = write_random_llama(tmp_path / "m.gguf")
    data = path.read_bytes()
    assert data.count(b"<|im_end|>") == 1
    path.write_bytes(data.replace(b"<|im_end|>", b"<|im_\xffnd|>"))
    tok = posenc.tokenizer.BpeTokenizer.from_gguf(path)
    bad = tok.token_id("<|im_start|>") + 1
    with pytest.raises(ValueError, match=rf'^\[tokenizer\] token\({bad}\) = "<\|im_\\xffnd\|>": is not valid UTF-8'):
        tok.token(bad)
    assert tok.token(bad - 1) == "<|im_start|>"

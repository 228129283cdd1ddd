"""Tensors in, tensors out (posenc/_tensors.py): PyTorch tensors and any other
DLPack array go where NumPy arrays go, without copies, and come back as the
caller's kind; the results are those of the NumPy path to the bit.
"""

import warnings

import ml_dtypes
import numpy as np
import pytest
import torch

import posenc
from posenc import _tensors

SPEC = posenc.RopeSpec(head_dim=32)
DTYPES = [(torch.float32, np.float32), (torch.float16, np.float16), (torch.bfloat16, ml_dtypes.bfloat16)]


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """A copy of t as NumPy (bfloat16 through its bits), independent of posenc."""
    if t.dtype == torch.bfloat16:
        return t.detach().view(torch.int16).numpy().copy().view(ml_dtypes.bfloat16)
    return t.detach().numpy().copy()


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


@pytest.mark.parametrize("torch_dtype,numpy_dtype", DTYPES)
def test_apply_rope_and_attention_give_torch_back_equal_to_numpy(torch_dtype, numpy_dtype):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 9, heads, 32, generator=gen).to(torch_dtype) for heads in (4, 2, 2))
    q_rot, k_rot = posenc.apply_rope(SPEC, q, k, offset=5, layout="bshd")
    want_q, want_k = posenc.apply_rope(SPEC, as_numpy(q), as_numpy(k), offset=5, layout="bshd")
    for got, want in ((q_rot, want_q), (k_rot, want_k)):
        assert isinstance(got, torch.Tensor) and got.dtype == torch_dtype
        np.testing.assert_array_equal(bits(as_numpy(got)), bits(want))
    for fn in (posenc.attention, posenc.reference.attention):
        out = fn(q, k, v, encoding=posenc.RopeEncoding(SPEC))
        want = fn(as_numpy(q), as_numpy(k), as_numpy(v), encoding=posenc.RopeEncoding(SPEC))
        assert isinstance(out, torch.Tensor) and out.dtype == torch_dtype and out.shape == (2, 9, 4, 32)
        np.testing.assert_array_equal(bits(as_numpy(out)), bits(want))


@pytest.mark.parametrize("torch_dtype,numpy_dtype", DTYPES)
def test_no_copies_in_or_out(torch_dtype, numpy_dtype):
    t = torch.randn(3, 5, 2, 32).to(torch_dtype)
    view = _tensors.to_numpy(t, "test", "t")
    assert view.dtype == numpy_dtype and view.ctypes.data == t.data_ptr()
    # A transposed tensor stays a strided view of the same bytes.
    tt = t.transpose(1, 2)
    tview = _tensors.to_numpy(tt, "test", "t")
    assert tview.ctypes.data == tt.data_ptr() and tview.shape == tuple(tt.shape)
    assert tview.strides == tuple(s * t.element_size() for s in tt.stride())
    back = _tensors.from_numpy(view, t)
    assert back.data_ptr() == view.ctypes.data and back.dtype == torch_dtype
    # inplace=True writes the caller's tensor and returns it.
    before = t.data_ptr()
    want = posenc.apply_rope(SPEC, as_numpy(t), offset=7, layout="bshd")
    got = posenc.apply_rope(SPEC, t, offset=7, inplace=True, layout="bshd")
    assert got is t and t.data_ptr() == before
    np.testing.assert_array_equal(bits(as_numpy(t)), bits(want))


def test_strided_tensors_equal_contiguous_ones():
    # Hugging Face's [batch, heads, seq, dim] viewed as [batch, seq, heads, dim]: strided, no copy by the caller.
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, heads, 11, 32, generator=gen) for heads in (4, 2, 2))
    strided = posenc.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), layout="bshd")
    contiguous = posenc.attention(*(x.transpose(1, 2).contiguous() for x in (q, k, v)), layout="bshd")
    assert torch.equal(strided, contiguous)
    # A slice of a fused projection (the last axis contiguous).
    fused = torch.randn(1, 11, 3 * 4 * 32, generator=gen)
    qs = fused[..., :128].view(1, 11, 4, 32)
    assert not qs.is_contiguous()
    assert torch.equal(posenc.apply_rope(SPEC, qs, offset=2, layout="bshd"), posenc.apply_rope(SPEC, qs.contiguous(), offset=2, layout="bshd"))


def test_requires_grad_is_read_detached_with_a_warning():
    q = torch.randn(1, 4, 2, 32, requires_grad=True)
    with pytest.warns(UserWarning, match=r"\[apply_rope\] tensors\[0\] requires grad: .*records no gradients"):
        out = posenc.apply_rope(SPEC, q, offset=1, layout="bshd")
    assert not out.requires_grad
    assert torch.equal(out, posenc.apply_rope(SPEC, q.detach(), offset=1, layout="bshd"))


class _OnDevice:
    """A DLPack array on a device (what a CUDA tensor reports), never read."""

    def __init__(self, kind: int):
        self.kind = kind

    def __dlpack__(self, stream=None):
        raise AssertionError("posenc must not read a device tensor")

    def __dlpack_device__(self):
        return (self.kind, 1)


def test_device_tensors_are_errors_naming_the_argument_and_device():
    k = torch.zeros(1, 4, 2, 32)
    with pytest.raises(ValueError, match=r"^\[attention\] q = a tensor on cuda:1: must be on the CPU"):
        posenc.attention(_OnDevice(2), k, k, layout="bshd")
    with pytest.raises(ValueError, match=r"^\[attention\] v = a tensor on rocm:1: must be on the CPU"):
        posenc.attention(k, k, _OnDevice(10), layout="bshd")
    with pytest.raises(ValueError, match=r"^\[apply_rope\] tensors\[1\] = a tensor on cuda:1"):
        posenc.apply_rope(SPEC, k, _OnDevice(2), layout="bshd")


class _Dlpack:
    """Another library's CPU array that speaks DLPack only."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class _ArrayApi(_Dlpack):
    """One with an array-API namespace, whose from_dlpack makes its arrays."""

    class namespace:
        @staticmethod
        def from_dlpack(x):
            return _ArrayApi(np.from_dlpack(x))

    def __array_namespace__(self, api_version=None):
        return self.namespace


def test_any_dlpack_array_is_accepted():
    x = np.random.default_rng(0).standard_normal((1, 6, 2, 32), dtype=np.float32)
    want = posenc.apply_rope(SPEC, x, offset=4, layout="bshd")
    # Without an array namespace the result is NumPy; with one, that library's array.
    got = posenc.apply_rope(SPEC, _Dlpack(x), offset=4, layout="bshd")
    assert isinstance(got, np.ndarray) and np.array_equal(got, want)
    got = posenc.apply_rope(SPEC, _ArrayApi(x), offset=4, layout="bshd")
    assert isinstance(got, _ArrayApi) and np.array_equal(got.array, want)


def test_python_functions_and_methods_take_tensors(tmp_path):
    # An encoding function of the Python layer, int tensors as position ids.
    x = torch.randn(2, 5, 16)
    ids = torch.tensor([[3, 4, 5, 6, 7], [0, 1, 2, 3, 4]])
    got = posenc.add_sinusoidal(x, position_ids=ids)
    assert isinstance(got, torch.Tensor)
    assert torch.equal(got, torch.from_numpy(posenc.add_sinusoidal(x.numpy(), position_ids=ids.numpy())))
    # A dict of tensors (write_gguf) reads the same bytes as NumPy's.
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    posenc.write_gguf(tmp_path / "t.gguf", {"general.architecture": "test"}, {"w": w})
    assert np.array_equal(posenc.GgufFile(tmp_path / "t.gguf").dequantize("w"), w.numpy())


def test_hugging_face_layout_as_it_is():
    # [batch, heads, seq, dim] with layout="bhsd": the results of the bshd
    # call on transposed copies, transposed back; GQA (4 query heads, 2 kv).
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, heads, 9, 32, generator=gen) for heads in (4, 2, 2))
    bshd = [x.transpose(1, 2).contiguous() for x in (q, k, v)]
    for fn in (posenc.attention, posenc.reference.attention):
        out = fn(q, k, v, layout="bhsd", encoding=posenc.RopeEncoding(SPEC))
        want = fn(*bshd, encoding=posenc.RopeEncoding(SPEC))
        assert out.shape == (2, 4, 9, 32) and torch.equal(out, want.transpose(1, 2))
    for fn in (posenc.apply_rope, posenc.reference.apply_rope):
        q_rot, k_rot = fn(SPEC, q, k, layout="bhsd", offset=3)
        want_q, want_k = fn(SPEC, bshd[0], bshd[1], offset=3)
        assert torch.equal(q_rot, want_q.transpose(1, 2)) and torch.equal(k_rot, want_k.transpose(1, 2))
    # In place through the strided view: the caller's tensor is rotated.
    qq = q.clone()
    posenc.apply_rope(SPEC, qq, layout="bhsd", offset=3, inplace=True)
    assert torch.equal(qq, posenc.apply_rope(SPEC, q, layout="bhsd", offset=3))
    # NumPy too, and bad layouts name the rule.
    out = posenc.attention(q.numpy(), k.numpy(), v.numpy(), layout="bhsd")
    assert isinstance(out, np.ndarray) and out.shape == (2, 4, 9, 32)
    with pytest.raises(ValueError, match=r"^\[attention\] layout = 'bsdh': must be \"bshd\" .* or \"bhsd\""):
        posenc.attention(q, k, v, layout="bsdh")
    with pytest.raises(ValueError, match=r"^\[apply_rope\] tensors\[0\]: shape \(9, 32\) must have 4 axes"):
        posenc.apply_rope(SPEC, q[0, 0], layout="bhsd")


def test_no_layout_is_assumed():
    """Without layout= the shapes decide when they fit one layout only, and
    a call whose shapes fit both is an error: Hugging Face's tensors are
    never read silently as posenc's."""
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, heads, 9, 32, generator=gen) for heads in (4, 2, 2))   # HF's GQA [b, h, s, d]
    enc = posenc.RopeEncoding(SPEC)
    for fn in (posenc.attention, posenc.reference.attention):
        assert torch.equal(fn(q, k, v, encoding=enc), fn(q, k, v, encoding=enc, layout="bhsd"))
        assert torch.equal(fn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), encoding=enc),
                           fn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), encoding=enc, layout="bshd"))
        same = q[:, :2]                       # [2, 2, 9, 32]: 2 heads of 9 or 9 heads of 2 tokens?
        with pytest.raises(ValueError, match=r"^\[attention\] layout = None: the shapes \(2, 2, 9, 32\), "
                                             r"\(2, 2, 9, 32\), \(2, 2, 9, 32\) fit both \"bshd\" .* pass layout="):
            fn(same, same, same, encoding=enc)
    with pytest.raises(ValueError, match=r"^\[apply_rope\] layout = None: the shapes \(2, 4, 9, 32\) fit both"):
        posenc.apply_rope(SPEC, q)
    # The positions' length names the sequence axis; q and k of different head counts too.
    assert torch.equal(posenc.apply_rope(SPEC, q, position_ids=list(range(9))),
                       posenc.apply_rope(SPEC, q, position_ids=list(range(9)), layout="bhsd"))
    assert torch.equal(posenc.apply_rope(SPEC, q, k)[0], posenc.apply_rope(SPEC, q, k, layout="bhsd")[0])
    ref = q.double().numpy()[:, :2]
    with pytest.raises(ValueError, match=r"^\[attention\] layout = None: the shapes"):
        posenc.reference.plain_attention(ref, ref, ref)

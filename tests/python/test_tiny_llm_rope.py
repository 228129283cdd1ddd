"""posenc.RoPE, the Tiny-LLM course's RoPE class, against outside oracles:

* the course's class itself (CourseRoPE below, transcribed from the course's
  description), run under MLX as the course runs it, and under NumPy;
* MLX's own kernel, ``mx.fast.rope`` (its traditional, base, offset and
  scale arguments);
* a float64 computation from the definition (rope_oracles.rope_float64),
  for positions up to 10^6.

Both pairings, the three offset forms, f32/f16/bf16, NumPy, PyTorch and MLX
arrays; no copies for NumPy and PyTorch (data pointers); each of the
course's asserts as posenc's ValueError. MLX is pinned in
python/requirements.txt; where it is not installed, its tests skip and the
NumPy ones still run.
"""

from __future__ import annotations

import doctest

import ml_dtypes
import numpy as np
import pytest
import torch

import posenc
from rope_oracles import BF16, DTYPES, TOLERANCE, f64, max_violation, random_qk, rope_float64, to_numpy, to_torch

try:
    import mlx.core as mx
except ImportError:  # pragma: no cover - MLX is pinned in python/requirements.txt
    mx = None
needs_mlx = pytest.mark.skipif(mx is None, reason="mlx is not installed (python/requirements.txt pins mlx[cpu]; "
                                                   "./scripts/install-deps installs it)")

N, S, H = 2, 7, 3


class CourseRoPE:
    """The Tiny-LLM course's RoPE (week 1, "Positional Encodings and RoPE"),
    written from its description over an array module `xp`: mlx.core, as the
    course runs it, or NumPy. cos and sin of seq_len positions are
    precomputed in float32 with freqs = base^(-arange(0, dims, 2) / dims);
    traditional pairs (x0, x1), (x2, x3), ..., else the halves; offset is
    None, a slice of length S, or a list of N such slices. (t is float32
    here so that NumPy forms the table in float32 as MLX does.)"""

    def __init__(self, xp, dims, seq_len, base=10000, traditional=False):
        assert dims % 2 == 0, "dims must be even"
        self.xp, self.dims, self.traditional = xp, dims, traditional
        self.half_dims = dims // 2
        inner = xp.arange(0, self.half_dims, dtype=xp.float32) / self.half_dims
        freqs = xp.power(base, -inner)
        t = xp.arange(seq_len, dtype=xp.float32)
        freqs = xp.outer(t, freqs)
        self.cos_freqs = xp.cos(freqs)
        self.sin_freqs = xp.sin(freqs)

    def __call__(self, x, offset=None):
        xp = self.xp
        n, s, h, d = x.shape
        if offset is not None:
            if isinstance(offset, slice):
                assert offset.stop - offset.start == s, f"offset must be of length {s}"
            elif isinstance(offset, list):
                assert len(offset) == n, f"offsets must have the same length as batch size {n}"
                for o in offset:
                    assert o.stop - o.start == s, f"offset must be of length {s}"
                offset = xp.array([list(range(o.start, o.stop)) for o in offset])
        cos_basis = self.cos_freqs[:s, :] if offset is None else self.cos_freqs[offset, :]
        sin_basis = self.sin_freqs[:s, :] if offset is None else self.sin_freqs[offset, :]
        if self.traditional:
            x = x.reshape(n, s, h, self.half_dims, 2)
            x1, x2 = x[..., 0], x[..., 1]
        else:
            x1, x2 = x[..., 0:self.half_dims], x[..., self.half_dims:self.dims]
        cos_basis = cos_basis.reshape(-1, s, 1, self.half_dims)
        sin_basis = sin_basis.reshape(-1, s, 1, self.half_dims)
        real = x1 * cos_basis - x2 * sin_basis
        imag = x2 * cos_basis + x1 * sin_basis
        if self.traditional:
            y = xp.stack([real, imag], axis=-1).reshape(n, s, h, d)
        else:
            y = xp.concatenate([real, imag], axis=-1).reshape(n, s, h, d)
        return y.astype(x.dtype)


# ---- helpers -----------------------------------------------------------------

def to_mlx(x: np.ndarray):
    """NumPy -> MLX, exactly (bfloat16 through its bits)."""
    if x.dtype == BF16:
        return mx.view(mx.array(x.view(np.uint16)), mx.bfloat16)
    return mx.array(x)


def from_mlx(y) -> np.ndarray:
    if y.dtype == mx.bfloat16:
        return np.array(mx.view(y, mx.uint16)).view(BF16)
    return np.array(y)


def mlx_fast_rope(x: np.ndarray, dims, base, traditional, starts, scale=1.0) -> np.ndarray:
    """mx.fast.rope on [N, S, H, D]: it wants the sequence second to last."""
    y = mx.fast.rope(to_mlx(x).transpose(0, 2, 1, 3), dims, traditional=traditional, base=base, scale=scale,
                     offset=mx.array(np.asarray(starts, np.int32)))
    return from_mlx(y.transpose(0, 2, 1, 3))


def forms(starts):
    """{form: (offset argument, start of each row)} for rows starting at `starts`."""
    return {"none": (None, [0, 0]),
            "slice": (slice(starts[0], starts[0] + S), [starts[0]] * N),
            "slices": ([slice(a, a + S) for a in starts], list(starts))}


def truth(x, dims, base, traditional, starts):
    inv_freq = float(base) ** (-np.arange(0, dims, 2, dtype=np.float64) / dims)
    positions = np.asarray(starts, np.int64)[:, None] + np.arange(S)[None, :]
    return rope_float64(x, positions, inv_freq, "interleaved" if traditional else "half-split")


def spacing(expected, dtype) -> np.ndarray:
    """One unit in the last place of `dtype` at |expected|."""
    info = ml_dtypes.finfo(dtype)
    exponent = np.floor(np.log2(np.maximum(np.abs(f64(expected)), info.smallest_normal)))
    return np.ldexp(1.0, (exponent - info.nmant).astype(int))


def check_close(actual, expected, name, f32_tol=1e-5, rounded_once=True) -> float:
    """f32: within f32_tol (returns the max |diff|). f16/bf16 (returns the
    max error in ulps): within one ulp of their own, plus 1e-6 for float32
    arithmetic near zero, when both sides compute in float32 and round once
    (posenc, the course's class, float64); else (mx.fast.rope, which rounds
    to the dtype more than once) within rope_oracles' dtype tolerances
    (atol = rtol = 2e-3 f16, 2e-2 bf16)."""
    diff = np.abs(f64(actual) - f64(expected))
    if actual.dtype == np.float32:
        err = float(diff.max())
        assert err <= f32_tol, f"{name}: max |diff| {err:.3g} > {f32_tol}"
        return err
    ulp = spacing(expected, actual.dtype)
    err = float(np.max(diff / ulp))
    if rounded_once:
        assert np.all(diff <= ulp + 1e-6), f"{name}: {err:.3g} ulp of {actual.dtype}"
    else:
        name_of = {np.dtype(np.float16): "f16", BF16: "bf16"}[actual.dtype]
        violation = max_violation(actual, expected, TOLERANCE[name_of])
        assert violation <= 1.0, f"{name}: {violation:.3g} of the {name_of} tolerance"
    return err


# ---- against the course's class and mx.fast.rope -------------------------------

XPS = [pytest.param(np, id="numpy"), pytest.param(mx, id="mlx", marks=needs_mlx)]


@pytest.mark.parametrize("xp", XPS)
@pytest.mark.parametrize("form", ["none", "slice", "slices"])
@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_matches_the_course_class(xp, form, traditional, dtype, rng):
    dims, seq_len = 32, 48
    x = random_qk(rng, (N, S, H, dims), DTYPES[dtype][0])
    offset, _ = forms([5, 33])[form]
    ours = posenc.RoPE(dims, seq_len, traditional=traditional)(x, offset)
    course = CourseRoPE(xp, dims, seq_len, traditional=traditional)
    theirs = course(x, offset) if xp is np else from_mlx(course(to_mlx(x), offset))
    assert ours.dtype == x.dtype and ours.shape == x.shape
    check_close(ours, theirs, f"course class under {xp.__name__}")


@needs_mlx
@pytest.mark.parametrize("form", ["none", "slice", "slices"])
@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("base", [10000, 500000])
def test_matches_mx_fast_rope(form, traditional, dtype, base, rng):
    dims, seq_len = 64, 48
    x = random_qk(rng, (N, S, H, dims), DTYPES[dtype][0])
    offset, starts = forms([2, 40])[form]
    ours = posenc.RoPE(dims, seq_len, base=base, traditional=traditional)(x, offset)
    check_close(ours, mlx_fast_rope(x, dims, base, traditional, starts), "mx.fast.rope", rounded_once=False)


@needs_mlx
def test_mx_fast_rope_scale_is_posencs_linear_scaling(rng):
    """mx.fast.rope's scale multiplies positions: posenc's linear scaling
    (position interpolation) with factor 1 / scale."""
    x = random_qk(rng, (N, S, H, 64), np.float32)
    spec = posenc.RopeSpec(head_dim=64, scaling={"rope_type": "linear", "factor": 4.0})
    ours = posenc.apply_rope(spec, x, offsets=[3, 30], layout="bshd")
    check_close(ours, mlx_fast_rope(x, 64, 10000.0, False, [3, 30], scale=0.25), "mx.fast.rope scale=0.25")


@needs_mlx
@pytest.mark.parametrize("traditional", [False, True])
def test_far_positions_agree_up_to_the_oracles_float32_angles(traditional, rng):
    """At positions of thousands the course's table and mx.fast.rope carry
    float32 angles (about 1 ulp of the angle each, |x| times that in the
    result): posenc agrees with both within 1e-5 plus that slack."""
    dims, start = 32, 4000
    x = random_qk(rng, (N, S, H, dims), np.float32)
    ours = posenc.RoPE(dims, start + S, traditional=traditional)(x, slice(start, start + S))
    slack = float(np.abs(x).max()) * 2.0 * (start + S) * 2.0**-24
    course = from_mlx(CourseRoPE(mx, dims, start + S, traditional=traditional)(to_mlx(x), slice(start, start + S)))
    check_close(ours, course, "course class", f32_tol=1e-5 + slack)
    check_close(ours, mlx_fast_rope(x, dims, 10000, traditional, [start] * N), "mx.fast.rope", f32_tol=1e-5 + slack)


# ---- against float64, to 10^6 ---------------------------------------------------

@pytest.mark.parametrize("form, starts", [("none", [0, 0]), ("slice", [999_993, 999_993]),
                                          ("slices", [123_456, 999_993]), ("slices", [0, 999_993])])
@pytest.mark.parametrize("traditional", [False, True])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_matches_float64_to_a_million(form, starts, traditional, dtype, rng):
    dims = 64
    x = random_qk(rng, (N, S, H, dims), DTYPES[dtype][0])
    offset, rows = forms(starts)[form]
    ours = posenc.RoPE(dims, 1_000_000, traditional=traditional)(x, offset)
    # f32: float32 cos/sin of a float64-reduced angle, a few ulps of |x| <= 5.
    check_close(ours, truth(x, dims, 10000, traditional, rows), "float64", f32_tol=1e-6)


def test_course_class_in_numpy_matches_float64_near_zero(rng):
    """The NumPy transcription itself is right where float32 angles are exact enough."""
    x = random_qk(rng, (N, S, H, 16), np.float32)
    for traditional in (False, True):
        got = CourseRoPE(np, 16, 16, traditional=traditional)(x, [slice(0, S), slice(9, 9 + S)])
        check_close(got, truth(x, 16, 10000, traditional, [0, 9]), "course class (NumPy)")


# ---- array kinds and copies -------------------------------------------------------

@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_torch_and_mlx_in_and_out_equal_numpy(dtype, rng):
    x = random_qk(rng, (N, S, H, 16), DTYPES[dtype][0])
    rope = posenc.RoPE(16, 64, traditional=True)
    offset = [slice(1, 1 + S), slice(20, 20 + S)]
    expected = rope(x, offset)
    t = rope(to_torch(x), offset)
    assert isinstance(t, torch.Tensor) and t.dtype == DTYPES[dtype][1]
    np.testing.assert_array_equal(f64(to_numpy(t)), f64(expected))
    if mx is not None:
        m = rope(to_mlx(x), offset)
        assert isinstance(m, mx.array) and m.dtype == to_mlx(x).dtype
        np.testing.assert_array_equal(f64(from_mlx(m)), f64(expected))


@pytest.fixture
def kernel_calls(monkeypatch):
    """Records the NumPy array each posenc.RoPE call hands the kernel and the one it gets back."""
    calls = []
    apply_rope = posenc.rope.apply_rope

    def spy(spec, view, **kwargs):
        out = apply_rope(spec, view, **kwargs)
        calls.append((view, out))
        return out

    monkeypatch.setattr(posenc.rope, "apply_rope", spy)
    return calls


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_no_copies_for_numpy_and_torch(dtype, kernel_calls, rng):
    rope = posenc.RoPE(16, 64)
    fused = random_qk(rng, (N, S, 3 * H, 16), DTYPES[dtype][0])  # a fused qkv projection: q is a strided slice
    for x in (fused, fused[:, :, :H]):
        y = rope(x, slice(3, 3 + S))
        view, out = kernel_calls[-1]
        assert view.ctypes.data == x.ctypes.data and view.strides == x.strides and y is out
    tensor = to_torch(fused)
    for t in (tensor, tensor[:, :, :H]):
        y = rope(t, [slice(0, S), slice(5, 5 + S)])
        view, out = kernel_calls[-1]
        assert view.ctypes.data == t.data_ptr() and y.data_ptr() == out.ctypes.data
    assert len(kernel_calls) == 4


@needs_mlx
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_mlx_is_read_without_a_copy(dtype, kernel_calls, rng):
    x = to_mlx(random_qk(rng, (N, S, H, 16), DTYPES[dtype][0]))
    posenc.RoPE(16, 64)(x)
    view, _ = kernel_calls[-1]
    bits = mx.view(x, mx.uint16) if x.dtype == mx.bfloat16 else x  # NumPy's DLPack has no bfloat16
    assert view.ctypes.data == np.from_dlpack(bits).ctypes.data


# ---- the course's asserts, in posenc's form ---------------------------------------

def test_the_courses_asserts_as_errors():
    x = np.zeros((N, 4, H, 8), np.float32)
    rope = posenc.RoPE(8, 16)
    cases = [
        (lambda: rope(x, slice(0, 5)), "[rope] offset = slice(0, 5): must have length S = 4"),
        (lambda: rope(x, slice(np.int64(5), 1)), "[rope] offset = slice(5, 1): must have length S = 4"),
        (lambda: rope(x, slice(-2, 2)), "[rope] offset = slice(-2, 2): must start at position 0 or later"),
        (lambda: rope(x, slice(13, 17)), "[rope] offset = slice(13, 17): must end at or before seq_len = 16 "
                                         "(the positions this RoPE was built for)"),
        (lambda: rope(x, slice(0, 8, 2)), "[rope] offset = slice(0, 8, 2): must have step 1 (consecutive positions)"),
        (lambda: rope(x, slice(None, 4)), "[rope] offset = slice(None, 4): must give its start and stop"),
        (lambda: rope(x, slice(0.5, 4.5)), "[rope] offset.start = 0.5: must be an integer"),
        (lambda: rope(x, [slice(0, 4)] * 3), "[rope] offset = a list of 3 slices: must have one slice per batch "
                                             "row, N = 2"),
        (lambda: rope(x, [slice(0, 4), slice(1, 4)]), "[rope] offset[1] = slice(1, 4): must have length S = 4"),
        (lambda: rope(x, [slice(0, 4), 3]), "[rope] offset[1] = 3: must be a slice"),
        (lambda: rope(x, 3), "[rope] offset = 3: must be None, a slice or a list of N slices (one per row)"),
        (lambda: posenc.RoPE(8, 3)(x), "[rope] x.shape[1] = 4: must be at most seq_len = 3 (offset None: "
                                       "positions 0 to S - 1)"),
        (lambda: posenc.RoPE(16, 16)(x), "[rope] x.shape[3] = 8: must equal dims = 16"),
        (lambda: rope(x[0]), "[rope] x.shape = (4, 3, 8): must be [N, S, H, D] (4 axes)"),
        (lambda: posenc.RoPE(7, 16), "[rope] dims = 7: must be even and > 0 (dimensions rotate in pairs)"),
        (lambda: posenc.RoPE(0, 16), "[rope] dims = 0: must be even and > 0 (dimensions rotate in pairs)"),
        (lambda: posenc.RoPE(8, 0), "[rope] seq_len = 0: must be >= 1"),
        (lambda: posenc.RoPE(8, 16, base=1), "[rope] base = 1.0: must be a finite number > 1"),
        (lambda: posenc.RoPE(8, 16, traditional=1), "[rope] traditional = 1: must be True or False"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError) as raised:
            call()
        assert str(raised.value) == message


def test_docstring_example():
    result = doctest.testmod(posenc.tiny_llm, extraglobs={"posenc": posenc, "np": np})
    assert result.failed == 0 and result.attempted > 0


def test_repr_and_spec():
    rope = posenc.RoPE(64, 4096, base=500000, traditional=True)
    assert repr(rope) == "RoPE(dims=64, seq_len=4096, base=500000, traditional=True)"
    assert rope.spec == posenc.RopeSpec(theta=500000.0, head_dim=64, layout="interleaved")

"""Properties of positional encodings derived in Su Jianlin's "Transformer升级之路" posts
(kexue.fm/archives/8231 for sinusoidal, 8265 for RoPE) and the RoFormer paper,
computed in C++ (float64).

Each function returns NumPy arrays (or a dict of them); the command line
``posenc analyze ...`` draws the same numbers.

Example:
    >>> import posenc
    >>> spec = posenc.RopeSpec(head_dim=128)
    >>> d = posenc.analysis.rope_decay(spec, max_distance=4)
    >>> float(d["bound"][0])   # RoFormer's bound at distance 0 is (d/2 + 1)/2
    32.5
"""
from __future__ import annotations

import numpy as np

from . import _args, _posenc
from . import _tensors
from .rope import RopeSpec

__all__ = ["binary_digits", "log_spaced_distances", "rope_dims", "rope_decay", "rope_invariance",
           "rope_score_matrix", "sinusoidal_dot_matrix", "sinusoidal_linear_map", "sinusoidal_shift_matrix",
           "sinusoidal_solve_shift_matrix"]


def _int(op: str, name: str, value) -> int:
    return _args.integer(op, name, value)


def _seed(op: str, value) -> int:
    return _args.integer(op, "seed", value, low=0, high=_args.UINT64_MAX, rule=_args.UINT64_RULE)


def rope_dims(spec: RopeSpec, original_length: int, comparison_factor: float = 0.0,
              longrope_factors=None) -> dict:
    """Per pair: inverse frequency, wavelength 2π/θ (tokens) and rotations within
    ``original_length``, for ``spec`` and (if ``comparison_factor`` > 0) for
    plain, linear, NTK, YaRN and Llama-3 built from its base with that factor,
    and LongRoPE beyond ``original_length`` with ``longrope_factors`` (one per
    pair) or, for a LongRoPE spec, its own long factors. Which dimensions turn
    fully within the training length extrapolate; the others interpolate."""
    factors = [] if longrope_factors is None else [float(f) for f in longrope_factors]
    return _posenc.rope_dims(spec, _int("rope_dims", "original_length", original_length),
                             float(comparison_factor), factors)


def rope_decay(spec: RopeSpec, max_distance: int = 256, step: int = 1, samples: int = 32, seed: int = 0,
               distances=None) -> dict:
    """RoFormer's long-range decay: against relative distance, the upper bound
    (1/(d/2)) Σ_j |S_j| and the measured mean |<R_m q, R_n k>| for all-ones
    and for random N(0, 1) q, k. Keys: distance, bound, ones, random.
    ``distances`` (e.g. :func:`log_spaced_distances`) replaces the grid
    0, step, ..., max_distance."""
    op = "rope_decay"
    listed = [] if distances is None else _args.int64_array(op, "distances", distances).reshape(-1).tolist()
    return _posenc.rope_decay(spec, _int(op, "max_distance", max_distance), _int(op, "step", step),
                              _int(op, "samples", samples), _seed(op, seed), listed)


def log_spaced_distances(max_distance: int, count: int) -> np.ndarray:
    """About ``count`` whole distances from 1 to ``max_distance``, evenly spaced on a log scale."""
    return np.asarray(_posenc.log_spaced_distances(_int("rope_decay", "max_distance", max_distance),
                                                           _int("rope_decay", "count", count)), dtype=np.int64)


def binary_digits(positions: int, bits: int) -> np.ndarray:
    """[positions, bits]: bit b of each position k (bit 0, the fastest, first): the
    counter that sinusoidal frequencies smooth out (kexue.fm/archives/8231)."""
    return _posenc.binary_digits(_int("binary_digits", "positions", positions), _int("binary_digits", "bits", bits))


def rope_invariance(spec: RopeSpec, max_position: int = 4096, step: int = 64, seed: int = 0) -> dict:
    """Max |<R_m q, R_n k> - <R_{m-n} q, k>| over a grid of positions, in
    float64 and through posenc's float32 kernel."""
    return _posenc.rope_invariance(spec, _int("rope_invariance", "max_position", max_position),
                                   _int("rope_invariance", "step", step), _seed("rope_invariance", seed))


def rope_score_matrix(spec: RopeSpec, q, k, positions: int) -> np.ndarray:
    """[positions, positions]: <R_m q, R_n k> for fixed q, k (head_dim values each)."""
    return _posenc.rope_score_matrix(spec, list(map(float, q)), list(map(float, k)),
                                     _int("rope_scores", "positions", positions))


def sinusoidal_dot_matrix(dim: int, positions: int, base: float = 10000.0) -> np.ndarray:
    """[positions, positions]: <p_m, p_n> of the sinusoidal encodings (kexue.fm/archives/8231)."""
    return _posenc.sinusoidal_dot_matrix(_int("sinusoidal_dots", "dim", dim), float(base),
                                         _int("sinusoidal_dots", "positions", positions))


def sinusoidal_shift_matrix(dim: int, delta: float, base: float = 10000.0) -> np.ndarray:
    """T(Δ) with p_{k+Δ} = T(Δ) p_k: block-diagonal rotations that depend on Δ only."""
    return _posenc.sinusoidal_shift_matrix(_int("sinusoidal_shift", "dim", dim), float(base), float(delta))


def sinusoidal_solve_shift_matrix(dim: int, delta: float, first: int = 0, count: int = 256,
                                  base: float = 10000.0) -> np.ndarray:
    """T(Δ) found from the encodings alone: per pair, the least-squares 2×2 block
    mapping p_k to p_{k+Δ} for k = first .. first+count-1."""
    return _posenc.sinusoidal_solve_shift_matrix(_int("sinusoidal_shift", "dim", dim), float(base), float(delta),
                                                 _int("sinusoidal_shift", "first", first),
                                                 _int("sinusoidal_shift", "count", count))


def sinusoidal_linear_map(dim: int, positions: int = 512, max_shift: int = 64, base: float = 10000.0) -> dict:
    """How exactly p_{k+Δ} = T(Δ) p_k holds: max error per Δ and overall, and how
    far T solved back from either half of the positions is from T(Δ)
    (``max_solved_deviation``: T depends on Δ only)."""
    return _posenc.sinusoidal_linear_map(_int("sinusoidal_linear_map", "dim", dim), float(base),
                                         _int("sinusoidal_linear_map", "positions", positions),
                                         _int("sinusoidal_linear_map", "max_shift", max_shift))

# Tensors (PyTorch, any DLPack array) in, the caller's kind out (_tensors.py).
_tensors.wrap_functions(globals(), __all__)

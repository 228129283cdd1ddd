"""The seeds' properties of positional encodings, computed in C++ (float64).

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

from . import _posenc
from .rope import RopeSpec

__all__ = ["rope_dims", "rope_decay", "rope_invariance", "rope_score_matrix", "sinusoidal_dot_matrix",
           "sinusoidal_linear_map", "sinusoidal_shift_matrix"]


def rope_dims(spec: RopeSpec, original_length: int, comparison_factor: float = 0.0) -> dict:
    """Per pair: inverse frequency, wavelength 2π/θ (tokens) and rotations within
    ``original_length``, for ``spec`` and (if ``comparison_factor`` > 0) for
    plain, linear, NTK, YaRN and Llama-3 built from its base with that factor.
    Which dimensions turn fully within the training length extrapolate; the
    others interpolate."""
    return _posenc.rope_dims(spec._spec, int(original_length), float(comparison_factor))


def rope_decay(spec: RopeSpec, max_distance: int = 256, step: int = 1, samples: int = 32, seed: int = 0) -> dict:
    """RoFormer's long-range decay: against relative distance, the upper bound
    (1/(d/2)) Σ_j |S_j| and the measured mean |<R_m q, R_n k>| for all-ones
    and for random N(0, 1) q, k. Keys: distance, bound, ones, random."""
    return _posenc.rope_decay(spec._spec, int(max_distance), int(step), int(samples), int(seed))


def rope_invariance(spec: RopeSpec, max_position: int = 4096, step: int = 64, seed: int = 0) -> dict:
    """Max |<R_m q, R_n k> - <R_{m-n} q, k>| over a grid of positions, in
    float64 and through posenc's float32 kernel."""
    return _posenc.rope_invariance(spec._spec, int(max_position), int(step), int(seed))


def rope_score_matrix(spec: RopeSpec, q, k, positions: int) -> np.ndarray:
    """[positions, positions]: <R_m q, R_n k> for fixed q, k (head_dim values each)."""
    return _posenc.rope_score_matrix(spec._spec, list(map(float, q)), list(map(float, k)), int(positions))


def sinusoidal_dot_matrix(dim: int, positions: int, base: float = 10000.0) -> np.ndarray:
    """[positions, positions]: <p_m, p_n> of the sinusoidal encodings (seed 000's picture)."""
    return _posenc.sinusoidal_dot_matrix(int(dim), float(base), int(positions))


def sinusoidal_shift_matrix(dim: int, delta: float, base: float = 10000.0) -> np.ndarray:
    """T(Δ) with p_{k+Δ} = T(Δ) p_k: block-diagonal rotations that depend on Δ only."""
    return _posenc.sinusoidal_shift_matrix(int(dim), float(base), float(delta))


def sinusoidal_linear_map(dim: int, positions: int = 512, max_shift: int = 64, base: float = 10000.0) -> dict:
    """How exactly p_{k+Δ} = T(Δ) p_k holds: max error per Δ and overall."""
    return _posenc.sinusoidal_linear_map(int(dim), float(base), int(positions), int(max_shift))

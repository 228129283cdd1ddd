"""Rotary position embeddings (RoPE) on NumPy arrays.

Tensors are ``[batch, seq, heads, head_dim]`` arrays of float32, float16 or
bfloat16 (``ml_dtypes.bfloat16``). Any strides are accepted as long as the last
axis is contiguous, so slices of a fused QKV projection need no copy. Angles
are formed in float64 and reduced there to a quarter turn; the sine and cosine
of the remainder come from float32 polynomials, so results stay accurate at
positions of 10^6; f16/bf16 values are computed in float32 and rounded once.

Example::

    >>> import numpy as np, posenc
    >>> spec = posenc.RopeSpec(theta=10000.0, head_dim=64)
    >>> q = np.random.default_rng(0).standard_normal((2, 5, 8, 64), dtype=np.float32)
    >>> k = q[:, :, :2]                      # GQA: 2 key heads, a strided view
    >>> q_rot, k_rot = posenc.apply_rope(spec, q, k, offset=3)
    >>> q_rot.shape, k_rot.shape
    ((2, 5, 8, 64), (2, 5, 2, 64))
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional, Tuple, Union

import numpy as np

from . import _args, _posenc

__all__ = ["RopeSpec", "apply_rope", "permute_qk_weights"]

def _error(parameter: str, value: Any, rule: str) -> ValueError:
    """A ValueError in the C++ library's format: "[rope] parameter = value: rule"."""
    return ValueError(f"[rope] {parameter} = {value}: {rule}")


class RopeSpec:
    """How a model rotates its queries and keys: base, rotary dimension, pair
    layout and frequency scaling method.

    Args:
        theta: the base (``rope_theta``), > 1.
        head_dim: dimensions per attention head.
        rotary_dim: how many leading dimensions of each head rotate (even);
            the rest pass through unchanged. ``None`` means all of ``head_dim``.
        partial_rotary_factor: alternative to ``rotary_dim`` in Hugging Face's
            spelling: ``rotary_dim = int(head_dim * partial_rotary_factor)``.
        layout: ``"half-split"`` (GPT-NeoX, Hugging Face Llama/Qwen2: pair k is
            ``(k, k + rotary_dim/2)``) or ``"interleaved"`` (GPT-J, RoFormer,
            Meta's Llama checkpoints: pair k is ``(2k, 2k+1)``).
        scaling: ``None`` or a dict in Hugging Face's ``rope_scaling`` spelling,
            with ``"rope_type"`` (or ``"type"``) one of:

            * ``"linear"``: ``factor``
            * ``"ntk"``: ``alpha`` (static NTK-aware base change)
            * ``"dynamic"``: ``factor``, ``original_max_position_embeddings``
            * ``"yarn"``: ``factor``, ``original_max_position_embeddings``,
              optional ``beta_fast`` (32), ``beta_slow`` (1), ``mscale``,
              ``mscale_all_dim`` (DeepSeek-V2), ``attention_factor`` (overrides),
              ``truncate`` (True), ``ext_factor`` (1), ``attn_factor`` (1)
            * ``"llama3"``: ``factor``, ``low_freq_factor``, ``high_freq_factor``,
              ``original_max_position_embeddings``
            * ``"longrope"``: ``short_factor``, ``long_factor`` (lists of
              ``rotary_dim/2``), ``original_max_position_embeddings``, optional
              ``factor`` and ``attention_factor``
            * ``"factors"``: ``factors`` (per-pair divisors, GGUF ``rope_freqs``)

            Unknown keys and rope types raise ValueError.

    Raises:
        ValueError: naming the parameter, its value and the rule it breaks,
            e.g. ``[rope] rotary_dim = 63: must be even (dimensions rotate in pairs)``.

    Example::

        >>> spec = posenc.RopeSpec(theta=1e6, head_dim=128, scaling={
        ...     "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
        >>> inv_freq, attention_factor = spec.frequencies()
        >>> round(attention_factor, 4)
        1.1386
    """

    __slots__ = ("_spec", "max_position_embeddings")

    def __init__(
        self,
        theta: float = 10000.0,
        head_dim: int = 0,
        rotary_dim: Optional[int] = None,
        partial_rotary_factor: Optional[float] = None,
        layout: str = "half-split",
        scaling: Optional[Mapping[str, Any]] = None,
    ) -> None:
        if scaling is not None and not isinstance(scaling, Mapping):
            raise _error("scaling", repr(scaling), "must be None or a dict with a rope_type")
        self._spec = _posenc.RopeSpec(
            float(theta),
            _index("head_dim", head_dim),
            None if rotary_dim is None else _index("rotary_dim", rotary_dim),
            None if partial_rotary_factor is None else float(partial_rotary_factor),
            str(layout),
            None if scaling is None else dict(scaling),
        )
        #: max_position_embeddings of the config this spec was read from (0 if none).
        self.max_position_embeddings = 0

    @classmethod
    def _wrap(cls, core: Any, max_position_embeddings: int = 0) -> "RopeSpec":
        spec = cls.__new__(cls)
        spec._spec = core
        spec.max_position_embeddings = int(max_position_embeddings)
        return spec

    @classmethod
    def from_hf_config(cls, config: Union[Mapping[str, Any], str, os.PathLike, Any]) -> "RopeSpec":
        """Reads the RoPE of a Hugging Face model configuration.

        ``config`` is a dict, a JSON string, a path to a ``config.json`` file, or
        a ``transformers.PretrainedConfig`` (anything with ``to_dict()``). Reads
        ``rope_theta`` (or GPT-NeoX's ``rotary_emb_base``), ``head_dim`` (or
        ``hidden_size / num_attention_heads``), ``partial_rotary_factor`` (or
        ``rotary_pct``, or GPT-J's ``rotary_dim``) and ``rope_scaling`` /
        ``rope_parameters`` with ``type`` or ``rope_type``. GPT-J models get the
        interleaved layout, all others half-split, as Hugging Face applies them.

        Example::

            >>> spec = posenc.RopeSpec.from_hf_config({
            ...     "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
            ...     "max_position_embeddings": 131072,
            ...     "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
            ...                      "high_freq_factor": 4.0,
            ...                      "original_max_position_embeddings": 8192}})
            >>> spec.scaling_type, spec.head_dim
            ('llama3', 128)
        """
        if hasattr(config, "to_dict") and not isinstance(config, Mapping):
            config = config.to_dict()
        if isinstance(config, Mapping):
            text = json.dumps(dict(config), default=_json_default)
        elif isinstance(config, (str, os.PathLike)):
            text = str(config) if isinstance(config, str) else ""
            if not text.lstrip().startswith("{"):
                path = os.fspath(config)
                if not os.path.isfile(path):
                    raise ValueError(
                        f"[hf-config] config = {path!r}: neither a JSON object nor an existing file"
                    )
                with open(path, encoding="utf-8") as f:
                    text = f.read()
        else:
            raise ValueError(
                f"[hf-config] config = {type(config).__name__}: must be a dict, JSON text, a path "
                "or a transformers config"
            )
        core, max_positions = _posenc.rope_from_hf_config(text)
        return cls._wrap(core, max_positions)

    def to_hf_config(self, max_position_embeddings: Optional[int] = None) -> dict:
        """A config.json fragment (dict) that :meth:`from_hf_config` reads back
        to the same spec. ``max_position_embeddings`` defaults to the one read
        by :meth:`from_hf_config` (omitted if 0)."""
        if max_position_embeddings is None:
            max_position_embeddings = self.max_position_embeddings
        return json.loads(self._spec.to_hf_config(_index("max_position_embeddings", max_position_embeddings)))

    # -- properties -------------------------------------------------------
    @property
    def theta(self) -> float:
        """The RoPE base."""
        return self._spec.theta

    @property
    def head_dim(self) -> int:
        return self._spec.head_dim

    @property
    def rotary_dim(self) -> int:
        """Rotated dimensions per head (== head_dim unless partial rotary)."""
        return self._spec.rotary_dim

    @property
    def partial_rotary_factor(self) -> float:
        return self._spec.rotary_dim / self._spec.head_dim

    @property
    def pairs(self) -> int:
        """rotary_dim / 2: the length of the frequency table."""
        return self._spec.pairs

    @property
    def layout(self) -> str:
        """``"half-split"`` or ``"interleaved"``."""
        return self._spec.layout

    @property
    def scaling_type(self) -> str:
        """``"none"``, ``"linear"``, ``"ntk"``, ``"dynamic"``, ``"yarn"``,
        ``"llama3"``, ``"longrope"`` or ``"factors"``."""
        return self._spec.scaling_type

    @property
    def scaling(self) -> Optional[dict]:
        """The scaling method as a dict (``RopeSpec(..., scaling=spec.scaling)``
        gives the same spec), or None."""
        return self._spec.scaling

    @property
    def original_context_length(self) -> int:
        """The training context length the scaling refers to (0 if none)."""
        return self._spec.original_context_length

    # -- methods ------------------------------------------------------------
    def frequencies(self, seq_len: int = 0) -> Tuple[np.ndarray, float]:
        """The frequency table for a sequence of ``seq_len`` tokens.

        Returns ``(inv_freq, attention_factor)``: ``inv_freq`` is a float64 array
        of ``rotary_dim / 2`` (the angle of pair k at position p is
        ``p * inv_freq[k]``); ``attention_factor`` multiplies the rotated q and k
        (YaRN, LongRoPE; 1.0 otherwise). ``seq_len`` matters only for dynamic NTK
        and LongRoPE; 0 means "within the original context".
        """
        return self._spec.frequencies(_index("seq_len", seq_len))

    def yarn_extrapolation_weights(self) -> np.ndarray:
        """YaRN only: per pair, the weight of the unscaled frequency (1 for fast
        dimensions, 0 for fully interpolated ones); empty for other methods."""
        return self._spec.yarn_extrapolation_weights()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RopeSpec):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(json.dumps(self._key(), sort_keys=True))

    def _key(self) -> tuple:
        return (self.theta, self.head_dim, self.rotary_dim, self.layout, self.scaling)

    def __repr__(self) -> str:
        parts = [f"theta={self.theta!r}", f"head_dim={self.head_dim}"]
        if self.rotary_dim != self.head_dim:
            parts.append(f"rotary_dim={self.rotary_dim}")
        parts.append(f"layout={self.layout!r}")
        if self.scaling is not None:
            parts.append(f"scaling={self.scaling!r}")
        return f"RopeSpec({', '.join(parts)})"

    def __reduce__(self):
        return (_rebuild, (self.theta, self.head_dim, self.rotary_dim, self.layout, self.scaling,
                           self.max_position_embeddings))


def _rebuild(theta, head_dim, rotary_dim, layout, scaling, max_position_embeddings):
    spec = RopeSpec(theta, head_dim, rotary_dim, None, layout, scaling)
    spec.max_position_embeddings = max_position_embeddings
    return spec


def _json_default(value: Any) -> Any:
    # transformers configs may hold NumPy scalars or torch dtypes; numbers are
    # what matters here, anything else is written as a string.
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def _index(name: str, value: Any) -> int:
    """An integer argument (Python int or NumPy integer) that fits int64, else ValueError."""
    return _args.integer("rope", name, value)


# Bound in C++ (python/src/bind_rope.cc) with its signature and docstring:
# keyword-only arguments after the tensors, converted and checked there and by
# the library.
apply_rope = _posenc.apply_rope


def permute_qk_weights(w, heads: int, head_dim: int, rotary_dim: Optional[int] = None,
                       to: str = "half-split") -> np.ndarray:
    """Permutes the output rows of a Q or K projection between pair layouts.

    Meta's Llama checkpoints rotate interleaved pairs; Hugging Face permutes
    ``W_q`` and ``W_k`` so that half-split RoPE gives the same attention. With
    ``to="half-split"`` the rows of each head go from interleaved to half-split
    order (what Hugging Face's conversion script does); ``to="interleaved"``
    undoes it. Rows past ``rotary_dim`` in each head stay in place.

    Args:
        w: ``[heads * head_dim, ...]`` weight (or ``[heads * head_dim]`` bias),
            any dtype. Not modified.
        heads, head_dim: the layout of the rows.
        rotary_dim: rotated dimensions per head (default ``head_dim``).
        to: ``"half-split"`` or ``"interleaved"``.

    Returns:
        A new C-contiguous array.

    Example::

        >>> w = np.arange(8, dtype=np.float32)[:, None]      # 1 head of 8 rows
        >>> posenc.permute_qk_weights(w, heads=1, head_dim=8)[:, 0]
        array([0., 2., 4., 6., 1., 3., 5., 7.], dtype=float32)
    """
    out = np.array(w, order="C", copy=True)
    heads = _args.integer("permute", "heads", heads)
    head_dim = _args.integer("permute", "head_dim", head_dim)
    rotary = 0 if rotary_dim is None else _args.integer("permute", "rotary_dim", rotary_dim)
    if rotary_dim is not None and rotary <= 0:
        raise ValueError(f"[permute] rotary_dim = {rotary}: must be > 0 (None means head_dim)")
    _posenc.permute_qk_rows(out, heads, head_dim, rotary, str(to))
    return out

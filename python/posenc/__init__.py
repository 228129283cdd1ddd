"""posenc: positional encodings for transformers, on NumPy arrays and tensors.

The C++ library does the work (SIMD, multithreaded, GIL released); this
package gives it a NumPy interface. PyTorch tensors and any other
DLPack-capable CPU array are accepted wherever an array is, viewed without
a copy, and the results come back as the caller's kind (posenc/_tensors.py).

* :class:`RopeSpec` describes a model's rotary embedding (base, rotary
  dimension, pair layout, scaling method), built directly or read from a
  Hugging Face config with :meth:`RopeSpec.from_hf_config`.
* :func:`apply_rope` rotates q and k arrays ``[batch, seq, heads, head_dim]``
  (float32, float16, ``ml_dtypes.bfloat16``) by offsets or position ids.
* :func:`attention` computes attention with a positional encoding
  (:class:`RopeEncoding`, :class:`ReRopeEncoding`,
  :class:`SelfExtendEncoding`, :class:`AlibiEncoding`,
  :class:`T5BiasEncoding`, :class:`ShawEncoding`, :class:`UrpeEncoding`:
  the C++ structs of the same names) and masks (causal, sliding window,
  sinks).
* :class:`GgufFile` reads GGUF metadata and dequantizes its tensors;
  :func:`write_gguf` writes metadata and float32 tensors (checkpoints).
* :mod:`posenc.reference` has the plain float64 reference kernels (RoPE,
  attention, and the materialized attention of each relative form).
* :class:`DecoderModel` runs a Llama-family GGUF model (logits, next-token
  losses, greedy generation through a key/value cache) under a
  context-extension method; :func:`perplexity` evaluates it in windows.
* :func:`passkey_prompt` and :meth:`DecoderModel.score_passkey`: passkey
  retrieval (a key hidden in filler at a depth, asked for at the end).
* :func:`permute_qk_weights` converts Q/K projection rows between the
  interleaved and half-split pair layouts.

Two modules, imported explicitly because they need PyTorch (which
``import posenc`` never imports):

* :mod:`posenc.torch` (``import posenc.torch``): :func:`apply_rope`,
  :func:`attention` and the trainer's position schemes on torch tensors,
  with gradients.
* :mod:`posenc.hf` (``import posenc.hf``): a Hugging Face Llama, Mistral or
  Qwen2 model's attention run by posenc under any context-extension method
  (``posenc.hf.apply``), a GGUF loaded as the HF model
  (``posenc.hf.from_gguf``) and its losses by position
  (``posenc.hf.nll_by_position``).

Errors in arguments raise ValueError with a message that names the
operation, parameter, value and rule::

    [rope] rotary_dim = 63: must be even (dimensions rotate in pairs)

Example::

    >>> import numpy as np, posenc
    >>> spec = posenc.RopeSpec.from_hf_config({
    ...     "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 10000.0,
    ...     "max_position_embeddings": 4096})          # Llama-2-7B
    >>> spec
    RopeSpec(theta=10000.0, head_dim=128, layout='half-split')
    >>> q = np.zeros((1, 3, 32, 128), np.float32); q[..., 0] = 1
    >>> k = np.zeros((1, 3, 8, 128), np.float32)
    >>> q_rot, k_rot = posenc.apply_rope(spec, q, k, position_ids=[[5, 6, 7]])
    >>> np.round(q_rot[0, 0, 0, [0, 64]], 4)       # (cos 5, sin 5)
    array([ 0.2837, -0.9589], dtype=float32)
"""

from importlib import metadata as _metadata

from . import _args, _posenc
from . import reference
from .rope import RopeSpec, apply_rope, permute_qk_weights
from .tiny_llm import RoPE
from . import encodings
from .encodings import *  # noqa: F401,F403  sinusoidal, learned tables, ALiBi, T5, relative positions
from .attention import (AlibiEncoding, ReRopeEncoding, RopeEncoding, SelfExtendEncoding, ShawEncoding, T5BiasEncoding,
                        UrpeEncoding, attention)
from .attention import RENAMED as _ATTENTION_RENAMED
from .gguf import GgufFile, write_gguf
from . import tokenizer
from . import analysis
from .tokenizer import BpeTokenizer
from .model import DecoderModel, extension_attention, perplexity
from . import passkey
from .passkey import PasskeyPrompt, passkey_key, passkey_prompt
from . import _deprecated

__version__ = _metadata.version("posenc")  # from the VERSION file, via pyproject.toml

__all__ = [
    "RopeSpec",
    "apply_rope",
    "permute_qk_weights",
    "RoPE",
    "reference",
    "set_num_threads",
    "num_threads",
    "attention",
    "RopeEncoding",
    "ReRopeEncoding",
    "SelfExtendEncoding",
    "AlibiEncoding",
    "T5BiasEncoding",
    "ShawEncoding",
    "UrpeEncoding",
    "GgufFile",
    "write_gguf",
    "BpeTokenizer",
    "analysis",
    "DecoderModel",
    "perplexity",
    "extension_attention",
    "passkey_key",
    "passkey_prompt",
    "PasskeyPrompt",
] + encodings.__all__

# The names before the rename to the C++ ones (issue 50) and before
# DecoderModel, one release more: each warns and names its successor.
__getattr__ = _deprecated.renamed(__name__, {
    **{old: "posenc." + new.rpartition(".")[2] for old, new in _ATTENTION_RENAMED.items()},
    **encodings.RENAMED,
    "LlamaModel": "posenc.DecoderModel"})


def set_num_threads(n: int) -> None:
    """Sets how many threads posenc kernels use (1 = the calling thread only).
    Results are bitwise identical for every thread count.

    Raises:
        ValueError: ``[threads] n = ...`` for a count outside [1, 1024], or
            when the system refuses to start a worker thread (the next call
            to a kernel then starts the default pool).
    """
    _posenc.set_num_threads(_args.integer("threads", "n", n))


def num_threads() -> int:
    """The number of threads posenc kernels use (default: hardware threads)."""
    return _posenc.num_threads()

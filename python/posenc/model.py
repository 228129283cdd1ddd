"""A decoder model from a GGUF file; perplexity, greedy generation and
passkey retrieval under a context-extension method.

:class:`DecoderModel` runs a llama-, gemma3-, qwen2- or phi3-architecture
GGUF (SmolLM2, TinyLlama, Llama 2/3, Gemma 3, Qwen2.5, Phi-3, ...) in
float32 with the C++ engine: weights dequantized once at load, SIMD matmuls
and posenc's attention kernel, multithreaded, GIL released. Its RoPE is whatever the chosen
context-extension ``method`` makes of the model's own (Gemma 3: of its
global layers; the local ones keep their window and RoPE base), in the text
form of ``posenc/context_extension.h``,
``NAME[:key=value,...][,logn]``::

{methods}

Parameters not given default from the model's training length
(``hparams["context_length"]``) and the target length (the longest sequence
the method must serve; :meth:`DecoderModel.logits` uses the sequence's own
length unless told, :meth:`DecoderModel.generate` the prompt plus the tokens
to generate), e.g. ``"yarn"`` at twice the training length is YaRN with
factor 2.

:func:`perplexity` evaluates ``exp(mean NLL)`` over a token stream in
windows of ``context`` tokens, each one forward pass from position 0.
:meth:`DecoderModel.generate` continues a prompt greedily through a key/value
cache; :meth:`DecoderModel.score_passkey` runs one passkey-retrieval trial on
a prompt from :func:`posenc.passkey_prompt`.

Example::

    >>> import posenc
    >>> model = posenc.DecoderModel("SmolLM2-135M-Instruct.Q4_1.gguf")        # doctest: +SKIP
    >>> tok = posenc.BpeTokenizer.from_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")  # doctest: +SKIP
    >>> ids = tok.encode(open("/usr/share/common-licenses/GPL-3").read())   # doctest: +SKIP
    >>> posenc.perplexity(model, ids, context=512, max_windows=2)["ppl"]    # doctest: +SKIP
    21.0606...
    >>> posenc.perplexity(model, ids, context=16384, method="yarn")        # doctest: +SKIP

Errors are ValueError naming the parameter, e.g.
``[context-extension] factor = 0: must be > 0``.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

import numpy as np

from . import _args, _deprecated, _posenc
from . import _tensors

__all__ = ["DecoderModel", "perplexity", "extension_attention"]


def _method_list() -> str:
    """The methods of the module docstring, one a line, from the library's
    table (posenc::ExtensionMethodTable), so that a new method shows here."""
    lines = []
    for name, parameters, summary in _posenc.extension_method_table():
        form = name + ("[:" + ",".join(f"{p}={p[0].upper()}" for p in parameters) + "]" if parameters else "")
        lines.append((form, summary))
    width = max(len(form) for form, _ in lines) + 2
    text = [f"    {form:<{width}}{summary}" for form, summary in lines]
    text.append('    and ",logn" on any of them (":logn" when it is the only parameter): log-n query scaling')
    return "\n".join(text)


if __doc__ is not None:  # python -OO strips docstrings
    __doc__ = __doc__.replace("{methods}", _method_list())


def _tokens(tokens: Any, op: str = "model") -> np.ndarray:
    """Any integer array-like (list, tuple, NumPy array of any integer type,
    torch tensor) as a C-contiguous 1-D int32 array. Values outside int32 are
    rejected here (a cast would wrap them); ids outside the vocabulary are
    rejected by the model."""
    if hasattr(tokens, "detach") and hasattr(tokens, "numpy"):  # a torch tensor
        tokens = tokens.detach().cpu().numpy()
    try:
        array = np.asarray(tokens)
    except (TypeError, ValueError) as e:
        raise ValueError(f"[{op}] tokens = {type(tokens).__name__}: must be a sequence of integer token ids ({e})") from None
    if array.ndim != 1:
        raise ValueError(f"[{op}] tokens.ndim = {array.ndim}: must be 1 (a sequence of token ids)")
    if array.size == 0:
        raise ValueError(f"[{op}] tokens = []: must hold at least one token id")
    array = _args.int64_array(op, "tokens", tokens,
                              dtype_rule="must be an integer type (token ids)", low=0, high=_args.INT32_MAX,
                              rule="must be < 2^31 (a token id)", low_rule="must be >= 0 (a token id)")
    return np.ascontiguousarray(array, dtype=np.int32)


def _method(method: Any, op: str) -> str:
    if not isinstance(method, str):
        raise ValueError(f"[{op}] method = {method!r}: must be a string such as \"none\", \"yarn\" or \"ntk:logn\"")
    return method


def _optional_index(name: str, value: Any, op: str) -> Optional[int]:
    if value is None:
        return None
    return _index(name, value, op)


def _index(name: str, value: Any, op: str) -> int:
    return _args.integer(op, name, value, allow_bool=False)


class DecoderModel:
    """A decoder loaded from a GGUF file (float32 activations).

    Args:
        path: a llama-, gemma3-, qwen2- or phi3-architecture GGUF file (str
            or os.PathLike).
        weights: ``"stored"`` (default): the weights stay in the file's type
            (F32, F16, BF16, Q4_0..Q8_0, Q2_K..Q6_K) and the kernels read them
            as they are — a forward pass is bitwise the float32 model's,
            decoding differs by float32 rounding; ``"f32"``: every tensor
            posenc dequantizes becomes float32 once, here
            (the reference, 4 bytes a weight).
        activations: of the decode products (one to four tokens) with
            quantized weights: ``"f32"`` (default) as they are; ``"int8"``
            rounded in blocks of 32 (d = max|x| / 127) for integer dot
            products, as llama.cpp does: faster decoding, a small cost in
            perplexity (the README measures it); needs ``weights="stored"``.

    Attributes:
        path: the path as given (a str).
        hparams: dict of the hyperparameters read from the file:
            ``architecture``, ``vocab_size``, ``embedding_length`` (d),
            ``feed_forward_length``, ``block_count``, ``head_count``,
            ``head_count_kv``, ``head_dim``, ``rms_norm_eps``,
            ``context_length`` (the training length), ``rope`` (a
            :class:`posenc.RopeSpec`; interleaved layout for llama, as
            llama.cpp's converter permutes Q/K, half-split for gemma3, qwen2
            and phi3; of the global layers for gemma3; Llama 3's rope_freqs
            and Phi-3's LongRoPE factors as its scaling), ``tied_output`` (no output.weight:
            logits use the token embeddings), and Gemma 3's local layers:
            ``sliding_window`` (0: none), ``sliding_window_pattern`` (every
            such layer is global) and ``local_rope_theta``.

    Raises:
        ValueError: the file is missing, not a valid GGUF, not a model of those families,
            or lacks a tensor or key (the message names it); ``weights`` is
            neither "stored" nor "f32", ``activations`` neither "f32" nor
            "int8", or "int8" with "f32" weights; a tensor of a type
            without a kernel (every type above has one).

    Example::

        >>> m = posenc.DecoderModel("SmolLM2-135M-Instruct.Q4_1.gguf")    # doctest: +SKIP
        >>> m.hparams["context_length"], m.hparams["rope"].theta        # doctest: +SKIP
        (8192, 100000.0)
        >>> m.logits([1, 504, 3458]).shape                               # doctest: +SKIP
        (3, 49152)
    """

    __slots__ = ("path", "_model", "_hparams")

    def __init__(self, path: Union[str, os.PathLike], weights: str = "stored", activations: str = "f32") -> None:
        path = os.fspath(path)
        if not isinstance(path, str):
            path = os.fsdecode(path)
        if not isinstance(weights, str):
            raise TypeError(f"[llama] weights = {weights!r}: must be \"stored\" or \"f32\" (a str)")
        if not isinstance(activations, str):
            raise TypeError(f"[llama] activations = {activations!r}: must be \"f32\" or \"int8\" (a str)")
        self.path: str = path
        self._model = _posenc.DecoderModel(path, weights, activations)
        self._hparams: Dict[str, Any] = self._model.hparams()

    @property
    def hparams(self) -> Dict[str, Any]:
        """The hyperparameters (a copy: changing it changes nothing)."""
        return dict(self._hparams)

    @property
    def vocab_size(self) -> int:
        return self._hparams["vocab_size"]

    @property
    def context_length(self) -> int:
        """The training length (``{arch}.context_length``)."""
        return self._hparams["context_length"]

    def logits(self, tokens: Any, method: str = "none", target_length: Optional[int] = None) -> np.ndarray:
        """Logits of one forward pass over ``tokens`` at positions 0..n-1.

        Args:
            tokens: n token ids (any integer array-like), 0 <= id < vocab_size.
            method: context-extension method, text form (module docstring).
            target_length: the length the method is planned for (its default
                factor, window, ...); default ``len(tokens)``.

        Returns:
            float32 array ``[n, vocab_size]``.
        """
        ids = _tokens(tokens)
        return self._model.logits(ids, _method(method, "model"), _optional_index("target_length", target_length, "model"))

    def next_token_nll(self, tokens: Any, method: str = "none", target_length: Optional[int] = None) -> np.ndarray:
        """``-ln p(tokens[i+1] | tokens[:i+1])`` for i in 0..n-2, from one
        forward pass (float32 logits, log-softmax accumulated in float64).

        Args: as :meth:`logits`.

        Returns:
            float64 array ``[n - 1]`` (empty for one token).
        """
        ids = _tokens(tokens)
        return self._model.next_token_nll(ids, _method(method, "model"),
                                          _optional_index("target_length", target_length, "model"))

    def generate(self, tokens: Any, *, max_tokens: int, method: str = "none",
                 stop_tokens: Optional[Any] = None) -> Dict[str, Any]:
        """Greedy continuation of ``tokens``: the prompt prefilled in one
        pass, then each new token the argmax of the last logits (the lowest
        id among equal ones), run through the model alone against the
        key/value cache. The method is planned for ``len(tokens) +
        max_tokens`` tokens, so it runs as over the whole sequence.

        Args:
            tokens: the prompt's token ids (any integer array-like, at
                least one; add BOS yourself if the model wants one).
            max_tokens: tokens to generate at most, >= 1.
            method: context-extension method, text form (module docstring).
            stop_tokens: token ids after which generation stops (the stop
                token is returned too), e.g. ``[tokenizer.eos_id]``. None:
                generate ``max_tokens``.

        Returns:
            dict with ``tokens`` (the generated ids, a list), ``prompt_tokens``,
            ``prefill_tokens_per_s``, ``decode_tokens_per_s`` (single-token
            passes per second; 0 when only one token was generated),
            ``prefill_seconds``, ``decode_seconds`` and ``method`` (the text
            form with every default filled in).

        Raises:
            ValueError: e.g. ``[generate] max_tokens = 0: must be >= 1``.
        """
        ids = _tokens(tokens, "generate")
        count = _index("max_tokens", max_tokens, "generate")
        stops: list = []
        if stop_tokens is not None and np.size(stop_tokens) > 0:
            if np.ndim(stop_tokens) > 1:
                raise _args.error("generate", "stop_tokens.ndim", np.ndim(stop_tokens),
                                  "must be 0 or 1 (a token id or a sequence of them)")
            stops = _args.int64_array("generate", "stop_tokens", stop_tokens,
                                      dtype_rule="must be an integer type (token ids)", low=0,
                                      high=_args.INT32_MAX, rule="must be < 2^31 (a token id)",
                                      low_rule="must be >= 0 (a token id)").reshape(-1).tolist()
        return self._model.generate(ids, count, _method(method, "generate"), stops)

    def score_passkey(self, tokenizer: Any, prompt: Any, *, method: str = "none", max_new_tokens: int = 12,
                      target_length: Optional[int] = None) -> Dict[str, Any]:
        """One passkey-retrieval trial (``posenc/passkey.h``): the prompt
        prefilled once; the answer ``" " + key`` scored by teacher forcing;
        the cache rewound to the prompt and ``max_new_tokens`` generated
        greedily (stopping at the tokenizer's end-of-text token).

        Args:
            tokenizer: the model's :class:`posenc.BpeTokenizer` (decodes the
                generated tokens).
            prompt: a :class:`posenc.PasskeyPrompt` from
                :func:`posenc.passkey_prompt`.
            method: context-extension method, text form (module docstring).
            max_new_tokens: tokens generated, >= 1.
            target_length: the length the method is planned for; default the
                longest sequence the trial runs, ``len(prompt.prompt) +
                max(len(prompt.answer), max_new_tokens)`` (``posenc passkey``
                plans for its ``--lengths`` value instead: pass that to match).

        Returns:
            dict with ``generated_has_key`` (the key appears in the generated
            text: the YaRN paper's rule), ``answer_exact`` (every answer token
            is the argmax under teacher forcing), ``answer_nll`` (mean -ln p
            of the answer tokens), ``generated`` (the text; bytes that are not
            UTF-8 as U+FFFD), ``seconds``, ``prompt_tokens`` and ``method``
            (the text form with every default filled in).
        """
        from .tokenizer import BpeTokenizer  # noqa: PLC0415  (tokenizer imports nothing from here)
        if not isinstance(tokenizer, BpeTokenizer):
            raise ValueError(f"[passkey] tokenizer = {type(tokenizer).__name__}: must be a posenc.BpeTokenizer")
        if not isinstance(prompt, _posenc.PasskeyPrompt):
            raise ValueError(f"[passkey] prompt = {type(prompt).__name__}: must be a posenc.PasskeyPrompt "
                             "(from posenc.passkey_prompt)")
        return self._model.score_passkey(tokenizer._core, prompt, _method(method, "passkey"),
                                         _index("max_new_tokens", max_new_tokens, "passkey"),
                                         _optional_index("target_length", target_length, "passkey"))

    def resolve_method(self, method: str, target_length: int) -> str:
        """The text form of ``method`` with every default filled in for this
        model at ``target_length`` tokens, e.g. ``"yarn"`` -> ``"yarn:factor=2"``
        at twice the training length (what :meth:`logits` runs)."""
        return _posenc.plan_context_extension(_method(method, "model"), self._hparams["rope"],
                                              self._hparams["context_length"],
                                              _index("target_length", target_length, "model"))

    def forward_flops(self, n: int) -> float:
        """Floating-point operations of one forward pass over ``n`` tokens
        (a multiply-add counts 2): the linear layers and the logits, plus
        q.k and p.v over the causal triangle (a Gemma 3 local layer: the
        keys of its sliding window only)."""
        return float(self._model.forward_flops(_index("n", n, "model")))

    def __repr__(self) -> str:
        h = self._hparams
        return (f"DecoderModel({self.path!r}, vocab={h['vocab_size']}, d={h['embedding_length']}, "
                f"blocks={h['block_count']}, heads={h['head_count']}/{h['head_count_kv']}, "
                f"context_length={h['context_length']})")


def perplexity(model: DecoderModel, tokens: Any, context: int = 512, stride: Optional[int] = None,
               method: str = "none", max_windows: int = 0, bos: Optional[int] = None, decode: bool = False,
               keys_as_written: bool = False) -> Dict[str, Any]:
    """Perplexity of ``model`` over a token stream, in windows of ``context`` tokens.

    Windows start every ``stride`` tokens (default ``context``:
    non-overlapping); each is one forward pass from position 0 and scores the
    tokens no earlier window scored (all but its first for non-overlapping
    windows; the last ``stride`` of a sliding window). Only whole windows
    count. ``ppl = exp(mean over scored tokens of -ln p(token | window before it))``.

    Args:
        model: a :class:`DecoderModel`.
        tokens: the text's token ids (any integer array-like), at least
            ``context`` of them.
        context: window length in tokens, >= 2; the method's target length.
        stride: tokens between window starts, 1..context (None: context).
        method: context-extension method, text form (module docstring).
        max_windows: evaluate at most this many windows (0: all).
        bos: a token id put at position 0 of every window (the model's BOS
            when its tokenizer adds one, ``BpeTokenizer.add_bos``: Gemma);
            each window is then BOS and ``context - 1`` text tokens, all of
            them scored, and ``stride`` is at most ``context - 1``.
        decode: run each window token by token through the cache, as
            generation does (``posenc ppl --decode``), instead of one
            forward pass.
        keys_as_written: with ``decode``, plan the method again at every
            step for the tokens so far and keep each cached key as its step
            rotated it: Hugging Face's generation under a dynamic method
            (dynamic NTK's stale keys, transformers#25104).

    Returns:
        dict with ``ppl``, ``mean_nll`` (natural log), ``scored`` (tokens
        scored), ``processed`` (tokens run through the model), ``windows``,
        ``seconds``, ``tokens_per_s`` (processed / seconds), ``method``
        (the text form with every default filled in, e.g.
        ``"yarn:factor=2"`` for ``"yarn"`` at twice the training length) and
        ``position_nll`` (float64 [context - 1]: entry i the mean loss of
        window position i + 1 over the windows that scored it).
    """
    if not isinstance(model, DecoderModel):
        raise ValueError(f"[perplexity] model = {type(model).__name__}: must be a posenc.DecoderModel")
    ids = _tokens(tokens, "perplexity")
    stride_value = 0 if stride is None else _index("stride", stride, "perplexity")
    if stride is not None and stride_value < 1:
        raise ValueError(f"[perplexity] stride = {stride_value}: must be >= 1 (None: context)")
    bos_value = None if bos is None else _index("bos", bos, "perplexity")
    return _posenc.perplexity(model._model, ids, _index("context", context, "perplexity"), stride_value,
                              _method(method, "perplexity"), _index("max_windows", max_windows, "perplexity"),
                              bos_value, bool(decode), bool(keys_as_written))

def extension_attention(method: str, spec: Any, *, train_length: int, target_length: int) -> Dict[str, Any]:
    """What a context-extension method is as :func:`posenc.attention`'s
    keyword arguments, for a model with RoPE ``spec`` trained on
    ``train_length`` tokens and run up to ``target_length``: the same plan
    :class:`DecoderModel` runs (``posenc::PlanContextExtension``).

    Returns:
        dict with ``encoding`` (a :class:`posenc.RopeEncoding`,
        :class:`posenc.ReRopeEncoding` or :class:`posenc.SelfExtendEncoding`
        whose frequencies are those of ``target_length``), ``window``,
        ``sinks`` and ``logn_train_length``.

    Example::

        >>> kw = posenc.extension_attention("leaky-rerope", posenc.RopeSpec(head_dim=64),
        ...                                 train_length=2048, target_length=8192)
        >>> kw["encoding"].window, kw["encoding"].leak
        (1024, 7.0)
    """
    if not isinstance(spec, _posenc.RopeSpec):
        raise ValueError(f"[model] spec = {type(spec).__name__}: must be a posenc.RopeSpec")
    return _posenc.extension_attention(_method(method, "model"), spec, _index("train_length", train_length, "model"),
                                       _index("target_length", target_length, "model"))


# Tensors (PyTorch, any DLPack array) in, the caller's kind out (_tensors.py).
_tensors.wrap_functions(globals(), ["perplexity"])
_tensors.wrap_methods(DecoderModel, ["logits", "next_token_nll", "generate"])

# LlamaModel became DecoderModel (the engine reads features, not a family), one release more.
__getattr__ = _deprecated.renamed(__name__, {"LlamaModel": "posenc.model.DecoderModel"})

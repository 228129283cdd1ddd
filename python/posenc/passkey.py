"""Passkey retrieval: can the model still find a number hidden in a long text?

The test of the context-extension papers (landmark attention, Mohtashami &
Jaggi 2023, whose prompt the YaRN paper's ``eval/passkey.py`` reuses;
LongRoPE, Self-Extend, LM-Infinite), which perplexity alone does not
replace: a method that keeps only the local context can have a good
perplexity and still lose a fact outside its window. The prompt (lines
joined by ``"\\n"``)::

    There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you about the important information there.
    <filler prefix>
    The pass key is K. Remember it. K is the pass key.
    <filler suffix>
    What is the pass key? The pass key is

The filler is "The grass is green. The sky is blue. The sun is yellow. Here
we go. There and back again." repeated (joined by spaces) and cut to a number
of characters, ``int(n * depth)`` of them before the key line and the rest
after it; :func:`passkey_prompt` takes the most filler that fits a token
budget. The answer is ``" K"``. :meth:`posenc.DecoderModel.score_passkey` runs
one trial.

Example::

    >>> posenc.passkey_key(seed=0, trial=0)
    '27055'
    >>> tok = posenc.BpeTokenizer.from_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")       # doctest: +SKIP
    >>> model = posenc.DecoderModel("SmolLM2-135M-Instruct.Q4_1.gguf")                 # doctest: +SKIP
    >>> p = posenc.passkey_prompt(tok, 2048, 0.5, posenc.passkey_key(0, 0))          # doctest: +SKIP
    >>> model.score_passkey(tok, p, method="self-extend")["generated_has_key"]       # doctest: +SKIP
    True

Errors are ValueError naming the parameter, e.g.
``[passkey] depth = 1.5: must be in [0, 1] (the share of the filler before the key)``.
"""

from __future__ import annotations

from . import _args, _posenc
from ._posenc import PasskeyPrompt
from .tokenizer import BpeTokenizer

__all__ = ["PasskeyPrompt", "passkey_key", "passkey_prompt"]

_OP = "passkey"


def passkey_key(seed: int, trial: int) -> str:
    """The key of trial ``trial`` (>= 0) from ``seed`` (an unsigned 64-bit
    integer): five digits, 10000-99999, the same on every machine (a fixed
    integer hash, SplitMix64, not Python's or C++'s random distributions)."""
    return _posenc.passkey_key(
        _args.integer(_OP, "seed", seed, low=0, high=_args.UINT64_MAX, rule=_args.UINT64_RULE),
        _args.integer(_OP, "trial", trial))


def passkey_prompt(tokenizer: BpeTokenizer, length: int, depth: float, key: str, reserve: int = 12) -> PasskeyPrompt:
    """The longest passkey prompt whose tokens plus ``reserve`` fit in
    ``length`` tokens, with the key line after ``depth`` of the filler.

    Args:
        tokenizer: the model's :class:`posenc.BpeTokenizer`.
        length: the token budget.
        depth: the share of the filler before the key line, in [0, 1].
        key: five digits (:func:`passkey_key`).
        reserve: tokens kept free for the answer and the generated tokens
            (``posenc passkey`` reserves its ``--max-new-tokens``).

    Returns:
        a :class:`PasskeyPrompt` (key, prompt, answer, key_position, depth).

    Raises:
        ValueError: a depth outside [0, 1], a key that is not five digits, a
            length shorter than the prompt's fixed parts plus ``reserve``.
    """
    if not isinstance(tokenizer, BpeTokenizer):
        raise _args.error(_OP, "tokenizer", type(tokenizer).__name__, "must be a posenc.BpeTokenizer")
    depth = _args.number(_OP, "depth", depth)
    if not isinstance(key, str):
        raise _args.error(_OP, "key", repr(key), "must be a str of five digits")
    return _posenc.passkey_prompt(tokenizer._core, _args.integer(_OP, "length", length, allow_bool=False),
                                  depth, key, _args.integer(_OP, "reserve", reserve, allow_bool=False))

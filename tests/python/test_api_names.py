"""The Python API names the C++ one (issue 50): each attention encoding struct
of posenc/attention.h is the Python class of the same name, each float64
relative reference of the C++ ``posenc::reference`` namespace is a function
of posenc.reference, and the names before that rename (and posenc.LlamaModel)
are deprecated aliases for one release.

The C++ names are read from the headers, not listed here, so that a new C++
encoding or reference without its Python mirror fails.
"""

import importlib
import pathlib
import re
import warnings

import numpy as np
import pytest

import posenc
import posenc.torch

INCLUDE = pathlib.Path(__file__).resolve().parents[2] / "include" / "posenc"
# The module posenc.attention (the package attribute of that name is the function).
ATTENTION = importlib.import_module("posenc.attention")


def cpp_encodings():
    """The alternatives of posenc::PositionEncoding, in order."""
    text = (INCLUDE / "attention.h").read_text()
    match = re.search(r"using PositionEncoding = std::variant<([^>]*)>;", text)
    assert match, "posenc/attention.h: no `using PositionEncoding = std::variant<...>;`"
    return [name.strip() for name in match.group(1).split(",")]


def cpp_relative_references():
    """The posenc::reference functions returning a RelativeAttentionResult:
    {"T5": "relative_attention.h", ...} by the name before ``Attention``."""
    found = {}
    for header in sorted(INCLUDE.glob("*.h")):
        for name in re.findall(r"^RelativeAttentionResult (\w+)Attention\(", header.read_text(), flags=re.M):
            found[name] = header.name
    return found


def test_the_header_lists_are_read():
    assert "NoPositionEncoding" in cpp_encodings() and len(cpp_encodings()) >= 8
    assert {"Plain", "T5", "Shaw", "XLNet", "Deberta"} <= set(cpp_relative_references())


@pytest.mark.parametrize("name", [n for n in cpp_encodings() if n != "NoPositionEncoding"])
def test_each_cpp_encoding_is_the_python_class_of_its_name(name):
    cls = getattr(posenc, name, None)
    assert cls is not None, f"posenc.{name}: the C++ encoding posenc::{name} has no Python class"
    assert isinstance(cls, type) and issubclass(cls, posenc._posenc.AttentionEncoding)
    assert (cls.__name__, cls.__module__) == (name, "posenc.attention")
    assert name in posenc.__all__ and name in ATTENTION.__all__


def test_no_position_encoding_is_none():
    q = np.ones((1, 3, 2, 8), np.float32)
    assert posenc.attention(q, q, q, encoding=None, layout="bshd").shape == (1, 3, 2, 8)


def test_no_python_encoding_without_a_cpp_struct():
    exported = {name for name in ATTENTION.__all__
                if isinstance(getattr(posenc, name), type)
                and issubclass(getattr(posenc, name), posenc._posenc.AttentionEncoding)}
    assert exported == set(cpp_encodings()) - {"NoPositionEncoding"}


@pytest.mark.parametrize("cpp", sorted(cpp_relative_references()))
def test_each_cpp_relative_reference_is_in_posenc_reference(cpp):
    name = cpp.lower() + "_attention"  # reference::T5Attention -> posenc.reference.t5_attention
    assert name in posenc.reference.__all__, \
        f"posenc.reference.{name}: reference::{cpp}Attention ({cpp_relative_references()[cpp]}) has no mirror"
    assert callable(getattr(posenc.reference, name))


def test_references_live_in_posenc_reference_only():
    """No public ``*_reference`` function is left anywhere in the package."""
    for module in (posenc, posenc.encodings, posenc.reference, posenc.rope, posenc.model, posenc.torch):
        left = [n for n in dir(module) if n.endswith("_reference") and not n.startswith("_")]
        assert not left, f"{module.__name__}: {left}"


def test_star_import_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        exec("from posenc import *", {})


# ---- the deprecated aliases --------------------------------------------------

SPEC = posenc.RopeSpec(head_dim=8)
TABLE = np.linspace(-1, 1, 16).reshape(8, 2)

# (module, old name, new name as the warning gives it, the new object)
RENAMED = [
    *[(posenc, f"{n}Attention", f"posenc.{n}Encoding", getattr(posenc, f"{n}Encoding"))
      for n in ("Rope", "ReRope", "SelfExtend", "Alibi", "T5Bias", "Shaw")],
    *[(module, f"{n}Attention", f"posenc.attention.{n}Encoding", getattr(posenc, f"{n}Encoding"))
      for module in [ATTENTION] for n in ("Rope", "ReRope", "SelfExtend", "Alibi", "T5Bias", "Shaw")],
    *[(module, f"{form}_attention_reference", f"posenc.reference.{form}_attention",
       getattr(posenc.reference, f"{form}_attention"))
      for module in (posenc, posenc.encodings) for form in ("plain", "biased", "alibi", "t5", "shaw", "xlnet", "deberta")],
    (posenc, "AttentionResult", "posenc.reference.RelativeAttentionResult", posenc.reference.RelativeAttentionResult),
    (posenc.encodings, "AttentionResult", "posenc.reference.RelativeAttentionResult",
     posenc.reference.RelativeAttentionResult),
    (posenc, "LlamaModel", "posenc.DecoderModel", posenc.DecoderModel),
    (posenc.model, "LlamaModel", "posenc.model.DecoderModel", posenc.DecoderModel),
    (posenc.torch, "T5BiasAttention", "posenc.torch.T5BiasEncoding", posenc.torch.T5BiasEncoding),
    (posenc.torch, "ShawAttention", "posenc.torch.ShawEncoding", posenc.torch.ShawEncoding),
]


@pytest.mark.parametrize("module,old,new,obj", RENAMED, ids=[f"{m.__name__}.{o}" for m, o, _, _ in RENAMED])
def test_an_old_name_warns_and_is_the_new_object(module, old, new, obj):
    with pytest.warns(DeprecationWarning, match=rf"^{re.escape(module.__name__)}\.{old} is deprecated: use "
                                                rf"{re.escape(new)} "):
        assert getattr(module, old) is obj
    assert old not in getattr(module, "__all__", ())


def test_old_classes_and_references_still_compute():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 5, 2, 8)).astype(np.float32)
    with pytest.warns(DeprecationWarning):
        old = posenc.attention(q, q, q, encoding=posenc.ReRopeAttention(SPEC, window=2), layout="bshd")
    np.testing.assert_array_equal(old, posenc.attention(q, q, q, encoding=posenc.ReRopeEncoding(SPEC, window=2),
                                                        layout="bshd"))
    with pytest.warns(DeprecationWarning):
        r = posenc.t5_attention_reference(q, q, q, TABLE, layout="bshd")
    np.testing.assert_array_equal(r.output, posenc.reference.t5_attention(q, q, q, TABLE, layout="bshd").output)


def test_an_unknown_name_is_still_an_attribute_error():
    for module in (posenc, ATTENTION, posenc.encodings, posenc.model, posenc.torch):
        with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
            getattr(module, "NoSuchName")

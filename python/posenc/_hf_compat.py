"""transformers' ``generate`` on torch 1.13 under Python 3.11: one line of
torch, fixed as torch 2.0 fixed it, applied by ``import posenc.hf``.

The failure: transformers 4.49's ``generate`` asks
``is_fsdp_managed_module(model)``, which imports ``torch.distributed.fsdp``,
which imports ``torch/distributed/_shard/sharded_tensor/metadata.py``. That
file declares ``tensor_properties: TensorProperties =
field(default=TensorProperties())``; Python 3.11's dataclasses refuse any
default whose class is unhashable (3.10 refused only list, dict and set:
"What's New In Python 3.11", dataclasses), and ``TensorProperties``, an
``eq=True`` dataclass, is. So the import raises ``ValueError: mutable default
<class '...TensorProperties'> for field tensor_properties is not allowed: use
default_factory`` and ``generate`` never starts. torch 2.0 declares the field
``field(default_factory=TensorProperties)``.

The fix: a finder at the front of ``sys.meta_path`` loads that one module
from torch's own source with that one declaration changed to torch 2.0's, the
first time anything imports it; every other module is left to the usual
finders. It is installed only where the failure can happen (Python >= 3.11,
torch < 2.0 with torch.distributed, the module not imported yet), and it
changes nothing unless the source holds the declaration exactly once (any
other torch loads as it is).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from typing import Optional

import torch

MODULE = "torch.distributed._shard.sharded_tensor.metadata"
DECLARATION = "field(default=TensorProperties())"
FIXED = "field(default_factory=TensorProperties)"


class _FixedSource(importlib.abc.Loader):
    """Runs a module from source text given here instead of its file's."""

    def __init__(self, source: str, origin: str):
        self.source, self.origin = source, origin

    def create_module(self, spec):  # the default module object
        return None

    def exec_module(self, module) -> None:
        exec(compile(self.source, self.origin, "exec"), module.__dict__)


class TensorPropertiesFinder(importlib.abc.MetaPathFinder):
    """Finds :data:`MODULE` where torch keeps it and loads it with
    :data:`FIXED` in place of :data:`DECLARATION`."""

    def find_spec(self, name: str, path=None, target=None) -> Optional[importlib.machinery.ModuleSpec]:
        if name != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        source = spec.loader.get_data(spec.origin).decode("utf-8")
        if source.count(DECLARATION) != 1:
            return spec
        loader = _FixedSource(source.replace(DECLARATION, FIXED), spec.origin)
        return importlib.util.spec_from_file_location(name, spec.origin, loader=loader)


def needed() -> bool:
    """Whether this interpreter and torch can fail as the module docstring says."""
    major = int(torch.__version__.split(".")[0])
    return (sys.version_info >= (3, 11) and major < 2 and torch.distributed.is_available()
            and MODULE not in sys.modules)


def install() -> None:
    """Puts the finder first on ``sys.meta_path`` where :func:`needed` (once)."""
    if needed() and not any(isinstance(f, TensorPropertiesFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, TensorPropertiesFinder())

"""Old names kept for one release after a rename (issue 50: the Python API
takes the C++ names), each resolved by a module ``__getattr__`` that warns.

A module lists its old names as ``{old: "new.dotted.path"}`` and sets
``__getattr__ = renamed(__name__, {...})``: ``module.old`` then emits a
DeprecationWarning naming the new name and returns the new object, looked up
when asked (so the aliasing module need not import it, and a lazily imported
module such as posenc.torch stays lazy).
"""

import importlib
import warnings
from typing import Any, Callable, Dict

#: The release after which the old names go.
REMOVED_AFTER = "0.1"


def _resolve(path: str) -> Any:
    """The object at "package.module.name"."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def renamed(module: str, names: Dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving ``names`` (old -> new dotted path)."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new = names[name]
        warnings.warn(f"{module}.{name} is deprecated: use {new} (the old name goes after posenc {REMOVED_AFTER})",
                      DeprecationWarning, stacklevel=2)
        return _resolve(new)

    return __getattr__

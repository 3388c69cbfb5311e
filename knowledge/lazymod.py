"""A package's names imported on first use (PEP 562), declared as a table."""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, where: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """The module `__getattr__` of `package`: `name` comes from its submodule `where[name]`
    ("loader" or ".loader"), imported on first use and then kept in `namespace` (the package's
    globals()), so a command that never uses the name never pays for its module."""
    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module("." + module.lstrip("."), package), name)
        namespace[name] = value
        return value

    return __getattr__

"""The one TOML parser every data file goes through: tomllib on 3.11+, tomli on 3.10."""
from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib as _toml
else:  # pragma: no cover - exercised by the 3.10 run, not the default interpreter
    import tomli as _toml

TOMLDecodeError = _toml.TOMLDecodeError


def loads(text: str) -> dict[str, Any]:
    """The TOML document `text` as a dict; raises TOMLDecodeError (a ValueError) on bad TOML."""
    return _toml.loads(text)


def parser() -> ModuleType:
    """The parser module itself (tomllib or tomli), for callers that want its whole interface."""
    return _toml

"""Frozen dataclasses that cost nothing to define: `@frozen` in place of `@dataclass(frozen=True)`.

For each frozen class, dataclasses writes and compiles six methods (__init__, __repr__, __eq__,
__hash__, __setattr__, __delattr__): about 0.5 ms a class on this machine, paid by every start of
the command line for every class it imports (the knowledge model's ten were ~4.6 ms of each
`distdoctor logs`). A `@frozen` class is still a dataclass (dataclasses.fields, replace, asdict and
is_dataclass work, type checkers see a frozen dataclass), but dataclasses only records its fields;
the six methods are written once, here, and shared: the same arguments, defaults, default
factories, equality, hash, repr and FrozenInstanceError as `@dataclass(frozen=True)`.
"""
from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING or sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # pragma: no cover - Python 3.10: only type checkers read it
    def dataclass_transform(**_kwargs: Any) -> Any:
        return lambda f: f

T = TypeVar("T")
_MISSING = dataclasses.MISSING


class Frozen:
    """The methods of every @frozen class, read from its fields (`_names`, `_defaults`)."""

    __slots__ = ()
    _names: tuple[str, ...] = ()
    _defaults: dict[str, tuple[Any, Any]] = {}  # name -> (default, default_factory)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        names = cls._names
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}.__init__() takes {len(names) + 1} positional arguments "
                            f"but {len(args) + 1} were given")
        put = object.__setattr__
        for name, value in zip(names, args):
            put(self, name, value)
        if kwargs:
            for name, value in kwargs.items():
                if name not in cls._defaults:
                    raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument {name!r}")
                if name in names[:len(args)]:
                    raise TypeError(f"{cls.__name__}.__init__() got multiple values for argument {name!r}")
                put(self, name, value)
        if len(args) + len(kwargs) < len(names):
            missing = []
            for name in names[len(args):]:
                if name in kwargs:
                    continue
                default, factory = cls._defaults[name]
                if default is not _MISSING:
                    put(self, name, default)
                elif factory is not _MISSING:
                    put(self, name, factory())
                else:
                    missing.append(name)
            if missing:
                raise TypeError(f"{cls.__name__}.__init__() missing {len(missing)} required argument(s): "
                                + ", ".join(map(repr, missing)))

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._names)

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._names)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen(cls: type[T]) -> type[T]:
    """`@dataclass(frozen=True)` for a subclass of Frozen, with no method generated per class."""
    if not issubclass(cls, Frozen):
        raise TypeError(f"@frozen: {cls.__name__} must subclass Frozen")
    dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    cls._names = tuple(f.name for f in fields)
    cls._defaults = {f.name: (f.default, f.default_factory) for f in fields}
    return cls

"""The fields `fleet compare` compares (fields.toml, package data), validated when loaded."""
from __future__ import annotations

from dataclasses import dataclass, fields
from importlib import resources

from ...knowledge import tomlload

TYPES = ("string", "integer")


@dataclass(frozen=True)
class Field:
    """One compared field of a snapshot's summary."""

    id: str
    label: str
    type: str = "string"
    required: bool = False
    may_differ: bool = False
    cause: str = ""


def parse(text: str, where: str = "fields.toml") -> tuple[Field, ...]:
    """The fields of a fields.toml text; a ValueError naming the entry for anything malformed."""
    known = {f.name: f.type for f in fields(Field)}
    out: list[Field] = []
    for n, entry in enumerate(tomlload.loads(text).get("field", [])):
        name = f"{where}: field {entry.get('id', n)!s}"
        unknown = set(entry) - set(known)
        if unknown:
            raise ValueError(f"{name}: unknown key(s) {', '.join(sorted(unknown))}")
        for key in ("id", "label"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise ValueError(f"{name}: {key} must be a non-empty string")
        for key, want in (("required", bool), ("may_differ", bool), ("cause", str), ("type", str)):
            if key in entry and not isinstance(entry[key], want):
                raise ValueError(f"{name}: {key} must be a {want.__name__}")
        if entry.get("type", "string") not in TYPES:
            raise ValueError(f"{name}: type must be one of {', '.join(TYPES)}")
        if any(f.id == entry["id"] for f in out):
            raise ValueError(f"{name}: id appears twice")
        out.append(Field(**entry))
    if not out:
        raise ValueError(f"{where}: no [[field]] entries")
    return tuple(out)


def _load() -> tuple[Field, ...]:
    text = resources.files(__package__).joinpath("fields.toml").read_text(encoding="utf-8")
    return parse(text)


FIELDS: tuple[Field, ...] = _load()
BY_ID: dict[str, Field] = {f.id: f for f in FIELDS}


def cause_of(field_id: str) -> str | None:
    """The cause a disagreement in the field points at; None for none (switches, GPU models)."""
    field = BY_ID.get(field_id)
    return (field.cause or None) if field else None

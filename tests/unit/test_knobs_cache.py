"""probes/knobs.py keeps knobs.toml's parsed knobs in the start-up cache: a cached load gives what
parsing gives, without parsing; a file of another shape is a miss and is parsed again."""
from __future__ import annotations

import json

import pytest

from distdoctor.knowledge import cache
from distdoctor.probes import knobs


def test_a_cached_load_equals_a_parse_and_does_not_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = knobs.parse_knobs(knobs.Path(knobs.__file__).with_name("knobs.toml").read_text(encoding="utf-8"))
    assert knobs._load_knobs() == parsed == knobs.KNOBS  # the first load may parse and store
    monkeypatch.setattr(knobs, "parse_knobs", lambda *a, **k: pytest.fail("parsed despite the cache"))
    assert knobs._load_knobs() == parsed


@pytest.mark.parametrize("value", [[{"no_such_field": 1}], {"knob": []}, "text"])
def test_a_file_of_another_shape_is_parsed_again(value: object) -> None:
    fresh = knobs._load_knobs()
    doc = json.loads(cache.path_for("knobs").read_text())
    cache.store("knobs", doc["key"], value)
    assert knobs._load_knobs() == fresh
    assert json.loads(cache.path_for("knobs").read_text())["value"] != value  # stored whole again

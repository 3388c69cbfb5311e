"""The start-up cache (knowledge/cache.py): the validated knowledge base and the log prefilter's
plan are reused only for the same files, code and options; anything broken is rebuilt."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from types import MappingProxyType

import pytest

from distdoctor.knowledge import cache, kbcache, load_knowledge
from distdoctor.knowledge.logs import compiled, plancache

OVERLAY_SIG = """
[[signature]]
id = "site-disk-full"
pattern = 'No space left on device: /scratch'
cause = "other"
weight = 2.0
tags = ["failure"]
"""


def _files(name: str) -> list[Path]:
    return sorted(cache.path_for(name).parent.glob(f"{name}*.json"))


def test_a_second_load_is_the_cached_one_and_equal_to_a_fresh_load(monkeypatch: pytest.MonkeyPatch) -> None:
    first = load_knowledge(tree=False)
    assert _files("knowledge-en-p"), "the first load writes the cache"
    cached = load_knowledge(tree=False)
    monkeypatch.setenv(cache.OFF_ENV, "1")
    fresh = load_knowledge(tree=False)
    assert cached == first == fresh
    assert type(cached.signatures).__name__ == "mappingproxy"
    assert isinstance(next(iter(cached.causes.values())).fixes, tuple)


def test_a_cached_load_does_not_parse_or_validate(monkeypatch: pytest.MonkeyPatch) -> None:
    load_knowledge(tree=False)
    from distdoctor.knowledge import loader

    def boom(*_a, **_k):
        raise AssertionError("parsed again")

    monkeypatch.setattr(loader, "_load", boom)
    assert load_knowledge(tree=False).signatures


FOREIGN = [
    b"", b"{", b"\x00\xff" * 100, b'{"key": 1}', b'"just a string"',
    b'{"key": "KEY", "value": {"c": "KnowledgeBase", "f": [["version", "1"]]}}',
    b'{"key": "KEY", "value": {"c": "KnowledgeBase", "f": {"version": "1"}}}',
    b'{"key": "KEY", "value": {"c": "os.system", "f": []}}',
    b'{"key": "KEY", "value": {"key": "KEY", "value": 1}}',
    b'{"key": "KEY", "value": ' + b'[' * 100_000 + b']' * 100_000 + b'}',
]


def test_a_corrupt_partial_or_foreign_file_is_ignored_and_rebuilt() -> None:
    """(patterns=False: the same cache path, without compiling every pattern on each miss)"""
    good = load_knowledge(tree=False, patterns=False)
    (path,) = _files("knowledge-en-")
    data = path.read_bytes()
    key = json.loads(data)["key"]
    for content in [*FOREIGN, data[:1], data[:len(data) // 3], data[:-1]]:
        path.write_bytes(content.replace(b"KEY", key.encode()))
        assert load_knowledge(tree=False, patterns=False) == good, content[:80]
        assert path.read_bytes() == data  # rewritten whole


def test_an_overlay_change_invalidates_both_caches(tmp_path: Path) -> None:
    overlay = tmp_path / "site"
    overlay.mkdir()
    (overlay / "sigs.toml").write_text(OVERLAY_SIG)
    kb = load_knowledge(overlay, tree=False)
    assert "site-disk-full" in kb.signatures
    old_rows = compiled.kb_key(kb)[0]
    assert plancache.load(old_rows) is not None
    (overlay / "sigs.toml").write_text(OVERLAY_SIG.replace("site-disk-full", "site-disk-gone")
                                       .replace("/scratch", "/data"))
    again = load_knowledge(overlay, tree=False)
    assert "site-disk-gone" in again.signatures and "site-disk-full" not in again.signatures
    # the plan follows the signatures: built for the new rows, not read for the old ones
    rows = compiled.kb_key(again)[0]
    assert plancache.key(rows) != plancache.key(old_rows)
    assert plancache.load(rows) is not None and plancache.load(old_rows) is None
    assert any(r[0] == "site-disk-gone" for r in rows)
    # no overlay: the packaged base again, not the overlay's
    assert "site-disk-gone" not in load_knowledge(tree=False).signatures


def test_a_new_file_in_the_overlay_is_a_miss(tmp_path: Path) -> None:
    overlay = tmp_path / "site"
    overlay.mkdir()
    base = load_knowledge(overlay, tree=False)
    (overlay / "more.toml").write_text(OVERLAY_SIG)
    assert "site-disk-full" not in base.signatures
    assert "site-disk-full" in load_knowledge(overlay, tree=False).signatures


def test_an_overlay_error_is_still_raised_with_a_cache(tmp_path: Path) -> None:
    from distdoctor.knowledge import KnowledgeError

    load_knowledge(tree=False)
    overlay = tmp_path / "bad"
    overlay.mkdir()
    (overlay / "x.toml").write_text("[[signature]]\nid = 'x'\npattern = '('\ncause = 'other'\nweight = 1.0\n")
    for _ in range(2):  # a failed load is never cached
        with pytest.raises(KnowledgeError):
            load_knowledge(overlay, tree=False)
    with pytest.raises(KnowledgeError):
        load_knowledge(tmp_path / "missing", tree=False)


def test_the_plan_cache_gives_the_plan_it_would_build(monkeypatch: pytest.MonkeyPatch) -> None:
    kb = load_knowledge(tree=False)
    rows = compiled.kb_key(kb)[0]
    built = compiled._plan.__wrapped__(rows, None)  # builds and stores
    loaded = plancache.load(rows)
    assert loaded is not None
    plan, needles, unanchored = loaded
    assert plan == built
    assert set(needles) == {r[1] for r in rows}
    assert unanchored == compiled._trigger_items()[1]
    # the needles it holds are the parsed ones
    for r in rows:
        alts = compiled.literal_alternatives(r[1])
        want = tuple(sorted({max(runs, key=len) for runs in alts}, key=len, reverse=True)) if alts else ()
        assert needles[r[1]] == want, r[0]


@pytest.mark.parametrize("doc", [
    {"literals": "abc", "roots": [], "rare": [], "searched": [], "needles": {}, "unanchored": []},
    {"literals": [], "roots": [["ab", ["abc"]]], "rare": [], "searched": [], "needles": {}, "unanchored": []},
    {"literals": [], "roots": [], "rare": [], "searched": [], "needles": {"x": [1]}, "unanchored": []},
    {"literals": []},
    [1, 2],
])
def test_a_plan_file_of_another_shape_is_a_miss(doc: object) -> None:
    kb = load_knowledge(tree=False)
    rows = compiled.kb_key(kb)[0]
    cache.store(plancache.NAME, plancache.key(rows), doc)
    assert plancache.load(rows) is None


def test_concurrent_writers_leave_a_whole_file() -> None:
    """Eight threads storing different values at once: the file is always one of them, whole,
    and no temporary file is left behind."""
    values = [{"n": i, "pad": "x" * 200_000} for i in range(8)]
    errors: list[BaseException] = []

    def write(v: dict) -> None:
        try:
            for _ in range(5):
                cache.store("race", "k", v)
                got = cache.load("race", "k")
                assert got in values
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(v,)) for v in values]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.load("race", "k") in values
    assert [p.name for p in cache.path_for("race").parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_read_only_state_folder_costs_nothing_but_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "ro"
    state.mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    os.chmod(state, 0o500)
    try:
        if os.access(state, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        assert load_knowledge(tree=False).signatures
        cache.store("x", "k", {"a": 1})
        assert cache.load("x", "k") is None
    finally:
        os.chmod(state, 0o700)


def test_the_cache_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.OFF_ENV, "1")
    load_knowledge(tree=False)
    assert not cache.path_for("x").parent.exists()


def test_the_key_changes_with_any_byte_and_with_the_options(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "a.toml").write_text("x = 1\n")
    k1 = kbcache.key([folder], ("a",))
    assert kbcache.key([folder], ("a",)) == k1
    assert kbcache.key([folder], ("b",)) != k1
    (folder / "a.toml").write_text("x = 2\n")
    assert kbcache.key([folder], ("a",)) != k1


def test_encode_refuses_what_it_cannot_rebuild() -> None:
    import datetime

    with pytest.raises(TypeError):
        kbcache.encode(datetime.date(2026, 1, 1))
    for text in ('{"c": "Popen", "f": []}', '{"x": 1}', '{"d": {"a": 1}}', '{"p": [[1, 2]]}', '{"t": 1}'):
        with pytest.raises(ValueError):
            kbcache.decode(text)
    value = (1, [2, {"t": 3}], MappingProxyType({"a": (4,)}))
    assert kbcache.decode(json.dumps(kbcache.encode(value))) == value

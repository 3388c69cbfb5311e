"""A step is its tree.toml entry plus, when it has one, its screen module (tui/app/steps.py): the
app's step list, the palette's entries and the next-action text come from those two and from
nothing listed by hand. Every step screen is checked here the same way (as sos tests each
plugin), and a step that only a site overlay adds shows up everywhere with no code."""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import appkit
from appkit import run_async

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.loader import DATA_DIR
from distdoctor.tui.app import screens
from distdoctor.tui.app.app import make_app, method_order
from distdoctor.tui.app.nextaction import next_action, next_hint
from distdoctor.tui.app.screens.base import GenericStepScreen, StepScreen
from distdoctor.tui.app.steps import screen_class
from distdoctor.tui.app.widgets import step_label
from distdoctor.tui.record.session import SessionStore
from distdoctor.tui.record.state import Flow


def _step_modules() -> dict[str, type]:
    """Every module under tui/app/screens that names a step screen, by module name."""
    out = {}
    for info in pkgutil.iter_modules(screens.__path__):
        module = importlib.import_module(f"{screens.__name__}.{info.name}")
        if hasattr(module, "SCREEN"):
            out[info.name] = module.SCREEN
    return out


def test_every_step_screen_is_a_tree_step_and_declares_what_it_offers() -> None:
    kb = load_knowledge(use_env=False)
    modules = _step_modules()
    assert set(modules) == {s.replace("-", "_") for s in kb.steps}  # no screen without its step
    for step_id in kb.steps:
        cls = screen_class(step_id)
        assert issubclass(cls, StepScreen) and cls is not GenericStepScreen, step_id
        assert step_label(step_id, "a long title of the step") == step_id.replace("-", " ").capitalize()
        for action, name, help_ in cls.PALETTE:  # each palette entry runs one of the screen's actions
            assert callable(getattr(cls, f"action_{action}", None)), (step_id, action)
            assert name and help_
        # every step says something to do, from an empty session on
        assert next_action(kb, Flow(session_id="s"), step_id, method_order(kb))


def test_a_step_without_a_screen_module_is_the_generic_screen() -> None:
    assert screen_class("site-check") is GenericStepScreen
    assert step_label("site-check", "Check the site's storage") == "Check the …"  # its title, cut
    assert screen_class("base") is GenericStepScreen  # a module without SCREEN is not a step's
    assert screen_class("no.such/step") is GenericStepScreen


def _overlay_with_a_step(tmp_path: Path) -> Path:
    """A site overlay that places one step, with no screen, just before Repro: the step that led
    to Repro is redefined (an overlay replaces whole entries) to lead to it instead."""
    import json

    from distdoctor.knowledge.tomlload import loads

    overlay = tmp_path / "overlay"
    overlay.mkdir()
    before = next(s for s in loads((DATA_DIR / "tree.toml").read_text(encoding="utf-8"))["step"]
                  if s.get("next") == ["repro"])
    before["next"] = ["site-check"]
    terms = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in before.pop("terms", {}).items())
    fields = "\n".join(f"{k} = {json.dumps(v)}" for k, v in before.items())  # JSON's strings are TOML's
    (overlay / "tree.toml").write_text(
        f"[[step]]\n{fields}\nterms = {{ {terms} }}\n\n"
        '[[step]]\nid = "site-check"\ntitle = "Check the site"\nkind = "step"\nnext = ["repro"]\n'
        'why = "This site\'s storage and network rules."\n', encoding="utf-8")
    return overlay


@run_async
async def test_a_step_added_in_data_is_listed_offered_and_explained(tmp_path: Path) -> None:
    kb = load_knowledge(_overlay_with_a_step(tmp_path), use_env=False)
    home = tmp_path / "home"
    home.mkdir()
    app = make_app(kb, appkit.recorded_ctx(appkit.HANG_ENV, home), SessionStore(tmp_path / "s"),
                   session_id="t1", probes=appkit.recorded_probes())
    packaged = method_order(load_knowledge(use_env=False))
    n = packaged.index("repro") + 1  # the new step's number: Repro's until now
    assert app.order == packaged[:n - 1] + ["site-check"] + packaged[n - 1:]
    names = [name for name, _, _ in app.palette_commands()]
    assert f"Go to step {n}: Check the site" in names
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press(str(n))
        assert isinstance(app.screen, GenericStepScreen) and app.current_step == "site-check"
        assert "Check the site" in appkit.screen_text(app)  # the step list shows it
        text = app.next_action_text("site-check")
        assert text == f"This site's storage and network rules. {next_hint(kb, 'site-check')}"
        assert "Minimal repro" in text
        await pilot.press("n")
        assert app.current_step == "repro"

"""The Textual app in Simplified Chinese (issue 15): every main screen speaks it, the command
palette switches both ways without a restart, the app starts in the language of --lang,
$DISTDOCTOR_LANG or the locale, and widths go by display cells."""
from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import appkit
import pytest
from appkit import settle
from snapkit import open_step

from distdoctor.knowledge import i18n

LOGS = appkit.FIXTURES / "app"
CATALOGUE = Path(i18n.DATA_DIR) / "zh" / "messages" / "app.toml"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(autouse=True)
def _no_leftover_language(monkeypatch: pytest.MonkeyPatch):
    """A palette switch sets the process's language (as --lang does): never past a test."""
    i18n.set_lang(None)
    yield
    i18n.set_lang(None)


@pytest.fixture
def zh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTDOCTOR_LANG", "zh")


def english_phrases() -> list[str]:
    """The app's own English phrases that have a different Chinese text: none may be left on a
    Chinese screen. Fixed phrases of several words only (a single word such as 'python' or a
    template's fragment could be part of a log line or a command, which are never translated)."""
    table = i18n._tomllib().loads(CATALOGUE.read_text(encoding="utf-8"))["messages"]
    return [k for k, v in table.items()
            if k != v and " " in k.strip() and "{" not in k and "`" not in k and len(k) >= 8
            and not CJK.search(k)]


def leftovers(text: str) -> list[str]:
    return [p for p in english_phrases() if p.strip() in text]




def seen(app: Any) -> str:
    """What the screen holds (all of it, scrolled away too) and what the terminal shows."""
    return appkit.screen_text(app) + "\n".join(appkit.terminal_lines(app))


@appkit.run_async
async def test_every_main_screen_speaks_chinese(tmp_path: Path, zh: None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(LOGS)
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="zh")
    assert app.lang == "zh"
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = seen(app)
        number = {step: app.order.index(step) + 1 for step in app.order}
        for phrase in ("你看到了什么？", "1 归类", f"{number['repro']} 最小复现", f"{number['bisect']} 二分排查",
                       "嫌疑根因，最可能的在前",
                       "粘贴一行", "下一步", "讲解", "帮助", "退出", "命令面板", "或在这里粘贴一行报错"):
            assert phrase in text, phrase
        assert "What do you see?" not in text and not leftovers(text), leftovers(text)

        await pilot.press("enter")  # 挂起
        await pilot.pause()
        await pilot.press("enter")  # 在进程组初始化时挂起
        await pilot.pause()
        text = seen(app)
        assert "挂起：具体在哪里？" in text and "“在进程组初始化时挂起”的嫌疑根因" in text
        assert "首要嫌疑：" in text and not leftovers(text), leftovers(text)

        await pilot.press("n", "f")
        app.focused.value = "logs-hang"
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("escape")
        text = seen(app)
        for phrase in ("启动器：torchrun（已设置 TORCHELASTIC_RUN_ID）", "读取了 2 个文件：10 个候选根因，证据不足以指出是哪一个",
                       "诊断（在根因上回车：看它的日志行）", "依据", "行数", "证据", "先验",
                       "NCCL 或 Gloo 选错了网卡", "复制这几行", "加载日志", "当前堆栈"):
            assert phrase in text, phrase
        # code stays code: the env lines to copy, the launcher's command
        assert "export NCCL_DEBUG=INFO" in text and "torchrun --nproc-per-node=... train.py" in text
        assert not leftovers(text), leftovers(text)

        await open_step(pilot, "environment")
        await settle(pilot)
        text = seen(app)
        for phrase in ("检查结论（方向键：是什么 / 为什么 / 修复）", "状态", "探针", "失败", "警告",
                       "是什么：", "为什么：", "修复：", "重新探测", "多节点", "显示正常项"):
            assert phrase in text, phrase
        assert "FAIL" not in text and "WARN" not in text and not leftovers(text), leftovers(text)

        for key, phrases in (("repro", ("将要运行什么，为什么", "后端", "超时", "运行记录",
                                    "r 运行最小复现（x 停止）")),
                             ("bisect", ("将要运行什么，为什么", "r 运行二分排查（x 停止）"))):
            await open_step(pilot, key)
            await settle(pilot)
            text = seen(app)
            for phrase in phrases:
                assert phrase in text, phrase
            # the plan's own lines come from probes/repro (not the app's texts): left out here
            plan = str(app.screen.query_one("#plan").content)
            assert not leftovers(text.replace(plan, "")), leftovers(text)

        await open_step(pilot, "conclusion")
        await settle(pilot)
        text = seen(app)
        for phrase in ("根因，按全部证据排序", "事后要去掉", "导出报告（.md、.html 或 .json）",
                       "复制修复", "证据不足以指出根因"):
            assert phrase in text, phrase
        columns = [str(c.label) for c in app.screen.query_one("#ranking").columns.values()]
        assert columns == ["#", "依据", "根因", "最有力的证据"]
        assert not leftovers(text), leftovers(text)

        await pilot.press("question_mark")
        await pilot.pause()
        text = seen(app)
        assert "帮助：按键" in text and "所有界面" in text and "转到那一步" in text
        assert not leftovers(text), leftovers(text)


@appkit.run_async
async def test_palette_switches_the_language_both_ways(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="sw")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("enter")  # Hang: an answer the switch must keep
        await pilot.pause()
        assert "Hang: where exactly?" in seen(app)

        async def switch() -> None:
            await pilot.press("ctrl+p")
            await pilot.pause()
            await pilot.press(*"Language")
            await pilot.pause()
            await pilot.press("enter")
            await settle(pilot)

        await switch()
        text = seen(app)
        assert app.lang == "zh" and i18n.resolve() == "zh"
        assert "你看到了什么？" in text and "挂起：具体在哪里？" in text  # same answer, new language
        assert "n 下一步" in text and f"1/{len(app.order)} 归类现象" in text
        assert "What do you see?" not in text and not leftovers(text)
        assert app.kb.steps["classify"].title == "归类现象"  # the knowledge base's texts too

        await pilot.press("n")  # a step not opened before the switch is built in Chinese
        await pilot.pause()
        assert "把这几行加进任务" in seen(app)
        await pilot.press("p")
        await pilot.pause()

        await switch()
        text = seen(app)
        assert app.lang == "en"
        assert "What do you see?" in text and "Hang: where exactly?" in text and "n Next step" in text
        assert not CJK.search("\n".join(appkit.terminal_lines(app)))
        await pilot.press("n")
        await pilot.pause()
        assert "Add these lines to the job" in seen(app)


@appkit.run_async
async def test_palette_lists_the_language_command_in_both_languages(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="pl")
    async with app.run_test(size=(80, 24)):
        names = {name: help_ for name, help_, _ in app.palette_commands()}
        assert names["Language: English / 中文"] == "Switch to 中文"
        i18n.set_lang("zh")
        app.lang = "zh"
        names = {name: help_ for name, help_, _ in app.palette_commands()}
        assert names["语言 Language：English / 中文"] == "切换到 English"
        assert "下一步" in names and "运行最小复现" in names


@appkit.run_async
async def test_no_switch_while_a_job_runs(tmp_path: Path) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="busy")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.cancel_events.add(threading.Event())  # a repro or bisection is running
        app.action_language("zh")
        await pilot.pause()
        assert app.lang == "en" and i18n.resolve() == "en"
        assert any("switch the language when it has finished" in str(n.message)
                   for n in app._notifications)


@pytest.mark.parametrize("env, lang", [
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ({"DISTDOCTOR_LANG": "zh", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LANG": "en_US.UTF-8"}, "en"),
])
def test_app_starts_in_the_language_of_the_environment(tmp_path: Path, monkeypatch, env, lang) -> None:
    for name in ("DISTDOCTOR_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    app = appkit.build(tmp_path, appkit.HANG_ENV)
    assert app.lang == lang
    assert (app.kb.steps["classify"].title == "归类现象") == (lang == "zh")
    descriptions = {b.action: b.description for bs in app._bindings.key_to_bindings.values() for b in bs}
    assert descriptions["next_step"] == ("下一步" if lang == "zh" else "Next step")


def test_lang_flag_wins_over_the_locale(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DISTDOCTOR_LANG", raising=False)
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    i18n.set_lang("zh")  # what `distdoctor --lang zh` does before the app is built
    assert appkit.build(tmp_path, appkit.HANG_ENV).lang == "zh"


def test_every_app_text_has_a_translation_with_its_placeholders() -> None:
    table = i18n.messages("zh")
    own = i18n._tomllib().loads(CATALOGUE.read_text(encoding="utf-8"))["messages"]
    assert len(own) > 300
    for english, chinese in own.items():
        assert sorted(re.findall(r"\{[^{}]*\}", english)) == sorted(re.findall(r"\{[^{}]*\}", chinese)), english
    # the key bar's and the help's texts, whatever the screen
    from distdoctor.tui.app.app import DistDoctorApp
    from distdoctor.tui.app.screens import conclusion, environment, logs, repro

    for cls in (DistDoctorApp, logs.LogsScreen, environment.EnvironmentScreen, repro.RunScreen,
                conclusion.ConclusionScreen):
        for binding in cls.BINDINGS:
            if binding.description and binding.show:
                assert binding.description in table, binding.description


def test_labels_are_cut_by_display_width() -> None:
    from distdoctor.tui.app.screens.logs import MAX_NAME, short_names
    from distdoctor.tui.app.widgets import LABEL_WIDTH, step_label

    label = step_label("site-check", "检查站点的网络与存储配置")  # a site overlay's step
    assert i18n.cells(label) <= LABEL_WIDTH and label.endswith("…")
    assert step_label("site-check", "Check the site") == "Check the …"  # English as before
    names = short_names(["/r/运行记录一/log.txt", "/r/运行记录二号很长的文件夹名称/log.txt"])
    assert all(i18n.cells(n) <= MAX_NAME for n in names.values()), names


def test_chinese_key_bar_fits_two_lines_at_80_columns(tmp_path: Path, zh: None) -> None:
    """The key bar has two lines at most (its max-height): at 80 columns the Logs step's keys,
    the longest list, must fit them in Chinese as in English."""
    import asyncio

    async def run() -> list[str]:
        app = appkit.build(tmp_path, appkit.HANG_ENV)
        async with app.run_test(size=(80, 24)) as pilot:
            await open_step(pilot, "logs")
            await pilot.pause()
            return appkit.terminal_lines(app)

    lines = asyncio.run(run())
    assert "命令面板" in lines[-1] and "复制这几行" in lines[-2]
    assert all(i18n.cells(line) <= 80 for line in lines)


def test_wide_text_breaks_between_characters_and_english_as_before() -> None:
    import rich._wrap

    from distdoctor.tui.app import lang

    new, old = re.compile(rf"\s*{lang._WORD}\s*"), re.compile(r"\s*\S+\s*")
    for english in ("Copy the logging lines (c) into the job, rerun it, then press f…",
                    "  export NCCL_DEBUG=INFO \\\n  torchrun --nproc-per-node=... train.py",
                    "“quoted” ▶ steps · tab: where ✓ → completes"):
        assert new.findall(english) == old.findall(english)
    lang.wrap_between_wide_characters()
    text = "如果任务仍在挂起，按 s：查看每个 rank 当前的堆栈，以及与众不同的那个。然后加载它的日志（f）。"
    cuts = rich._wrap.divide_line(text, 20)
    lines = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
    assert all(i18n.cells(line.rstrip()) <= 20 for line in lines)
    assert i18n.cells(lines[0].rstrip()) >= 18  # the first line is full, not cut at its one space
    assert not any(line[0] in "，。：）”" for line in lines[1:])
    code = "先设置环境变量NCCL_DEBUG=INFO再重跑"  # a command is never cut in the middle
    cuts = rich._wrap.divide_line(code, 20)
    assert any("NCCL_DEBUG=INFO" in code[a:b] for a, b in zip([0, *cuts], [*cuts, len(code)]))


def test_every_text_the_app_passes_to_t_has_a_chinese_translation() -> None:
    """Each t("...") of tui/app, and each key's description there, is in the catalogue: a new
    English text without its Chinese would show up in English on a Chinese screen."""
    import ast

    app_dir = Path(__file__).resolve().parents[2] / "tui" / "app"
    table = i18n.messages("zh")
    missing = []
    for path in sorted(app_dir.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = getattr(node.func, "id", None)
            text = node.args[0] if name == "t" else (node.args[2] if name == "Binding" and len(node.args) > 2 else None)
            if isinstance(text, ast.Constant) and isinstance(text.value, str) and text.value.strip() \
                    and text.value not in table:
                missing.append(f"{path.relative_to(app_dir)}:{node.lineno}: {text.value!r}")
    assert not missing, "\n".join(missing)


@appkit.run_async
async def test_drill_speaks_chinese(tmp_path: Path, zh: None) -> None:
    from textual.widgets import OptionList

    from distdoctor.knowledge import load_knowledge
    from distdoctor.tui.app.screens.drill import DrillApp
    from distdoctor.tui.record.session import SessionStore

    crash = appkit.FIXTURES / "recorded" / "01-drill-crash"
    app = DrillApp("crash", load_knowledge(use_env=False), SessionStore(tmp_path / "s"), from_dir=crash)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = seen(app)
        assert "你被叫起来了" in text and "挂起：" in text and "报错：" in text and "退出" in text
        await pilot.press("down", "enter")  # 报错
        await pilot.pause()
        assert "打开你需要的证据" in seen(app) and "作答：说出根因和 rank" in seen(app)

        async def choose(key: str) -> None:
            menu = app.screen.query_one("#drill-choices", OptionList)
            ids = [menu.get_option_at_index(i).id for i in range(menu.option_count)]
            menu.focus()
            menu.highlighted = ids.index(key)
            await pilot.press("enter")
            await pilot.pause()

        await choose("answer")
        await choose("rank-crash-deadlock")
        assert "该怪哪个 rank？" in seen(app)
        await choose("1")
        text = seen(app)
        assert "通过" in text and "得分 100/100" in text and "根因：你说的是 rank-crash-deadlock" in text
        assert not leftovers(text.replace(app.drill_screen.drill.how, "")), leftovers(text)


@appkit.run_async
async def test_chinese_palette_and_textual_own_commands(tmp_path: Path, zh: None) -> None:
    app = appkit.build(tmp_path, appkit.HANG_ENV, session_id="pal")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"zhuti")  # nothing matches: only the placeholder is left
        await pilot.press(*["backspace"] * 5)
        await pilot.pause()
        text = "\n".join(appkit.terminal_lines(app))
        assert "搜索命令…" in text
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"主题", "退出", "截图"} <= titles and "Quit" not in titles

"""Chinese as a first-class language (issue 15): the choice of language, the knowledge base's
Chinese texts (complete, validated, code untouched), display width, and the text output of
`logs`, `knowledge show|list` and the report in Chinese."""
from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

import pytest

from distdoctor.knowledge import KnowledgeError, i18n, load_knowledge
from distdoctor.tui.cli import main

HERE = Path(__file__).resolve().parents[1]
CRASH_LOGS = HERE / "fixtures" / "recorded" / "incident-crash" / "logs"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(autouse=True)
def _no_language(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from English: no --lang left over, no language in the environment."""
    for name in (i18n.ENV, *i18n.LOCALE_VARS):
        monkeypatch.delenv(name, raising=False)
    i18n.set_lang(None)
    yield
    i18n.set_lang(None)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- choosing the language -----------------------------------------------------------------------

@pytest.mark.parametrize("environ, want", [
    ({}, "en"),
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "zh_TW.UTF-8"}, "zh"),
    ({"LANG": "en_US.UTF-8"}, "en"),
    ({"LANG": "fr_FR.UTF-8"}, "en"),  # a language distdoctor does not have: English
    ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LC_ALL": "C", "LC_MESSAGES": "zh_CN.UTF-8"}, "en"),  # POSIX: LC_ALL wins even as C
    ({"LC_ALL": "zh_SG.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LC_ALL": "", "LANG": "zh_CN.UTF-8"}, "zh"),  # an empty variable is unset
    ({"DISTDOCTOR_LANG": "en", "LC_ALL": "zh_CN.UTF-8"}, "en"),
    ({"DISTDOCTOR_LANG": "zh", "LANG": "en_US.UTF-8"}, "zh"),
])
def test_resolution_order_from_the_environment(environ: dict[str, str], want: str) -> None:
    assert i18n.resolve(environ=environ) == want


def test_explicit_choice_and_lang_flag_come_first() -> None:
    env = {"DISTDOCTOR_LANG": "en", "LC_ALL": "en_US.UTF-8"}
    assert i18n.resolve("zh", environ=env) == "zh"
    i18n.set_lang("zh")  # what `distdoctor --lang zh` does
    assert i18n.resolve(environ=env) == "zh"
    assert i18n.resolve("en", environ=env) == "en"  # an explicit argument still wins
    i18n.set_lang(None)
    assert i18n.resolve(environ=env) == "en"


def test_lang_flag_reaches_the_command_and_does_not_leak(capsys, monkeypatch) -> None:
    code, out, _ = cli(capsys, "--lang", "zh", "knowledge", "show", "p2p-unsupported")
    assert code == 0 and "GPU 之间没有可用的点对点（P2P）通路" in out
    # the next command in the same process, without --lang, is English again
    code, out, _ = cli(capsys, "knowledge", "show", "p2p-unsupported")
    assert code == 0 and not CJK.search(out)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    code, out, _ = cli(capsys, "knowledge", "show", "p2p-unsupported")
    assert CJK.search(out)
    code, out, _ = cli(capsys, "--lang", "en", "knowledge", "show", "p2p-unsupported")
    assert not CJK.search(out)


@pytest.mark.parametrize("args", [
    ("logs", str(CRASH_LOGS), "--lang", "zh"),
    ("knowledge", "show", "hang", "--lang", "zh"),
    ("knowledge", "list", "symptoms", "--lang", "zh"),
    ("--lang", "en", "logs", str(CRASH_LOGS), "--lang", "zh"),  # the command's own wins
])
def test_lang_after_the_command_too(capsys, args) -> None:
    code, out, _ = cli(capsys, *args)
    assert code in (0, 1) and CJK.search(out)


def test_lang_before_the_command_is_kept_by_it(capsys) -> None:
    """A command's --lang defaults to nothing, so it never resets the one given before it."""
    code, out, _ = cli(capsys, "--lang", "zh", "logs", str(CRASH_LOGS), "--top", "1")
    assert CJK.search(out)


def test_bad_lang_is_one_line_and_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--lang", "fr", "knowledge", "list", "causes"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--lang" in err


# --- the knowledge base in Chinese ---------------------------------------------------------------

def test_every_required_text_is_translated() -> None:
    """Causes, symptoms, checks, switches and the tree's steps (learn prose and terms included):
    the list of English texts without Chinese must be empty."""
    assert i18n.untranslated() == []


def test_untranslated_names_what_is_missing(tmp_path: Path) -> None:
    base = tmp_path / "data"
    (base / "zh").mkdir(parents=True)
    (base / "causes.toml").write_text(
        '[[cause]]\nid = "a"\ntitle = "T"\nwhat = "W"\nwhy = "Y"\nfix = "F"\nsection = "1"\n'
        'fixes = [{ kind = "env", text = "export X=1", note = "n" }]\n', encoding="utf-8")
    (base / "zh" / "causes.toml").write_text('[[cause]]\nid = "a"\ntitle = "标题"\n', encoding="utf-8")
    assert i18n.untranslated(base) == [
        "cause.a.what: no translation", "cause.a.why: no translation", "cause.a.fix: no translation",
        "cause.a.fix_notes: no translation of the note of 'export X=1'"]


def test_chinese_knowledge_changes_text_never_code() -> None:
    en, zh = load_knowledge(lang="en"), load_knowledge(lang="zh")
    assert set(en.causes) == set(zh.causes) and set(en.checks) == set(zh.checks)
    for cid, cause in en.causes.items():
        other = zh.causes[cid]
        assert CJK.search(other.title) and CJK.search(other.what) and CJK.search(other.fix)
        assert other.section == cause.section
        assert [(f.kind, f.text) for f in other.fixes] == [(f.kind, f.text) for f in cause.fixes]
        assert [bool(f.note) for f in other.fixes] == [bool(f.note) for f in cause.fixes]
    for chk_id, chk in en.checks.items():
        other = zh.checks[chk_id]
        assert (other.fix, other.op, other.value, other.cause_ids) == (chk.fix, chk.op, chk.value, chk.cause_ids)
        for name in ("title", "detail", "ok_title"):  # the same facts fill both templates
            assert sorted(re.findall(r"\{[^{}]*\}", getattr(other, name))) == \
                sorted(re.findall(r"\{[^{}]*\}", getattr(chk, name)))
    for sw_id, sw in en.switches.items():
        assert (zh.switches[sw_id].env, zh.switches[sw_id].value) == (sw.env, sw.value)
        assert CJK.search(zh.switches[sw_id].why)
    for step_id, step in en.steps.items():
        assert CJK.search(zh.steps[step_id].learn) and set(zh.steps[step_id].terms) == set(step.terms)
    # the guide's own words
    text = " ".join(c.title + c.what + c.fix for c in zh.causes.values())
    text += " ".join(s.title + s.learn for s in zh.steps.values())
    for word in ("集合通信", "死锁", "二分排查", "最小复现"):
        assert word in text, word


def _overlay(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("text, reason", [
    ('[[cause]]\nid = "no-such-cause"\ntitle = "标题"\n', "no cause with id 'no-such-cause'"),
    ('[[cause]]\nid = "cuda-oom"\nsection = "9"\n', "not a text field: section"),
    ('[[cause]]\nid = "cuda-oom"\nfix_notes = ["只有一条"]\n', "must be a table of strings"),
    ('[[cause]]\nid = "cuda-oom"\ntitle = 3\n', "must be a string"),
    ('[[widget]]\nid = "x"\n', "unknown table"),
])
def test_broken_translation_is_a_one_line_error(tmp_path: Path, text: str, reason: str) -> None:
    overlay = _overlay(tmp_path, {"zh/bad.toml": text})
    with pytest.raises(KnowledgeError) as exc:
        load_knowledge(overlay, lang="zh")
    assert reason in str(exc.value) and "bad.toml" in exc.value.file
    load_knowledge(overlay, lang="en")  # English never reads the zh/ folder


def test_stale_translation_keeps_the_english_and_is_reported(tmp_path: Path) -> None:
    """The English changed after it was translated (other placeholders, a fix or term gone):
    distdoctor still starts in Chinese with the English text there, and validate names it."""
    overlay = _overlay(tmp_path, {"zh/stale.toml": (
        '[[check]]\nid = "shm-too-small"\ntitle = "/dev/shm 只有 {size}"\ndetail = "本站：至少 {threshold:size}"\n'
        '[[step]]\nid = "logs"\nterms = { "bogus" = "x", "SeqNum" = "流水号" }\n'
        '[[cause]]\nid = "cuda-oom"\n[cause.fix_notes]\n"no such fix" = "x"\n'
        '"export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" = "本站：减少碎片"\n')})
    packaged, kb = load_knowledge(lang="zh"), load_knowledge(overlay, lang="zh")
    # the stale title is not used: the text before it (here the packaged Chinese) stays
    assert kb.checks["shm-too-small"].title == packaged.checks["shm-too-small"].title
    assert "{size}" not in kb.checks["shm-too-small"].title
    assert kb.checks["shm-too-small"].detail == "本站：至少 {threshold:size}"  # an overlay's zh wins
    assert "bogus" not in kb.steps["logs"].terms and kb.steps["logs"].terms["SeqNum"] == "流水号"
    assert kb.causes["cuda-oom"].fixes[0].note == "本站：减少碎片"
    # the overlay defines no English of its own here: its zh/ folder is checked by loading;
    # the same stale shapes in a folder's own zh/ are named by untranslated()
    base = _overlay(tmp_path / "b", {
        "c.toml": '[[check]]\nid = "x"\nprobe = "p"\nfact = "f"\nop = "true"\nvalue = true\n'
                  'status = "warn"\ntitle = "{a} is low"\ndetail = "d"\ncause_ids = []\n',
        "zh/c.toml": '[[check]]\nid = "x"\ntitle = "{b} 太低"\ndetail = "详情"\n'})
    assert i18n.untranslated(base) == [
        "check.x.title: placeholders differ (English ['{a}'], here ['{b}']) (stale)"]


def test_site_overlay_adds_either_language(tmp_path: Path) -> None:
    overlay = _overlay(tmp_path, {
        "site.toml": '[[cause]]\nid = "cuda-oom"\ntitle = "Site OOM"\nwhat = "w"\nwhy = "y"\n'
                     'fix = "f"\nsection = "4.2"\nfixes = []\n',
        "zh/site.toml": '[[cause]]\nid = "cuda-oom"\ntitle = "本站的显存不足"\n',
    })
    assert load_knowledge(overlay, lang="en").causes["cuda-oom"].title == "Site OOM"
    zh = load_knowledge(overlay, lang="zh")
    assert zh.causes["cuda-oom"].title == "本站的显存不足"
    assert zh.causes["cuda-oom"].what == "w"  # untranslated in the overlay: its own English
    # the packaged Chinese never replaces an overlay's own English text of the same id
    only_en = _overlay(tmp_path / "b", {"site.toml": (tmp_path / "site.toml").read_text()})
    assert load_knowledge(only_en, lang="zh").causes["cuda-oom"].title == "Site OOM"


# --- --json is the same in both languages, but for human-readable text -----------------------------

TEXT_KEYS = {"title", "what", "why", "fix", "evidence", "note", "question", "detail", "ok_title",
             "permanent_fix", "learn", "description", "summary", "reasons", "against",
             "collect"}  # the lines to collect next carry a comment in words


def _is_text(value) -> bool:
    return isinstance(value, str) or isinstance(value, list) and all(isinstance(v, str) for v in value)


def _same_but_text(en, zh, path: str = "") -> list[str]:
    """Differences outside human-readable text fields (dict keys always compared)."""
    if isinstance(en, dict) and isinstance(zh, dict):
        if set(en) != set(zh):
            return [f"{path}: keys {sorted(set(en) ^ set(zh))}"]
        out = []
        for k in en:
            # a report's steps name each step by its title (text), not by its id
            # the diagnosis's next action says what to do in words; its command stays the same
            if k in TEXT_KEYS and _is_text(en[k]) or path.endswith(".terms") or (k == "step" and path.startswith(".steps[")) \
                    or (k == "text" and path.endswith(".next_action")):
                continue
            out += _same_but_text(en[k], zh[k], f"{path}.{k}")
        return out
    if isinstance(en, list) and isinstance(zh, list):
        if len(en) != len(zh):
            return [f"{path}: length"]
        return [d for i, (a, b) in enumerate(zip(en, zh)) for d in _same_but_text(a, b, f"{path}[{i}]")]
    return [] if en == zh else [f"{path}: {en!r} != {zh!r}"]


@pytest.mark.parametrize("args", [
    ("knowledge", "show", "master-addr-port", "--json"),
    ("knowledge", "show", "logs", "--json"),
    ("knowledge", "show", "shm-too-small", "--json"),
    ("knowledge", "list", "causes", "--json"),
    ("logs", str(CRASH_LOGS), "--json"),
])
def test_json_identical_across_languages_but_for_text(capsys, args) -> None:
    _, en_out, _ = cli(capsys, "--lang", "en", *args)
    _, zh_out, _ = cli(capsys, "--lang", "zh", *args)
    en, zh = json.loads(en_out), json.loads(zh_out)
    assert _same_but_text(en, zh) == []
    if args[1] == "show":
        assert en != zh  # the text did change: this is not comparing English with English


# --- display width ---------------------------------------------------------------------------------

def _cells(text: str) -> int:
    """Independent of i18n.cells: unicodedata's east-asian width, W and F count two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def test_display_width_helpers() -> None:
    assert i18n.cells("rank 0") == 6 and i18n.cells("集合通信") == 8 == _cells("集合通信")
    assert i18n.cells("（，）") == 6
    assert i18n.clip("abcdef", 6) == "abcdef" and i18n.clip("abcdefg", 6) == "abc..."
    clipped = i18n.clip("一个进程崩溃了其余进程挂起", 11)
    assert clipped == "一个进程..." and _cells(clipped) <= 11
    assert i18n.pad("崩溃", 6) == "崩溃  " and i18n.pad("crashed", 4) == "crashed"
    # English goes through textwrap, unchanged
    text = "Turn silent deadlocks into errors with a stack: keep async error handling on"
    import textwrap
    assert i18n.wrap(text, 30, "  ", "    ") == textwrap.wrap(
        text, 30, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False,
        break_long_words=False)


def test_chinese_wraps_by_cells_and_keeps_commands_whole() -> None:
    text = "把无声的死锁变成带堆栈的报错：export TORCH_NCCL_ASYNC_ERROR_HANDLING=3，然后重新运行任务。"
    lines = i18n.wrap(text, 24, "  ", "    ")
    assert all(_cells(ln) <= 24 for ln in lines if "TORCH_NCCL" not in ln)
    assert any(ln.strip() == "export" or "TORCH_NCCL_ASYNC_ERROR_HANDLING=3" in ln for ln in lines)
    assert "".join(ln.strip() for ln in lines).replace(" ", "") == text.replace(" ", "")
    assert not any(ln.lstrip()[0] in "，。：）" for ln in lines)  # no line starts with punctuation
    assert lines[0].startswith("  把") and all(ln.startswith("    ") for ln in lines[1:])


def test_cjk_table_is_aligned_by_display_width() -> None:
    """The per-rank table of `logs` in Chinese: the end column and the place column start at
    the same display column on every row, though the words have different lengths."""
    from distdoctor.tui.commands import logs_text

    timeline = {
        "0": {"end": {"kind": "lost-peer", "type": "RuntimeError"}, "last_collective": {"seq": 7, "op": "ALLREDUCE"},
              "step": {"kind": "step", "n": 4}},
        "1": {"end": {"kind": "crashed", "type": "RuntimeError"}, "step": {"kind": "step", "n": 4}},
        "12": {"end": {"kind": "timeout"}, "last_collective": {"seq": 6, "op": "BROADCAST"}},
        "3": {"end": {"kind": "finished"}, "step": {"kind": "iteration", "n": 9}},
    }
    i18n.set_lang("zh")
    rows = logs_text._timeline(timeline, {}, 80)[2:]
    assert len(rows) == 4 and "失去对端" in rows[0] and "崩溃" in rows[1]
    ends = ("失去对端", "崩溃", "超时", "已完成")
    end_col = {_cells(row[:row.index(word)]) for row, word in zip(rows, ends)}
    assert end_col == {12}, rows
    after = {_cells(row[:row.index(word) + len(word)]) + len(row[row.index(word) + len(word):]) -
             len(row[row.index(word) + len(word):].lstrip()) for row, word in zip(rows, ends)}
    assert after == {24}, rows  # 11 cells for the end word and one space, whatever the word


# --- the text output in Chinese ---------------------------------------------------------------------

def test_knowledge_show_and_list_in_chinese(capsys) -> None:
    code, out, _ = cli(capsys, "--lang", "zh", "knowledge", "show", "rank-crash-deadlock")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "rank-crash-deadlock  (根因)  一个 rank 已退出，其余 rank 在集合通信中无限等待"
    for heading in ("指南第 1 节", "是什么", "为什么会发生", "证据", "修复"):
        assert heading in lines
    assert "  export TORCH_NCCL_ASYNC_ERROR_HANDLING=3" in lines  # code is never translated
    assert "  # 崩溃兜底：绝不让进程半死不活地留着" in lines
    # prose wrapped to 76 display cells plus the indent (CJK characters count two)
    prose = [ln for ln in lines if CJK.search(ln) and not ln.startswith("  #")]
    assert prose and max(_cells(ln) for ln in prose) <= 78
    code, out, _ = cli(capsys, "--lang", "zh", "knowledge", "show", "bisect")
    assert "二分排查开关，一次只改一项" in out and "讲解" in out and "NCCL_IB_DISABLE: 关闭" in out
    code, out, _ = cli(capsys, "--lang", "zh", "knowledge", "show", "nccl-socket-ifname")
    assert "  NCCL_SOCKET_IFNAME=<interface>   （后端 nccl，二分排查顺序 4）" in out
    code, out, _ = cli(capsys, "--lang", "zh", "knowledge", "list", "causes")
    assert code == 0 and f"{'shm-insufficient':32} /dev/shm 太小" in out.splitlines()


def test_logs_text_in_chinese_on_the_recorded_crash(capsys) -> None:
    code_en, en, _ = cli(capsys, "logs", str(CRASH_LOGS))
    code, out, _ = cli(capsys, "--lang", "zh", "logs", str(CRASH_LOGS))
    assert code == code_en == 1  # a problem found, in either language
    lines = out.splitlines()
    assert lines[0] == "读取了 5 个文件，共 6.6 KiB。"
    assert "元凶：rank 1（崩溃）" in lines
    assert any(ln.startswith("最可能的根因（依据：证据 = 显示故障的日志行") for ln in lines)
    assert " 1. rank-crash-deadlock  [证据]  一个 rank 已退出，其余 rank 在集合通信中无限等待" in lines
    assert any(ln.startswith("最先出现的故障：rank 1, ") and ln.endswith("1/stderr.log:6") for ln in lines)
    table = lines[lines.index("各 rank（各自日志的结束方式；最后一次集合通信来自 watchdog）：") + 1:][:2]
    assert table[0].startswith("  rank 0    失去对端    allreduce") and table[1].startswith("  rank 1    崩溃        ")
    assert "下一步操作：" in lines
    # the fix itself is code: the same line in both languages
    fix = '    dist.init_process_group(backend="nccl", timeout=datetime.timedelta(minutes=10))'
    assert fix in lines and fix in en.splitlines()
    # the English output has no Chinese and the evidence lines (a path and a line number, not the
    # verdict's prose, which names them too) are the same in both
    assert not CJK.search(en)
    evidence = [ln for ln in en.splitlines() if ("stderr.log:" in ln or "console.log:" in ln)
                and re.match(r"\s*(?:First failure: )?(?:rank \d+, )?[\w./-]+:\d+", ln)]
    assert evidence and all(ln in lines or ln.replace("First failure: ", "最先出现的故障：") in lines
                            for ln in evidence)


def test_logs_text_in_chinese_fits_the_width(capsys, monkeypatch) -> None:
    """At 60 columns every wrapped line of Chinese prose fits in 60 display cells (file paths
    and commands are never cut, as in English)."""
    monkeypatch.setenv("COLUMNS", "60")
    _, out, _ = cli(capsys, "--lang", "zh", "logs", str(CRASH_LOGS))
    # headings are one line in both languages (English ones pass 60 columns too)
    prose = [ln for ln in out.splitlines() if CJK.search(ln) and ".log" not in ln
             and not ln.startswith(("最可能", "各 rank"))]
    assert len(prose) > 5
    too_wide = [ln for ln in prose if _cells(ln) > 60]
    assert too_wide == []


# --- the report ------------------------------------------------------------------------------------

def _session_with_crash(capsys) -> None:
    assert main(["logs", str(CRASH_LOGS), "--session", "web"]) == 1
    capsys.readouterr()


def test_report_lang_chooses_and_english_stays_english(capsys, tmp_path: Path) -> None:
    _session_with_crash(capsys)
    code, en, _ = cli(capsys, "report", "web")
    assert code == 0 and not CJK.search(en) and "## Verdict" in en
    code, zh, _ = cli(capsys, "report", "web", "--lang", "zh")
    assert code == 0
    for heading in ("## 结论摘要", "## 症状", "## 结论", "## 修复方法", "## 事后要去掉的开关",
                    "## 已执行的步骤", "## 日志证据", "## 会话"):
        assert heading in zh.splitlines(), heading
    assert "**元凶：rank 1（崩溃）**" in zh
    assert "一个 rank 已退出，其余 rank 在集合通信中无限等待" in zh
    # the fix is the same code block in both
    block = '```python\ndist.init_process_group(backend="nccl", timeout=datetime.timedelta(minutes=10))\n```'
    assert block in en and block in zh
    # the locale chooses when --lang is not given; report --lang overrides it either way
    code, by_flag, _ = cli(capsys, "--lang", "zh", "report", "web")
    assert _without_generated(by_flag) == _without_generated(zh)
    code, back, _ = cli(capsys, "--lang", "zh", "report", "web", "--lang", "en")
    assert not CJK.search(back)
    html = tmp_path / "r.html"
    assert main(["report", "web", "--lang", "zh", "-o", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert '<html lang="zh-Hans">' in page and "<h2>结论摘要</h2>" in page and "<h2>日志证据</h2>" in page


def _without_generated(text: str) -> str:
    """The report without its generated-at time, which differs between two runs (only that cell:
    a step recorded in the same second shows the same time string)."""
    return re.sub(r"\| (report generated|报告生成时间) \| [^|]* \|", r"| \1 |  |", text)


def test_report_json_identical_across_languages_but_for_text(capsys) -> None:
    _session_with_crash(capsys)
    _, en, _ = cli(capsys, "report", "web", "--format", "json")
    _, zh, _ = cli(capsys, "report", "web", "--format", "json", "--lang", "zh")
    en_data, zh_data = json.loads(en), json.loads(zh)
    for data in (en_data, zh_data):
        data.pop("generated", None)
    assert _same_but_text(en_data, zh_data) == []
    assert en_data != zh_data


# --- every fixed phrase of the translated outputs is in the catalogue -------------------------------

TRANSLATED_MODULES = ("tui/commands/logs_text.py", "tui/commands/check_text.py", "tui/commands/knowledge.py",
                      "tui/record/report_md.py",
                      "tui/record/report_html.py")
# words that reach the catalogue through a variable: roles, ends of a rank's lines, bases, kinds
DYNAMIC = ["crashed", "stuck", "slow", "missing", "misconfigured", "killed", "lost peer", "timed out",
           "exited", "finished", "no end seen", "evidence", "facts", "prior", "step", "iteration",
           "as concluded in the session", "ranked from all the evidence gathered",
           "Minimal repro", "Bisection", "Fleet comparison", "Stacks (where each rank was)",
           "Flight Recorder", "What it is", "Why it happens", "Evidence", "Fix", "What it checks",
           "Finding", "Causes", "Why it matters", "Permanent fix", "Implicates", "raises",
           "FAIL", "WARN", "ERROR", "UNAVAILABLE", "OK", "fail", "warn", "error", "unavailable", "ok",
           *(f"knowledge kind: {k}" for k in ("cause", "check", "switch", "symptom", "step",
                                              "signature", "harmless"))]


def _phrases() -> list[str]:
    import ast

    found = []
    for rel in TRANSLATED_MODULES:
        tree = ast.parse((HERE.parent / rel).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                if node.func.id in ("_", "tr"):
                    found.append(node.args[0].value)
                elif node.func.id == "col":
                    found.append("report column: " + node.args[0].value)
    return found


def test_every_phrase_in_the_code_has_chinese() -> None:
    phrases = _phrases()
    assert len(phrases) > 60  # the scan does find the calls
    zh = i18n.messages("zh")
    missing = sorted({p for p in phrases + DYNAMIC if p not in zh} - {"report column: distdoctor"})
    assert missing == []
    # and every translation keeps its placeholders
    for english, chinese in zh.items():
        assert sorted(re.findall(r"\{\w*\}", english)) == sorted(re.findall(r"\{\w*\}", chinese)), english


def test_validate_checks_both_languages(capsys, tmp_path: Path) -> None:
    assert cli(capsys, "knowledge", "validate")[0] == 0
    # an English-only overlay stays valid; once it has a zh/ folder its texts must be complete
    site = _overlay(tmp_path, {"site.toml": '[[cause]]\nid = "site-cause"\ntitle = "Site"\nwhat = "w"\n'
                                            'why = "y"\nfix = "f"\nsection = "9"\nfixes = []\n'})
    assert cli(capsys, "knowledge", "validate", str(site))[0] == 0
    (site / "zh").mkdir()
    (site / "zh" / "site.toml").write_text('[[cause]]\nid = "site-cause"\ntitle = "本站根因"\n', encoding="utf-8")
    code, out, _ = cli(capsys, "knowledge", "validate", str(site))
    assert code == 1 and out.startswith(f"knowledge: invalid: {site / 'zh'}: cause.site-cause.what: no translation (3 text(s)")
    code, out, _ = cli(capsys, "knowledge", "validate", str(site), "--json")
    data = json.loads(out)
    assert code == 1 and data["valid"] is False and len(data["untranslated"]) == 3
    # a broken Chinese file is found by validate in an English shell too
    (site / "zh" / "site.toml").write_text('[[cause]]\nid = "nope"\ntitle = "x"\n', encoding="utf-8")
    code, out, _ = cli(capsys, "knowledge", "validate", str(site))
    assert code == 1 and "no cause with id 'nope' to translate" in out


def test_check_text_in_chinese_aligned_and_wrapped(monkeypatch) -> None:
    """`check` in Chinese: status words of different display widths in one aligned column,
    the finding's Chinese detail wrapped within the width (it has no spaces to break at)."""
    import contextlib
    import io

    from distdoctor.tui.commands import check_text

    data = {"host": "node1", "duration_s": 0.12, "findings": [
        {"check": "shm-too-small", "probe": "shm", "status": "fail", "cause_ids": ["shm-insufficient"],
         "title": "/dev/shm 只有 64 MiB（运行环境：docker）", "fix": "docker run --shm-size=16g ...",
         "detail": "NCCL 的共享内存传输和 DataLoader 的 worker 需要超过 1 GiB；不足时任务会报 "
                   "'Error while creating shared memory segment' 或 bus error。容器默认只有 64 MB。"},
        {"check": "rdma-ports-down", "probe": "rdma", "status": "unavailable", "cause_ids": [],
         "title": "无法读取 RDMA 设备", "detail": "", "fix": ""},
        {"check": "error-handling-off", "probe": "switches", "status": "ok", "cause_ids": [],
         "title": "NCCL 异步错误处理已开启", "detail": "", "fix": ""}]}
    monkeypatch.setenv("COLUMNS", "60")
    i18n.set_lang("zh")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        check_text.render(data)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "distdoctor 检查 node1（0.12 秒）：失败 1，无法检查 1，正常 1"
    fail = next(ln for ln in lines if ln.startswith("失败"))
    unavailable = next(ln for ln in lines if ln.startswith("无法检查"))
    ok = next(ln for ln in lines if ln.startswith("正常"))
    starts = {_cells(ln[:ln.index(t)]) for ln, t in ((fail, "/dev/shm"), (unavailable, "无法读取"), (ok, "NCCL"))}
    assert starts == {9}  # the longest word (无法检查, 8 cells) and a space
    body = lines[lines.index(fail) + 1: lines.index(fail) + 6]
    assert body[0].strip() == "根因：shm-insufficient"
    assert all(ln.startswith(" " * 9) and _cells(ln) <= 60 for ln in body[1:] if "Error while" not in ln)
    assert "下一步操作（可直接复制粘贴）：" in lines and "docker run --shm-size=16g ..." in lines
    assert "# [1] 失败 shm-too-small (shm-insufficient)" in lines

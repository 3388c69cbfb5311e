"""Every command of the command line in Simplified Chinese (issue 15): --help (argparse's own
words too), the text output of each command that runs here without a GPU, one-line errors with
the same exit codes, and --json that does not change with the language. Code never changes:
commands, env lines, rule and cause ids stay byte-identical to the English output."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from distdoctor.knowledge import i18n
from distdoctor.tui.cli import COMMANDS, _lang_in, main

HERE = Path(__file__).resolve().parents[1]
FIX = HERE / "fixtures"
CJK = re.compile(r"[\u4e00-\u9fff]")
OPTION = re.compile(r"(?<![\w-])--?[a-zA-Z][\w-]*")
# every parser: the commands, and the actions under fleet, drill and knowledge
PARSERS = [[c] for c in COMMANDS] + [["bisect"], ["fleet", "collect"], ["fleet", "compare"],
                                     ["fleet", "stacks"], ["drill", "list"], ["drill", "run"],
                                     ["knowledge", "show"], ["knowledge", "list"],
                                     ["knowledge", "validate"], []]


@pytest.fixture(autouse=True)
def _no_language(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from English: no --lang left over, no language in the environment."""
    for name in (i18n.ENV, *i18n.LOCALE_VARS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    i18n.set_lang(None)
    yield
    i18n.set_lang(None)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:  # --help, and argparse's own errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def both(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    """The same command in English and in Chinese."""
    return cli(capsys, *args), cli(capsys, "--lang", "zh", *args)


def ascii_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and line.isascii()]


# --- choosing the language before the parser exists ---------------------------------------------

@pytest.mark.parametrize("argv, want", [
    (["--lang", "zh", "topo"], "zh"), (["--lang=zh", "topo"], "zh"), (["topo", "--lang", "zh"], "zh"),
    (["fleet", "compare", "x", "--lang=en"], "en"), (["--lang", "zh", "--lang", "en"], "en"),
    (["--lang", "fr"], None), (["topo", "--", "--lang", "zh"], None), (["--lang"], None), ([], None),
])
def test_lang_is_found_in_argv_before_the_parser_is_built(argv: list[str], want: str | None) -> None:
    assert _lang_in(argv) == want


def test_the_locale_alone_gives_chinese_help(capsys, monkeypatch) -> None:
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    code, out, _ = cli(capsys, "topo", "--help")
    assert code == 0 and out.startswith("用法：distdoctor topo")
    monkeypatch.setenv("DISTDOCTOR_LANG", "en")
    code, out, _ = cli(capsys, "topo", "--help")
    assert out.startswith("usage: distdoctor topo") and not CJK.search(out)


# --- --help ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", PARSERS, ids=lambda c: " ".join(c) or "top")
def test_help_in_chinese_keeps_every_option_and_command(capsys, command: list[str]) -> None:
    (code_en, en, _), (code_zh, zh, _) = both(capsys, *command, "--help")
    assert code_en == code_zh == 0
    assert not CJK.search(en)
    assert zh.startswith("用法：distdoctor") and "显示此帮助信息并退出" in zh and "选项：" in zh
    # option names are code: the same set in both languages
    assert set(OPTION.findall(en)) == set(OPTION.findall(zh))
    # every example command of the epilog is there as it is (only its description is translated)
    for line in en.splitlines():
        if line.startswith("  distdoctor ") and "  " in line.strip():
            assert line.strip().split("  ")[0] in zh, line
    if command != ["logs"]:  # logs.py's own help texts belong to the log analyser's work
        described = [line for line in zh.splitlines() if line.startswith("  -") and "  " in line.strip()]
        assert all(CJK.search(line) for line in described if "--help" not in line), described


@pytest.mark.parametrize("command", [["topo"], ["fleet", "collect"], ["repro"], []],
                         ids=lambda c: " ".join(c) or "top")
def test_help_wraps_by_display_width(capsys, monkeypatch, command: list[str]) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    _, zh, _ = cli(capsys, "--lang", "zh", *command, "--help")
    options = zh.split("选项：", 1)[1].split("\n\n", 1)[0].splitlines()
    assert options and all(i18n.cells(line) <= 60 for line in options if CJK.search(line)), options
    assert any(line.startswith(" " * 10) and CJK.search(line) for line in options)  # continuations


def test_argparse_words_are_translated_only_while_a_parser_works(capsys) -> None:
    import argparse

    cli(capsys, "--lang", "zh", "topo", "--help")
    assert argparse._("usage: ") == "usage: "  # type: ignore[attr-defined]
    parser = argparse.ArgumentParser(prog="other")
    assert parser.format_help().startswith("usage: other")


# --- one-line errors, the same exit codes -----------------------------------------------------------

@pytest.mark.parametrize("args, chinese", [
    (["topo", "--bogus"], "无法识别的参数：--bogus（参见 distdoctor topo --help）"),
    (["fleet", "compare"], "缺少必需的参数：DIR|FILE"),
    (["topo", "--input", ""], "--input：值为空"),
    (["ras", "--timeout", "-1", "--input", "x"], "--timeout 必须大于或等于 0"),
    (["stacks", "--pid", "abc"], "不是进程 id：'abc'"),
    (["stacks", "--pid", "4194304000"], "没有任何 rank 能转储：进程在转储之前就已消失"),
    (["stacks", "--pid", "1", "--job", "x"], "不能与参数"),
    (["fleet", "collect", "--via", "ssh", "-o", "x"], "--via ssh 需要主机"),
    (["fleet", "stacks", "--via", "carrier-pigeon"], "无效的取值：'carrier-pigeon'"),
    (["fleet", "collect", "--via", "local", "-o", "x", "--timeout", "0"], "必须是大于 0 的数：'0'"),
    (["drill"], "drill：请给出 `list` 或 `run NAME`"),
    (["check", "--only", "nosuch"], "--only：未知的探针 'nosuch'"),
    (["collect", "--python", "/no/such/python"], "--python /no/such/python：没有这个解释器"),
    (["report", "--json", "--format", "md"], "--json 与 --format md 冲突"),
    (["lint", "{tmp}/missing.py"], "missing.py：没有这个文件或文件夹"),
    (["fr", "{tmp}/no-dumps"], "no-dumps：没有这个文件或文件夹（也没有以它开头的文件）"),
    (["topo", "--input", "{tmp}/nope.txt"], "nope.txt：没有这个文件"),
    (["repro", "--env", "FOO"], "--env 'FOO'：应为 NAME=VALUE（例如 --env NCCL_P2P_DISABLE=1）"),
    (["bisect", "--switch", "nosuch"], "--switch 'nosuch'：未知的开关（可选：ib-disable"),
    (["drill", "run", "nosuch"], "未知的演练 'nosuch'（可选：crash"),
    (["fleet", "collect", "--via", "ssh", "--hosts", "n[3-1]", "-o", "{tmp}/f"], "主机范围 'n[3-1]' 有误：'3-1' 是递减的"),
])
def test_errors_are_one_chinese_line_with_the_same_exit_code(capsys, tmp_path, args, chinese) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    (code_en, _, err_en), (code_zh, _, err_zh) = both(capsys, *args)
    assert code_en == code_zh == 2
    assert err_en.startswith("distdoctor: error: ") and len(err_en.splitlines()) == 1
    assert err_zh.startswith("distdoctor: 错误：") and len(err_zh.splitlines()) == 1, err_zh
    assert chinese in err_zh


# --- the text output of each command ---------------------------------------------------------------

def test_topo_text(capsys) -> None:
    path = str(FIX / "topology" / "nccl-info-p2p-disabled-4gpu.txt")
    (code_en, en, _), (code_zh, zh, _) = both(capsys, "topo", "--input", path)
    assert code_en == code_zh == 1
    assert "\n该怎么做\n" in zh and "\n备注\n" in zh and "\nWhat to do\n" not in zh
    assert "- NET/IB 没有找到设备：NCCL 在节点之间退回到 TCP 套接字（NET/Socket）。" in zh.splitlines()
    assert "GPU 之间没有可用的点对点（P2P）通路" in zh
    # the commands to copy are the English ones, byte for byte
    for line in ("    export NCCL_P2P_DISABLE=1", "    echo NCCL_P2P_DISABLE=1 | sudo tee -a /etc/nccl.conf"):
        assert line in en.splitlines() and line in zh.splitlines()


def test_topo_unavailable_line(capsys, monkeypatch) -> None:
    from distdoctor.tui.commands import topo

    monkeypatch.setattr(topo, "collect", lambda args: "no NVIDIA driver")
    code, out, _ = cli(capsys, "--lang", "zh", "topo")
    assert code == 0 and out.startswith("无法检查：no NVIDIA driver；请在 GPU 节点上运行 ")
    assert "`distdoctor topo --input topo.txt`" in out


def test_lint_text(capsys) -> None:
    path = str(FIX / "lint" / "dd101_fire.py")
    (code_en, en, _), (code_zh, zh, _) = both(capsys, "lint", path)
    assert code_en == code_zh == 1
    assert re.search(r"1 个文件中有 \d+ 条结论", zh.splitlines()[-1]), zh.splitlines()[-1]
    # file:line:col: RULE [cause] and the fix's code lines are the same in both languages; the
    # message is translated with the same call in its backquotes
    head = re.compile(r"^(\S+:\d+:\d+: DD\d+ \[[\w-]+\] `[^`]+`)")
    assert [head.match(line)[1] for line in en.splitlines() if "DD101" in line] == \
        [head.match(line)[1] for line in zh.splitlines() if "DD101" in line]
    assert "只在进入这个依赖 rank 的分支的 rank 上执行" in zh
    assert [line for line in en.splitlines() if line.startswith("    ")] == \
        [line for line in zh.splitlines() if line.startswith("    ")]
    code, zh, _ = cli(capsys, "--lang", "zh", "lint", str(FIX / "lint" / "dd101_ok.py"))
    assert code == 0 and zh.strip() == "没有问题：1 个文件，没有结论"


def test_every_lint_rule_message_is_translated_with_its_name() -> None:
    from distdoctor.probes.lint.rules import rules

    zh = i18n.messages("zh")
    assert [r.id for r in rules().values() if "{name}" not in zh.get(r.message, "{name}")] == []
    assert [r.id for r in rules().values() if r.message not in zh] == []


def test_knobs_text_and_every_knob_is_translated(capsys) -> None:
    from distdoctor.probes.knobs import KNOBS
    from distdoctor.tui.commands.knobs import TITLES

    zh_catalogue = i18n.messages("zh")
    assert [k.line for k in KNOBS if k.what not in zh_catalogue] == []
    assert [s for s in TITLES.values() if s not in zh_catalogue] == []
    (code_en, en, _), (code_zh, zh, _) = both(capsys, "knobs")
    assert code_en == code_zh == 0
    assert "# torch.distributed 调试输出" in zh
    env_en = [line.split("  #")[0] for line in en.splitlines() if line.startswith("export ")]
    env_zh = [line.split("  #")[0] for line in zh.splitlines() if line.startswith("export ")]
    assert env_en and env_en == env_zh  # the env lines and their column are untouched
    assert "TORCH_DISTRIBUTED_DEBUG 的" not in zh and "torch.distributed 的集合通信检查" in zh


def test_fr_text(capsys) -> None:
    (code_en, en, _), (code_zh, zh, _) = both(capsys, "fr", str(FIX / "fr" / "crash"))
    assert code_en == code_zh == 1
    assert zh.startswith("Flight Recorder：2 个转储（pickle），rank 0-1")
    assert "  rank  最后完成                最后发出" in zh  # columns padded by display width
    assert "元凶：rank 2（崩溃）：rank 2 没有留下 Flight Recorder 转储，而 rank 0, 1 到达了 all_reduce #3" in zh
    assert "第一次不一致：#3（缺失）：rank 0, 1 到达了 all_reduce #3；" in zh and "根因：rank-crash-deadlock" in zh
    assert "\n下一步：\n" in zh and "  distdoctor knowledge show rank-crash-deadlock" in zh
    assert "  distdoctor stacks --job auto      每个 rank 现在停在哪里" in zh


def test_ras_text(capsys) -> None:
    path = str(FIX / "ras" / "json_dead_mismatch.json")
    (code_en, en, _), (code_zh, zh, _) = both(capsys, "ras", "--input", path)
    assert code_en == code_zh == 1
    assert zh.startswith("NCCL RAS（json 输出，NCCL ")
    assert "  已死：rank 3（" in zh and "证据：rank 3（崩溃）：" in zh and "[根因 rank-crash-deadlock]" in zh
    assert "  ncclras -v                        NCCL 自己更详细的报告" in zh
    code, zh, _ = cli(capsys, "--lang", "zh", "ras", "--input", str(FIX / "ras" / "text_healthy.txt"))
    assert code == 0 and "每个 rank 都已应答，且集合通信计数一致" in zh


@pytest.fixture()
def fleet_dir(tmp_path: Path) -> Path:
    sys.path.insert(0, str(HERE))
    from fleet_gen import base_snapshot, write_fleet

    write_fleet(tmp_path, 8, {3: {"driver": "535.104.05"}, 5: {"switches": {"NCCL_IB_DISABLE": "1"}}},
                base_snapshot())
    return tmp_path


def test_fleet_compare_text(capsys, fleet_dir: Path) -> None:
    (code_en, en, _), (code_zh, zh, _) = both(capsys, "fleet", "compare", str(fleet_dir))
    assert code_en == code_zh == 1
    assert zh.startswith("比较了 8 个节点\n一致：")
    assert "不一致：2 个字段" in zh and "  驱动：550.54.15（7 个），535.104.05（1 个）" in zh
    assert "    node-03：驱动 535.104.05，其余 7 个为 550.54.15" in zh
    assert "\n下一步：\n" in zh
    # the commands are the English ones; only their comments are translated
    for line in en.splitlines():
        if line.startswith(("  ssh ", "  distdoctor ")):
            assert line.split("   #")[0] in zh
    assert "  ssh -- node-03 distdoctor check   # 检查这个节点上的其他一切" in zh
    assert all(i18n.cells(line) <= 100 for line in zh.splitlines())
    (fleet_dir / "broken.json").write_text("garbage")
    code, zh, _ = cli(capsys, "--lang", "zh", "fleet", "compare", str(fleet_dir))
    unwrapped = re.sub(r"\s+", "", zh)  # a long path wraps the line
    assert code == 1 and "broken.json：不是有效的JSON：Expectingvalue（第1行，第1列）" in unwrapped


def test_fleet_compare_wraps_chinese_under_its_label(capsys, fleet_dir: Path) -> None:
    from distdoctor.probes.fleet import compare, load_snapshots
    from distdoctor.tui.commands.fleet_text import render_compare

    records, skipped = load_snapshots([fleet_dir])
    i18n.set_lang("zh")
    lines = render_compare(compare(records, skipped), cols=60).splitlines()
    assert all(i18n.cells(line) <= 60 for line in lines if not line.lstrip().startswith(("ssh", "distdoctor"))), lines
    agree = next(i for i, line in enumerate(lines) if line.startswith("一致："))
    assert lines[agree + 1].startswith(" " * i18n.cells("一致：")) and lines[agree + 1][6] != " "


def test_fleet_collect_text(capsys, tmp_path: Path, monkeypatch) -> None:
    from distdoctor.tui.commands import fleet

    data = {"via": "ssh", "out_dir": str(tmp_path), "hosts": 3, "command": [],
            "ok": [{"host": "a"}, {"host": "b"}], "failed": [{"host": "节点-c", "reason": "timed out"}],
            "stale_files": ["old.json"]}
    i18n.set_lang("zh")
    fleet._print_collect(data)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"fleet collect（经由 ssh）：3 台主机中 2 台已应答，快照在 {tmp_path}/"
    assert out[1:3] == ["失败：", "  节点-c  timed out"]
    assert out[-1] == f"下一步：distdoctor fleet compare {tmp_path}/"


def test_stacks_text() -> None:
    from distdoctor.tui.commands.stacks import render, summary as summary_of

    frame = {"name": "wait", "file": "/v/lib/python3.11/site-packages/torch/distributed/c10d.py", "line": 9}
    result = {"summary": "2 ranks in all_reduce; rank 2 in save (t.py:7)",
              "ranks": [{"rank": str(r), "pid": 100 + r, "host": "h", "where": "all_reduce", "frames": [frame]}
                        for r in range(2)]
              + [{"rank": "2", "pid": 102, "host": "h", "where": "save (t.py:7)", "frames": [frame]},
                 {"rank": "3", "pid": 103, "host": "h", "where": "not dumped: gone", "frames": []}],
              "groups": [{"ranks": ["0", "1"], "where": "all_reduce", "frames": [frame] * 10}],
              "odd": [{"rank": "2", "where": "save (t.py:7)", "why": "in save (t.py:7)"}],
              "culprit": {"role": "stuck", "why": "rank 2 is not in the collective"}}
    i18n.set_lang("zh")
    text = render(result, "--pid")
    assert text.startswith("调用栈：2 个 rank 在 all_reduce；rank 2 在 save (t.py:7)；rank 3 没能转储\n")
    assert "与众不同的 rank：" in text and "元凶（卡住）：rank 2 is not in the collective" in text
    assert "    ……还有 2 个（--json 中有全部）" in text
    assert summary_of(result) == "2 个 rank 在 all_reduce；rank 2 在 save (t.py:7)；rank 3 没能转储"
    i18n.set_lang("en")
    assert summary_of(result) == result["summary"]  # English: the probe's own line
    assert "  py-spy dump --pid 102 --locals      与众不同的 rank，带上它的变量" in text
    assert "  distdoctor stacks --json > stacks.json    为这次事故留存" in text


def test_repro_and_bisect_text(monkeypatch) -> None:
    from distdoctor.probes.repro import ReproResult
    from distdoctor.tui.commands.repro_view import render_bisect, render_repro

    monkeypatch.setenv("COLUMNS", "80")
    progress = {0: "done", 1: "barrier"}
    codes = {"ranks": {"0": 0, "1": 1}}
    result = ReproResult("error", 3.0, codes, [], "/tmp/x/output.log", "/tmp/x", "/tmp/x/s.py", [],
                         {}, 2, 29500, progress=progress, manual="torchrun --nnodes 2 s.py",
                         first_error="RuntimeError: 某个中文错误 " * 6)
    i18n.set_lang("zh")
    text = render_repro(result, None, "print('hi')", bisect_cmd="distdoctor bisect")
    lines = text.splitlines()
    assert lines[0] == "复现：出错，用时 3.0 秒（2 个 rank）"
    assert lines[2] == "  rank  最后一步    退出码"
    assert "  下一步：distdoctor logs /tmp/x/output.log" in lines
    assert "          distdoctor bisect   # 同一个任务，一次一个开关" in lines  # under the command
    assert "在两个节点上手动运行：" in lines and "torchrun --nnodes 2 s.py" in lines
    first = [line for line in lines if "最先出现的错误" in line or line.startswith("    ")]
    assert len(first) > 1 and all(i18n.cells(line) <= 80 for line in first)
    data = {"backend": "gloo", "baseline": {"outcome": "error", "duration_s": 4.9, "log": "/x"},
            "runs": [{"env": "GLOO_SOCKET_IFNAME=eth0", "outcome": "pass", "duration_s": 5.5}],
            "verdict": {"env": "GLOO_SOCKET_IFNAME=eth0", "cause": "nic-selection", "cause_title": "",
                        "why": "x", "permanent_fix": "y", "reminder": "z"},
            "baseline_passed": False, "run_dir": "/tmp/runs"}
    lines = render_bisect(data, None).splitlines()
    assert lines[0] == "二分排查：后端 gloo，2 次运行，一次一个开关"
    assert lines[3].startswith("  基线") and "出错" in lines[3]
    assert "    export GLOO_SOCKET_IFNAME=eth0" in lines
    assert "结论：只打开 GLOO_SOCKET_IFNAME=eth0 就让失败的基线变为通过。" in lines


def test_drill_list_text(capsys) -> None:
    from distdoctor.probes.drill import DRILLS

    (code_en, en, _), (code_zh, zh, _) = both(capsys, "drill", "list")
    assert code_en == code_zh == 0
    lines = zh.splitlines()
    assert lines[0].split() == ["演练", "已通过", "注入的故障"]
    assert [d.summary for d in DRILLS.values() if d.summary not in i18n.messages("zh")] == []
    assert any(line.startswith("crash ") and "一个 rank 在训练中途抛出异常" in line for line in lines)
    assert "运行一个：distdoctor drill run crash" in lines and "在应用中：distdoctor --drill crash" in lines


def test_sessions_text(capsys) -> None:
    from distdoctor.tui.record.session import SessionStore

    code, zh, _ = cli(capsys, "--lang", "zh", "sessions")
    assert code == 0 and "中还没有会话：运行 `distdoctor`" in zh
    store = SessionStore()
    sid = store.create(host="gpu-node-1")["id"]
    store.append(sid, "classify", {"symptom": "卡住的任务", "sub": "hang-init"})
    code, zh, _ = cli(capsys, "--lang", "zh", "sessions")
    lines = zh.splitlines()
    assert code == 0 and lines[0].split()[:4] == ["ID", "更新时间", "主机", "症状"]
    assert "个会话" in zh and "用 `distdoctor --resume ID` 打开" in zh


def test_knowledge_validate_text(capsys) -> None:
    code, zh, _ = cli(capsys, "--lang", "zh", "knowledge", "validate")
    assert code == 0 and re.match(r"知识库 \S+：有效（\d+ causes", zh)


# --- --json does not depend on the language ---------------------------------------------------------

def _json_cases(tmp: Path, fleet: Path) -> list[list[str]]:
    return [["topo", "--input", str(FIX / "topology" / "topo-m-and-p2p-r-4gpu-2socket.txt")],
            ["lint", str(FIX / "lint" / "dd101_fire.py")],
            ["fr", str(FIX / "fr" / "asymmetric")],
            ["ras", "--input", str(FIX / "ras" / "text_mismatch.txt")],
            ["fleet", "compare", str(fleet)],
            ["drill", "list"], ["sessions"], ["knowledge", "list", "causes"]]


# the human-readable text fields a probe writes in the output's language: topo's advice, knobs'
# note and missing sources, the why of ras evidence and of fr's culprit, fr's details and notes, an
# unavailable reason; everything else
# (ids, commands, env lines, numbers, roles) is data
TEXT_FIELDS = {"text", "note", "notes", "missing", "why", "reason", "detail", "stalled", "fr_trace_note"}


def _shape(value):
    """Keys and values, with the human-readable text fields left out."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items() if k not in TEXT_FIELDS}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return value


def test_json_is_the_same_in_both_languages(capsys, fleet_dir: Path, tmp_path: Path) -> None:
    for args in _json_cases(tmp_path, fleet_dir):
        (code_en, en, _), (code_zh, zh, _) = both(capsys, *args, "--json")
        assert code_en == code_zh, args
        assert _shape(json.loads(en)) == _shape(json.loads(zh)), args


def test_topo_json_translates_only_the_advice_prose(capsys) -> None:
    path = str(FIX / "topology" / "topo-m-and-p2p-r-4gpu-2socket.txt")
    (_, en, _), (_, zh, _) = both(capsys, "topo", "--input", path, "--json")
    en_doc, zh_doc = json.loads(en), json.loads(zh)
    assert en_doc["advice"] and [a["env"] for a in en_doc["advice"]] == [a["env"] for a in zh_doc["advice"]]
    for a, b in zip(en_doc["advice"], zh_doc["advice"]):
        assert CJK.search(b["text"]) and not CJK.search(a["text"])
        # the command lines of each item (indented) are the same
        assert [x for x in a["text"].splitlines() if x.startswith("  ")] == \
            [x for x in b["text"].splitlines() if x.startswith("  ")]


def test_knobs_json_differs_only_in_its_text_fields(capsys) -> None:
    (code_en, en, _), (code_zh, zh, _) = both(capsys, "knobs", "--json")
    en_doc, zh_doc = json.loads(en), json.loads(zh)
    assert code_en == code_zh == 0 and en_doc.keys() == zh_doc.keys()
    assert _shape(en_doc) == _shape(zh_doc)
    assert len(en_doc["missing"]) == len(zh_doc["missing"])


def test_stacks_of_a_recorded_hang_in_chinese() -> None:
    sys.path.insert(0, str(HERE))
    from test_stacks_analysis import recorded

    from distdoctor.probes.stacks import analyse
    from distdoctor.tui.commands.stacks import render

    i18n.set_lang("zh")
    result = analyse(recorded("sleep"))
    text = render(result)
    assert text.startswith("调用栈：2 个 rank 在 all_reduce (train.py:38)；rank 1 在 slow_step (train.py:10)\n")
    assert "  rank 1 在 slow_step (train.py:10)，不在集合通信中：2 个 rank（0,2） 在 all_reduce (train.py:38) 中等待" \
        in text.splitlines()
    assert "元凶（卡住）：rank 1 在 slow_step (train.py:10)，不在集合通信中" in text
    assert [o["where"] for o in result["odd"]] == ["slow_step (train.py:10)"]  # data stays as it is


def test_bisect_plan_and_live_lines_in_chinese(monkeypatch) -> None:
    import io

    from distdoctor.knowledge import load_knowledge
    from distdoctor.probes.repro import ReproOptions
    from distdoctor.probes.repro.bisect import plan
    from distdoctor.tui.commands.repro_view import Live

    monkeypatch.setenv("COLUMNS", "60")
    i18n.set_lang("zh")
    lines = plan(ReproOptions(backend="gloo"), load_knowledge(None), "gloo")
    assert lines[0].startswith("基线：本节点 2 个 rank，后端 gloo")
    assert any(line.startswith("然后单独打开：GLOO_SOCKET_IFNAME=") for line in lines)
    out = io.StringIO()
    live = Live(stream=out)
    live.say(i18n.t("plan: {line}", line=lines[1]))
    said = out.getvalue().splitlines()
    assert said[0].lstrip().startswith("[") and "计划：然后单独打开：GLOO_SOCKET_IFNAME=" in said[0]
    # a closing CJK punctuation mark hangs past the width rather than start a line (i18n.wrap)
    assert len(said) > 1 and all(i18n.cells(line.rstrip("，。、；：）")) <= 60 for line in said), said

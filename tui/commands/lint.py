"""`distdoctor lint`: read training scripts (never run them) for the patterns that hang or silently
corrupt distributed training, each with its cause and the code that fixes it."""
from __future__ import annotations

import argparse
import sys

from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from . import common
from .exitcodes import USAGE, problem_if

KIND = "lint"
DESCRIPTION = """\
Read Python training scripts with the standard library's ast (the code is never
imported or run, torch is not needed) and report what will hang or silently
corrupt a distributed job: collectives that only some ranks reach, loops over
per-rank data of different lengths, mp.spawn under torchrun, init_process_group
without a timeout, missing DistributedSampler or set_epoch, one seed for all
ranks, rank-0 checkpoints without a barrier or broadcast, heavy rank-0 work, and
exits that leave the other ranks waiting. Lightning, accelerate and HF Trainer
scripts are read with what those frameworks do for you (samplers, rank-zero
helpers). Every finding has a stable rule id (DD101...), the guide's cause id,
one sentence on why, and code to paste (often from distdoctor.guard)."""
EPILOG = """\
examples:
  distdoctor lint train.py                    one script
  distdoctor lint src/ scripts/train.py       folders are read recursively (*.py)
  distdoctor lint train.py --json | jq '.findings[].rule'
  distdoctor lint train.py --session inc-42   add the findings to a session
  distdoctor knowledge show asymmetric-collective
                                              the cause behind a finding

exit codes: 0 no findings, 1 findings, 2 unreadable input (a missing path, a file
            that is not Python text, a syntax error: one line naming file and line)
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("lint", help=t("find what will hang or corrupt a distributed job in the script"),
                            description=t(DESCRIPTION), epilog=t(EPILOG),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="PATH", help=t("Python files or folders (read recursively)"))
    common.add_common(parser)
    parser.set_defaults(func=run)


def message(finding: dict) -> str:
    """A finding's message in the output's language. The JSON keeps the English one; its rule's
    template (rules.toml, `{name}` filled in) is the catalogue key, and the name is read back
    from the English text, so the translation gets the same call or variable."""
    from distdoctor.probes.lint.rules import rules

    rule = rules().get(finding["rule"])
    if rule is None or "{name}" not in rule.message:
        return t(rule.message) if rule is not None and rule.message == finding["message"] else finding["message"]
    head, _, tail = rule.message.partition("{name}")
    text = finding["message"]
    if not (text.startswith(head) and text.endswith(tail)) or len(text) < len(head) + len(tail):
        return text
    return t(rule.message).replace("{name}", text[len(head):len(text) - len(tail)])


def render(data: dict) -> str:
    """Findings as `file:line:col: RULE [cause] message`, each followed by its fix, indented."""
    lines: list[str] = []
    for f in data["findings"]:
        lines.append(f"{f['file']}:{f['line']}:{f['col']}: {f['rule']} [{f['cause_id']}] {message(f)}")
        lines.extend("    " + row for row in f["fix"].splitlines())
        lines.append("")
    n, files = len(data["findings"]), len(data["files"])
    shown = t("{n} file", n=files) if files == 1 else t("{n} files", n=files)
    lines.append((t("{n} finding in {files}", n=n, files=shown) if n == 1
                  else t("{n} findings in {files}", n=n, files=shown))
                 if n else t("clean: {files}, no findings", files=shown))
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from distdoctor.probes.lint import lint_paths

    result = lint_paths(args.paths)
    if result.errors and not result.files:
        raise UsageError(result.errors[0] if len(result.errors) == 1
                         else t("{error} (and {n} more)", error=result.errors[0], n=len(result.errors) - 1))
    data = result.to_dict()
    common.record(args, KIND, data)
    if args.json:
        common.print_json(data)
    else:
        sys.stdout.write(render(data))
    for line in result.errors:
        print(t("distdoctor: error: {error}", error=line), file=sys.stderr)
    if result.errors:
        return USAGE  # some input could not be read: its findings are missing from the result
    return problem_if(bool(result.findings))

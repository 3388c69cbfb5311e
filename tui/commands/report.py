"""`distdoctor report`: a session as a Markdown, HTML or JSON incident report, redacted by default."""
from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

from distdoctor.knowledge.i18n import t

from ..errors import UsageError
from .common import add_common, knowledge

EPILOG = """\
Redaction is on by default: values of secret-looking variables (*TOKEN*,
*SECRET*, *KEY*, *PASSWORD*, *CREDENTIAL*, AWS_*, ...) and token-shaped strings
in log lines (bearer tokens, URL passwords, provider keys) are masked
everywhere in the report. --pseudonymize also replaces host names, IP addresses
and user names with stable tokens (host-1, ip-1, user-1); the mapping stays in
a local file next to the session and is never part of the report.

examples:
  distdoctor report                        the last session, Markdown on stdout
  distdoctor report --format html -o incident.html
                                           one self-contained HTML file
  distdoctor report 20261130-101500-ab12 --format json -o incident.json
  distdoctor report --pseudonymize -o incident.md
                                           safe to paste into a public issue
  distdoctor report --lang zh -o incident-zh.md
                                           the same session's report in Chinese
  distdoctor sessions                      list the sessions to pick an ID from

exit codes: 0 report written, 2 no such session, unreadable session, -o not
            writable, or bad usage
"""
DESCRIPTION = """\
Write a session's steps, findings, evidence, conclusion, fixes and the
debugging switches to remove as one report (Markdown, HTML or JSON)."""
FORMATS = ("md", "html", "json")
SUFFIX_FORMAT = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".json": "json"}


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "report", help=t("write a session as an incident report (md, html, json)"),
        description=t(DESCRIPTION),
        epilog=t(EPILOG), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("id", nargs="?", default="last", metavar="ID",
                        help=t("session id (default: the last session; see `distdoctor sessions`)"))
    parser.add_argument("--format", choices=FORMATS, help=t("md (default), html or json; "
                        "taken from the -o file's suffix when not given"))
    parser.add_argument("-o", "--output", metavar="FILE", help=t("write here instead of stdout"))
    parser.add_argument("--pseudonymize", action="store_true",
                        help=t("replace host names, IP addresses and user names with stable tokens"))
    parser.add_argument("--no-redact", dest="redact", action="store_false",
                        help=t("keep secrets in the report (prints a warning; never share it)"))
    add_common(parser, session=False)
    parser.set_defaults(func=run)


def _format(args: argparse.Namespace) -> str:
    if getattr(args, "json", False):
        if args.format not in (None, "json"):
            raise UsageError(t("--json conflicts with --format {format}", format=args.format))
        return "json"
    if args.format:
        return args.format
    if args.output:
        return SUFFIX_FORMAT.get(Path(args.output).suffix.lower(), "md")
    return "md"


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def write_report(output: str, text: str, *, private: bool) -> None:
    """Write a report so that a full disk or a kill never leaves a cut-off file in place of a
    good one: a temporary file beside it, fsync, then rename (as the session store does). An
    unredacted report is its owner's only (0600); a redacted one gets the usual 0666 - umask.
    A target that is not a regular file (/dev/stdout, a FIFO) is written in place: a rename
    would replace the device or pipe itself."""
    from ..record.session import write_atomic

    path = Path(output)
    try:
        st = os.stat(path)  # follows a symlink: the file it points to is the one replaced
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        return
    if st is not None:
        path = Path(os.path.realpath(path))
        if not os.access(path, os.W_OK):  # a rename would get round a read-only report
            raise PermissionError(13, "Permission denied", str(output))
    if not path.parent.is_dir():  # never create folders the user did not ask for
        raise FileNotFoundError(2, "No such file or directory", str(output))
    write_atomic(path, text)  # mkstemp: 0600 from the start, so never readable half-written
    if not private:
        os.chmod(path, 0o666 & ~_umask())


def _identity(path: Path) -> tuple[int, int] | None:
    """The file's (inode, mtime): the mapping is written by rename, so a kept one changes it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def run(args: argparse.Namespace) -> int:
    from ..record.report import export_report
    from ..record.session import SessionStore

    fmt = _format(args)
    store = SessionStore()
    record = store.load(args.id)
    mapping = store.pseudonyms_path(record.get("id") or args.id)
    # --lang (before or after `report`) chooses; else the session's language when it records one
    lang = getattr(args, "lang", None) or record.get("lang")
    if lang in ("en", "zh"):  # the knowledge texts and the renderers follow it (knowledge/i18n.py)
        from distdoctor.knowledge import i18n

        i18n.set_lang(lang)
    kb = knowledge(args)
    if not args.redact:
        print(t("distdoctor: warning: redaction is off: the report may contain tokens, passwords "
                "and keys; do not share it"), file=sys.stderr)
    to_file = args.output not in (None, "-")
    if to_file and os.path.realpath(os.path.dirname(os.path.abspath(args.output))) == \
            os.path.realpath(store.directory):
        # a report written there could replace a session (or its pseudonym mapping) for good
        raise UsageError(t("-o {path}: that is the sessions folder; write the report elsewhere, e.g. "
                           "-o incident.{format}", path=args.output, format=fmt))
    before = _identity(mapping)
    try:
        text = export_report(record, kb, fmt, None, redact=args.redact,
                             pseudonymize=args.pseudonymize, mapping_path=mapping)
        if to_file:
            write_report(args.output, text, private=not args.redact)
    except OSError as exc:
        raise UsageError(t("cannot write {path}: {why}", path=exc.filename or args.output,
                           why=exc.strerror or exc)) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.pseudonymize and _identity(mapping) in (None, before):
        # a read-only state folder: the report is made, its tokens are not kept for the next one
        print(t("distdoctor: pseudonym mapping not kept (cannot write {path}): a later report may give "
                "other tokens", path=mapping), file=sys.stderr)
    elif args.pseudonymize:
        print(t("distdoctor: pseudonym mapping kept in {path} (never share it)", path=mapping), file=sys.stderr)
    if to_file:
        print(t("distdoctor: wrote {path} ({format})", path=args.output, format=fmt), file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0

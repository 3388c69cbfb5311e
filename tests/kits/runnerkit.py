"""A test double for probes.runner.Runner: answers from recordings keyed by argv."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from distdoctor.knowledge.i18n import t
from distdoctor.probes.runner import CommandResult


class RecordedRunner:
    """Answers from recordings keyed by argv; anything unrecorded is 'command not found'."""

    def __init__(self, answers: Mapping[tuple[str, ...], CommandResult | str]) -> None:
        self.answers = dict(answers)
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], *, timeout: float,
                 env: Mapping[str, str] | None = None) -> CommandResult:
        argv = tuple(argv)
        self.calls.append(argv)
        answer = self.answers.get(argv)
        if answer is None:
            return CommandResult(argv, None, "", "", 0.0, t("{command}: command not found", command=argv[0]))
        if isinstance(answer, str):
            return CommandResult(argv, 0, answer, "", 0.0)
        return answer

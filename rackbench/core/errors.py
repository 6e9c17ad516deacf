"""The one error type for a user's mistake in a file: it names the file, the key and the fix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one key of one file."""

    file: str
    key: str
    message: str
    fix: str = ""
    line: int | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        text = f"{where}: {_one_line(self.key) or '<top level>'}: {_one_line(self.message)}"
        return f"{text} (fix: {self.fix})" if self.fix else text


def _one_line(text: str) -> str:
    """A recipe's key or value may carry control characters: shown escaped, so a problem stays one line."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


class ConfigError(Exception):
    """A recipe, cluster, model or changelog file is wrong. Carries one or more problems."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

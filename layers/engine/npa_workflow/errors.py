"""The one error type users see for anything wrong with a spec, a catalog or a run request.

A `Problem` names where (file and YAML path), what is wrong and, where we can tell, how to
fix it. `SpecError` carries every problem of one input, so a user fixes them all at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    path: str
    message: str
    hint: str = ""
    severity: Severity = "error"
    file: str = ""

    def format(self) -> str:
        where = f"{self.file}: " if self.file else ""
        path = self.path or "$"
        text = f"{where}{path}: {self.message}"
        if self.hint:
            text += f" (fix: {self.hint})"
        if self.severity == "warning":
            text += " [warning]"
        return text

    def to_json(self) -> dict[str, str]:
        return {
            "file": self.file,
            "path": self.path or "$",
            "severity": self.severity,
            "message": self.message,
            "hint": self.hint,
        }


class SpecError(Exception):
    """Every error of one input. `warnings` travel along so callers can show them too."""

    def __init__(self, problems: Iterable[Problem], warnings: Iterable[Problem] = ()) -> None:
        self.problems = [p for p in problems if p.severity == "error"]
        self.warnings = list(warnings)
        if not self.problems:
            raise ValueError("SpecError needs at least one error")
        super().__init__("\n".join(p.format() for p in self.problems))

    @classmethod
    def single(cls, path: str, message: str, hint: str = "", file: str = "") -> SpecError:
        return cls([Problem(path=path, message=message, hint=hint, file=file)])

    def with_file(self, file: str) -> SpecError:
        def stamp(p: Problem) -> Problem:
            return p if p.file else Problem(p.path, p.message, p.hint, p.severity, file)

        return SpecError([stamp(p) for p in self.problems], [stamp(w) for w in self.warnings])


class WiringError(RuntimeError):
    """The environment does not describe an engine (a variable a function's configuration sets is missing or
    wrong). Here, not in `npa_workflow.wiring`, so the engine modules that read settings can raise it without
    importing the module that builds the adapters."""

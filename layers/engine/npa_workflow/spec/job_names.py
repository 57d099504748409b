"""The job-name form of a state's name, and the states whose job names would be one.

A job's name is what launch (and the SkyPilot executor) adopts a job by after a crash or a retry, so
two states that share one would share one job: the second adopts the first one's finished job and its
command never runs. The name keeps a state's readable form — Unicode compatibility forms folded (NFKC:
`ｔｒａｉｎ` is `train`), invisible characters (zero-width spaces, joiners, bidi marks) dropped,
lower-cased, anything outside `[a-z0-9_-]` turned into `-` — so validation rejects the states it would
merge, naming both, instead of making the names unreadable.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

from npa_workflow.errors import Problem
from npa_workflow.spec.model import State
from npa_workflow.spec.paths import join

_UNSAFE = re.compile(r"[^a-z0-9_-]")


def job_label(text: str) -> str:
    """The readable, scheduler-safe form of `text` (deterministic; see the module doc)."""
    if not text.isascii():  # ASCII is its own NFKC form and holds no format (Cf) character
        text = "".join(ch for ch in unicodedata.normalize("NFKC", text) if unicodedata.category(ch) != "Cf")
    return _UNSAFE.sub("-", text.lower())


def _suffix_patterns(loop_names: list[str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """What launch appends to a state's label (render/names.py): `-<loop><round>` per started loop, then
    `-a<attempt>` after the trailing `-` of the label-with-counters is cut. Over-approximate: any order."""
    loops = "|".join(re.escape(job_label(n)) for n in sorted(loop_names, key=len, reverse=True))
    counters = f"(?:-(?:{loops})[0-9]+)+(?:-a[0-9]+)?" if loops else "(?!)"
    return re.compile(counters), re.compile("-a[0-9]+")


def job_name_collisions(states: Mapping[str, State]) -> list[Problem]:
    """Every pair of job-running states whose job names can be equal: the same label, or one label that
    is another's plus a loop round or retry suffix (`train-a2` is `train`'s second attempt)."""
    labels = {name: job_label(name) for name, st in states.items() if st.has_command}
    raw: dict[str, str] = {}
    cut: dict[str, str] = {}  # the label without trailing `-`, as a first attempt outside loops is named
    problems: list[Problem] = []
    for name, label in labels.items():
        raw.setdefault(label, name)
        first = cut.setdefault(label.rstrip("-"), name)
        if first != name:
            problems.append(_collision(name, first, "the same job name as state '{other}'"))
    with_counters, retry = _suffix_patterns([name for name, st in states.items() if st.loop is not None])
    for name, full in labels.items():
        label = full.rstrip("-")
        if "-" not in label:
            continue
        for at in (i for i, ch in enumerate(label) if ch == "-"):
            head, rest = label[:at], label[at:]
            other = (raw.get(head) if with_counters.fullmatch(rest) else None) or \
                (cut.get(head) if retry.fullmatch(rest) else None)
            if other is not None and other != name:
                problems.append(_collision(name, other, "the job name of a later round or retry of state '{other}'"))
                break
    return problems


def _shown(name: str) -> str:
    """The name with its invisible characters written as escapes, so a message shows the difference."""
    return "".join(f"\\u{ord(ch):04x}" if unicodedata.category(ch) in ("Cf", "Cc", "Zl", "Zp") else ch
                   for ch in name)


def _collision(name: str, other: str, relation: str) -> Problem:
    return Problem(
        join("states", name),
        f"state '{_shown(name)}' would get {relation.format(other=_shown(other))} "
        f"('{job_label(name).rstrip('-')}'): one would adopt the other's job and never run",
        f"rename '{_shown(name)}' or '{_shown(other)}' so the names differ in more than case, punctuation or "
        "invisible characters",
    )

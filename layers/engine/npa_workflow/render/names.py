"""Names and keys shared by the renderers (a wave's job name and key), and the one render error.

Pure string functions: a job name is what the scheduler shows and what a retry or resume
looks up; a wave key is the resume identity of one wave (or one batch of a group).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

from npa_workflow.plan.model import PlanStep
from npa_workflow.spec.job_names import job_label

JOB_NAME_MAX = 60
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RenderError(ValueError):
    """A plan step (or batch of steps) cannot be rendered into a scheduler document."""


def safe_name(text: str) -> str:
    """Every character outside `[A-Za-z0-9_-]` becomes `-` (case kept). Deterministic, not injective."""
    return _UNSAFE.sub("-", text)


def is_safe_name(text: str) -> bool:
    return bool(_SAFE_NAME.match(text))


def is_env_name(text: str) -> bool:
    return bool(_ENV_NAME.match(text))


def job_name(run_id: str, counter: int, label: str, iteration: int | None, attempt: int) -> str:
    """`<run_id>-<NN>-<label>[-<iteration>]` in its job-label form (spec/job_names.py: NFKC, invisible
    characters dropped, lower-cased, unsafe chars → `-`), trimmed, ≤60 chars. Validation rejects states
    whose names this would merge.

    Attempts after the first append `-a<attempt>`; truncation cuts the base, never the suffix, and
    adds a short digest of the full base so two long names never collide (launch adopts by name).
    """
    base = f"{run_id}-{counter:02d}-{label}"
    if iteration is not None:
        base += f"-{iteration}"
    base = job_label(base).strip("-")
    suffix = f"-a{attempt}" if attempt > 1 else ""
    if len(base) + len(suffix) > JOB_NAME_MAX:
        digest = hashlib.sha256(base.encode("utf-8")).hexdigest()[:8]
        suffix = f"-{digest}{suffix}"
        base = base[: JOB_NAME_MAX - len(suffix)].rstrip("-")
    return f"{base}{suffix}"


def wave_identity(state: str, loops: Mapping[str, int]) -> str:
    """What launch keys a wave by: the state and every started loop's counter (`train|refine=2`)."""
    counters = ",".join(f"{name}={n}" for name, n in sorted(loops.items()) if n > 0)
    return f"{state}|{counters}" if counters else state


def launch_job_name(run_id: str, state: str, loops: Mapping[str, int], attempt: int) -> str:
    """The job name launch submits a wave under: `<run_id>-01-<state>[-<loop><n>…][-a<attempt>]`.

    Unique per wave of a run through the loop counters (one job per state visit, so the counter stays 01)."""
    counters = ",".join(f"{name}{n}" for name, n in sorted(loops.items()) if n > 0)
    return job_name(run_id, 1, state + (f"-{counters}" if counters else ""), None, attempt)


def wave_key(counter: int, group: str, steps: Sequence[PlanStep]) -> str:
    """`NNN|G|L:S:I[,L:S:I…]`; `G` is the group or the literal `serial`, `I` the iteration or `-`."""
    members = ",".join(
        f"{s.loop_label}:{s.state}:{'-' if s.iteration is None else s.iteration}" for s in steps
    )
    return f"{counter:03d}|{group or 'serial'}|{members}"

"""The one run-id rule: what `run --run-id`, `submit --run-id`, a run request's `runId`, the inbox's generated ids
and `resume` accept and produce.

A run id names the run's first Step Functions execution, its S3 prefix `runs/<run-id>/` and its ledger items; a
resumed run's later executions are `<run-id>-r<n>`. AWS limits an execution name to 80 characters, and an
execution whose name has characters outside `A-Za-z0-9-_` cannot be logged to CloudWatch Logs, so a run id is
1-72 characters of letters, digits, `-` and `_`, starting with a letter or digit: 8 characters stay free for
`-r<n>` (n up to 999999).
"""

from __future__ import annotations

import re

EXECUTION_NAME_MAX = 80  # AWS: StartExecution `name`, 1-80 characters
RESUME_SUFFIX = "-r"
RESUME_MAX = 999_999
RUN_ID_MAX = EXECUTION_NAME_MAX - len(RESUME_SUFFIX) - len(str(RESUME_MAX))  # 72
RUN_ID_PATTERN = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_-]{{0,{RUN_ID_MAX - 1}}}$")
RULE = (f"1-{RUN_ID_MAX} characters from letters, digits, '-' and '_', starting with a letter or digit "
        f"(it names the run's Step Functions executions, at most {EXECUTION_NAME_MAX} characters with the "
        f"'{RESUME_SUFFIX}<n>' of a resume)")


class InvalidRunId(ValueError):
    """A run id the rule refuses; the message says the rule."""


def run_id_problem(run_id: str) -> str | None:
    """None for a valid run id, else one line saying what is wrong and the rule."""
    if RUN_ID_PATTERN.match(run_id):
        return None
    if not run_id:
        return f"the run id is empty: use {RULE}, or leave the option out for a generated one"
    shown = repr(run_id) if len(run_id) <= 100 else repr(run_id[:100]) + "…"
    if len(run_id) > RUN_ID_MAX:
        return f"run id {shown} is {len(run_id)} characters long, over the {RUN_ID_MAX} allowed: use {RULE}"
    return f"run id {shown} is not valid: use {RULE}"


def check_run_id(run_id: str) -> str:
    problem = run_id_problem(run_id)
    if problem is not None:
        raise InvalidRunId(problem)
    return run_id


def execution_name(run_id: str, resume: int = 1) -> str:
    """The name of the run's `resume`-th execution: the run id, then `<run-id>-r2`, `-r3`, …"""
    check_run_id(run_id)
    if resume <= 1:
        return run_id
    if resume > RESUME_MAX:
        raise InvalidRunId(f"run {run_id!r} was resumed {RESUME_MAX} times already: start a new run")
    return f"{run_id}{RESUME_SUFFIX}{resume}"


def resume_number(run_id: str, name: str) -> int:
    """Which execution of `run_id` `name` is (1 for the first, n for `<run-id>-r<n>`); 0 if not one of its."""
    if name == run_id:
        return 1
    suffix = name[len(run_id):] if name.startswith(run_id) else ""
    digits = suffix[len(RESUME_SUFFIX):]
    return int(digits) if suffix.startswith(RESUME_SUFFIX) and digits.isdigit() else 0


def next_execution_name(run_id: str, current: str) -> str:
    """The execution a resume starts after `current` (an execution of the run) ended."""
    return execution_name(run_id, max(resume_number(run_id, current), 1) + 1)

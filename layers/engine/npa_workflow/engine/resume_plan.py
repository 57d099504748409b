"""How to resume a run that did not succeed on Step Functions: redrive its execution, or start a new one
that replays the run's succeeded waves (launch completes their tokens at once from the ledger).

AWS facts this relies on (docs/cloud.md, "Resume"):
- RedriveExecution restarts a FAILED, ABORTED or TIMED_OUT Standard execution from its unsuccessful step.
- Every failure of a compiled machine is caught (`<state>.cleanup`) and routed to the `run.failed` Fail
  state, so a FAILED execution's unsuccessful step is that Fail state: redriven, it fails again at once.
  A FAILED run therefore always gets a new execution.
- An ABORTED (StopExecution) or TIMED_OUT execution stopped inside real work (a wave Task, a Map): a
  redrive continues from there — only the unfinished Map iterations run again.
- DescribeExecution says whether AWS will redrive at all (`redriveStatus`: NOT_REDRIVABLE after a
  history-limit failure, after 14 days, or when the definition changed); a service that does not say
  (moto, which has no RedriveExecution) is tried, and the caller falls back to a new execution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from npa_workflow.engine.ports import Execution

REDRIVE: Final = "redrive"
NEW_EXECUTION: Final = "new_execution"


@dataclass(frozen=True)
class ResumePlan:
    mode: Literal["redrive", "new_execution"]
    reason: str


def plan_resume(execution: Execution) -> ResumePlan:
    """The plan for `execution` (what `Executions.describe` says) of a run that did not succeed."""
    status = execution.status
    redrive_status = execution.redrive_status
    if status == "FAILED" and redrive_status not in (None, "REDRIVABLE"):
        why = execution.redrive_status_reason or redrive_status
        return ResumePlan(NEW_EXECUTION, f"the execution failed and cannot be redriven ({why}): a new execution "
                                         "replays the succeeded waves")
    if status == "FAILED":
        return ResumePlan(NEW_EXECUTION, "the execution failed into `run.failed` (a redrive would re-enter that "
                                         "Fail state and fail again): a new execution replays the succeeded waves")
    if status in ("ABORTED", "TIMED_OUT"):
        if redrive_status in (None, "REDRIVABLE"):
            return ResumePlan(REDRIVE, f"the execution was {status} inside its work: a redrive continues from the "
                                       "interrupted step")
        why = execution.redrive_status_reason or redrive_status
        return ResumePlan(NEW_EXECUTION, f"the execution was {status} but cannot be redriven ({why}): a new "
                                         "execution replays the succeeded waves")
    raise ValueError(f"execution status {status or '?'}: only a FAILED, ABORTED or TIMED_OUT execution is resumed")

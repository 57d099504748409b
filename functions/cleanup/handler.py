"""cleanup: the Catch target of every state. Cancels the run's active jobs by exact id and returns the
root cause (`{"error", "cause"}`) that the `run.failed` state fails the execution with."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from npa_workflow.engine.cleanup import cleanup
from npa_workflow.engine.wiring import engine_from_environment

logger = Logger(service="npa-workflow-cleanup")


class CleanupEvent(BaseModel):
    """The `<state>.cleanup` Task's payload (compile/asl.py `with_catch`): the caught error is `error`."""

    model_config = ConfigDict(extra="allow")

    run_id: str
    state: str
    error: dict[str, Any] = Field(default_factory=dict)
    loops: dict[str, int] = Field(default_factory=dict)
    execution: str = ""


@logger.inject_lambda_context(correlation_id_path="run_id")
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, str]:
    request = CleanupEvent.model_validate(event)
    result = cleanup(engine_from_environment(), request.model_dump())
    logger.warning("run failed; jobs cleaned up", extra={"state": request.state, **result})
    return result

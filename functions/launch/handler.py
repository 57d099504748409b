"""launch: submit the wave's job once and record (job id, task token) in the ledger.

Invoked by a `lambda:invoke.waitForTaskToken` Task; the watch pass completes the token when the job ends.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from npa_workflow.engine.wiring import engine_from_environment

logger = Logger(service="npa-workflow-launch")


class LaunchEvent(BaseModel):
    """The Task's payload (compile/asl.py `wave_task`): one visit of a leaf state or a group member."""

    model_config = ConfigDict(extra="allow")

    run_id: str
    state: str
    token: str = Field(repr=False)
    loops: dict[str, int] = Field(default_factory=dict)
    group: str = ""
    execution: str = ""


@logger.inject_lambda_context(correlation_id_path="run_id")
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    request = LaunchEvent.model_validate(event)
    # Imported on the first invocation, not with the module: it brings the spec stack (YAML, the spec's models,
    # validation, rendering), which keeps the module's import within its budget (bench/handler_import.py).
    from npa_workflow.engine.launch import launch

    result = launch(engine_from_environment(), request.model_dump())
    logger.info("wave launched", extra={"state": request.state, "group": request.group, **result})
    return result

"""Starting a run: the one sequence the inbox Lambda and the local runtime share.

`start_run(...)`:

1. freezes the run under `runs/<run-id>/` (spec text, catalog text, vars, options: `RunStore.freeze`) and writes
   the member list of every group compiled to a Distributed Map (`RunStore.put_group_members`);
2. records the RUN item (`DynamoLedger.put_run`, conditional: an existing run is never overwritten) with the digest
   of the definition it starts on (`protocol.definitions`), which pins a later resume to that definition;
3. calls StartExecution named `execution_name` (default: the run id) with `execution_input(...)`, and records the
   execution's ARN on the RUN item.

Every step is idempotent, so a duplicate event (S3 → EventBridge is at-least-once) or a retried invocation that
crashed half-way lands on the same run and the same execution: a run that already exists is not frozen again
(unless `refreeze=True`, the local runtime's `--resume`), and StartExecution with a name already used answers
with the running execution (same input) or `ExecutionAlreadyExists`, which here means "already started".

`run_id_for_object(bucket, key, version)`: the deterministic run id of one uploaded object version.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from npa_workflow.compile.asl import CompiledMachine, execution_input
from npa_workflow.engine.context import Engine
from npa_workflow.engine.ports import ExecutionAlreadyExists, Executions
from npa_workflow.engine.runs import RunOptions
from npa_workflow.ledger import RunRecord, RunStatus
from npa_workflow.protocol.definitions import definition_digest
from npa_workflow.protocol.run_ids import check_run_id
from npa_workflow.spec.validate import LoadedSpec

_STEM_CHARS = re.compile(r"[^A-Za-z0-9-]+")
STEM_MAX = 40
HASH_HEX = 12


@dataclass(frozen=True)
class StartedRun:
    run_id: str
    execution_name: str
    execution_arn: str
    already_started: bool  # True: the run was recorded and started before (a duplicate delivery): nothing new
    run_created: bool  # True: this call wrote the RUN item

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "execution_name": self.execution_name,
            "execution_arn": self.execution_arn,
            "already_started": self.already_started,
            "run_created": self.run_created,
        }


def run_id_for_object(bucket: str, key: str, version_or_etag: str, name: str | None = None) -> str:
    """`<stem>-<12 hex>`: the stem is `name` (the spec's) or the key's file name, the hash is of the object version.

    The same object version always gives the same id; a new version or another key gives another. Valid as a
    run id (`protocol.run_ids`: at most 53 characters of `[A-Za-z0-9_-]`)."""
    digest = hashlib.sha256(f"{bucket}\n{key}\n{version_or_etag}".encode()).hexdigest()[:HASH_HEX]
    base = name or key.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    stem = _STEM_CHARS.sub("-", base).strip("-")[:STEM_MAX].strip("-") or "run"
    return f"{stem}-{digest}"


def start_run(
    engine: Engine,
    executions: Executions,
    *,
    machine_arn: str,
    compiled: CompiledMachine,
    loaded: LoadedSpec,
    spec_text: str,
    catalog_text: str,
    run_id: str,
    variables: Mapping[str, str],
    options: RunOptions,
    execution_name: str | None = None,
    record_options: Mapping[str, Any] | None = None,
    refreeze: bool = False,
) -> StartedRun:
    """Freeze, record and start one run (see the module docstring). `record_options`: what the RUN item keeps
    as the run's options (default `options.to_json()`); `refreeze`: write the frozen files even when the run
    already exists (a resumed local run picks up the spec and vars it is resumed with)."""
    check_run_id(run_id)  # the one rule (protocol.run_ids): every caller's run id, generated or given
    variables = {str(k): str(v) for k, v in variables.items()}
    name = execution_name or run_id
    existing = engine.ledger.get_run(run_id)
    run_created = False
    if existing is None or refreeze:
        engine.runs.freeze(run_id, spec_text, catalog_text, variables, options)
        for group in compiled.distributed_groups:
            engine.runs.put_group_members(run_id, compiled.group_keys[group], list(loaded.spec.states[group].parallel))
    if existing is None:
        run_created = engine.ledger.put_run(RunRecord(
            run_id=run_id,
            workflow=loaded.spec.name,
            spec_uri=engine.runs.uri(run_id, "spec.yaml"),
            options=dict(record_options) if record_options is not None else options.to_json(),
            definition_digest=definition_digest(compiled.definition),
        ))
        if not run_created:  # a concurrent delivery of the same object won the conditional write
            existing = engine.ledger.get_run(run_id)

    payload = execution_input(compiled, loaded, run_id=run_id, bucket=engine.runs.bucket,
                              max_wait_seconds=options.max_wait_seconds)  # this run's deadline ($.run.deadline)
    try:
        arn = executions.start(machine_arn, name, json.dumps(payload))
    except ExecutionAlreadyExists:
        return StartedRun(run_id, name, _execution_arn(machine_arn, name), True, run_created)
    # Same name and same input while the first runs: Step Functions returns the running execution, no error.
    # A run recorded before this call whose execution is this one (or not recorded yet: a concurrent delivery
    # of the same object) was already started; a run recorded with another execution is being resumed.
    already = existing is not None and existing.execution_arn in (None, arn)
    if existing is None or existing.execution_arn != arn:
        engine.ledger.update_run_status(run_id, RunStatus.RUNNING, execution_arn=arn)
    return StartedRun(run_id, name, arn, already, run_created)


def _execution_arn(machine_arn: str, name: str) -> str:
    """`arn:…:states:<region>:<account>:stateMachine:<machine>` → `…:execution:<machine>:<name>`."""
    head, sep, machine = machine_arn.rpartition(":stateMachine:")
    return f"{head}:execution:{machine}:{name}" if sep else ""

"""The machine↔engine contract (npa_workflow.protocol): the compiled machines, the handlers, the twin and the CDK
app agree on function slots, payload fields, error names, keys and run ids, and nothing else restates them."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from npa_workflow.compile.asl import compile_spec, execution_input
from npa_workflow.embedded_aws.moto_lambda import error_body
from npa_workflow.protocol import errors, functions, run_ids
from npa_workflow.protocol.execution import ExecutionInput, MapItem, run_id_of_input
from npa_workflow.protocol.keys import WaveKey, decode_loops, group_keys, loop_keys
from npa_workflow.protocol.payloads import (
    CleanupResult,
    CleanupTask,
    DecideResult,
    DecideTask,
    WaveTask,
    check_payload,
    payload_fields,
)
from npa_workflow.protocol.stack import deployable_spec_files
from npa_workflow.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
EXAMPLES = deployable_spec_files(SPECS)
MODEL_OF_SLOT = {"launch": WaveTask, "trigger": WaveTask, "decide": DecideTask, "cleanup": CleanupTask}


def _states(definition: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in definition["States"].items():
        yield name, state
        if "ItemProcessor" in state:
            yield from _states(state["ItemProcessor"])


def _compiled(path: Path) -> tuple[Any, Any]:
    loaded = load_spec(path)
    return loaded, compile_spec(loaded)


def test_the_examples_are_what_a_stack_deploys() -> None:
    names = sorted(p.name for p in EXAMPLES)
    assert names == ["fanout.yaml", "gate-loop.yaml", "sweep.yaml", "trigger.yaml"]  # not tools.yaml (a catalog)


def test_deployable_specs_include_yml_and_skip_catalogs_and_other_documents(tmp_path: Path) -> None:
    spec = (SPECS / "fanout.yaml").read_text(encoding="utf-8")
    (tmp_path / "a.yaml").write_text(spec, encoding="utf-8")
    (tmp_path / "b.yml").write_text(spec, encoding="utf-8")
    (tmp_path / "tools.yaml").write_text("apiVersion: npa.workflow.tools/v1\ntools: {}\n", encoding="utf-8")
    (tmp_path / "notes.yaml").write_text("just: data\n", encoding="utf-8")
    (tmp_path / "broken.yaml").write_text("a: [\n", encoding="utf-8")  # kept: deploying it says why it fails
    (tmp_path / "readme.md").write_text("apiVersion: npa.workflow/v0.0.1\n", encoding="utf-8")
    assert [p.name for p in deployable_spec_files(tmp_path)] == ["a.yaml", "b.yml", "broken.yaml"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_task_of_a_compiled_example_invokes_a_slot_of_the_table_with_its_models_fields(path: Path) -> None:
    _, machine = _compiled(path)
    placeholders = {f.placeholder: f for f in functions.MACHINE_INVOKED}
    tasks = [(n, s) for n, s in _states(machine.definition) if s["Type"] == "Task"]
    assert tasks
    for name, task in tasks:
        params = task["Parameters"]
        slot = placeholders.get(params["FunctionName"])
        assert slot is not None, f"{name}: FunctionName {params['FunctionName']!r} is no slot of the table"
        model = MODEL_OF_SLOT[slot.name]
        sent = payload_fields(params["Payload"])
        required = {n for n, f in model.model_fields.items() if f.is_required()}
        assert required <= sent <= set(model.model_fields), (name, sent)
        assert ("waitForTaskToken" in task["Resource"]) == ("token" in sent), name


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_a_maps_item_is_the_map_item_model_and_the_input_is_the_execution_input_model(path: Path) -> None:
    loaded, machine = _compiled(path)
    for _, state in _states(machine.definition):
        if state["Type"] == "Map":
            assert payload_fields(state["ItemSelector"]) == set(MapItem.model_fields)
    doc = execution_input(machine, loaded, run_id="r-1", bucket="b")
    assert ExecutionInput.model_validate(doc).model_dump() == doc
    assert set(doc["loops"]) == set(loop_keys(loaded.spec).values())
    assert set(doc["groups"]) == set(group_keys(loaded.spec).values())


def test_a_payload_with_a_field_its_model_lacks_or_without_a_required_field_fails_the_check() -> None:
    good = {"run_id.$": "$.run.run_id", "state": "s", "token.$": "$$.Task.Token"}
    assert check_payload(WaveTask, good) is good
    with pytest.raises(ValueError, match="WaveTask has no field"):
        check_payload(WaveTask, {**good, "run.$": "$.run"})
    with pytest.raises(ValueError, match="lacks required field.*token"):
        check_payload(WaveTask, {"run_id.$": "$.run.run_id", "state": "s"})


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_what_the_machine_reads_from_a_result_is_a_field_of_the_result_model(path: Path) -> None:
    _, machine = _compiled(path)
    models = {functions.DECIDE.placeholder: DecideResult, functions.CLEANUP.placeholder: CleanupResult}
    for name, state in _states(machine.definition):
        selector = state.get("ResultSelector")
        if state["Type"] != "Task" or selector is None:
            continue
        model = models[state["Parameters"]["FunctionName"]]
        for read in selector.values():
            assert read.startswith("$.Payload.") and read.removeprefix("$.Payload.") in model.model_fields, name


def test_a_task_model_refuses_an_unknown_field() -> None:
    with pytest.raises(ValueError, match="extra"):
        DecideTask.model_validate({"run_id": "r", "state": "s", "purpose": "loop", "curent": "x"})


def test_every_handler_path_of_the_table_imports_and_has_its_handler() -> None:
    on_disk = {p.parent.name for p in (ROOT / "functions").glob("*/handler.py")}
    assert on_disk == set(functions.NAMES)
    for fn in functions.FUNCTIONS:
        module_name, _, attr = fn.handler.rpartition(".")
        assert callable(getattr(importlib.import_module(module_name), attr)), fn.handler
        assert 1 <= fn.timeout_seconds <= 900 and 128 <= fn.memory_mb <= 10240  # Lambda's limits


def test_substitute_replaces_every_placeholder_and_needs_every_machine_function() -> None:
    _, machine = _compiled(SPECS / "gate-loop.yaml")
    arns = {f.name: f"arn:aws:lambda:us-east-1:1:function:{f.name}" for f in functions.MACHINE_INVOKED}
    text = functions.substitute(machine.definition, arns)
    assert "${" not in text and arns["launch"] in text and arns["decide"] in text
    assert functions.substitutions(arns) == {f.placeholder_name: arns[f.name] for f in functions.MACHINE_INVOKED}
    with pytest.raises(KeyError):
        functions.WATCH.placeholder  # noqa: B018 - a scheduled function has no placeholder


# -- error names -------------------------------------------------------------------------------------------
def test_a_lambda_error_is_named_after_its_class_in_the_twin_as_on_aws() -> None:
    """AWS fact: Lambda's Python runtime reports an unhandled exception with errorType = the exception class's
    __name__, and Step Functions names the Task's error after errorType. The twin (moto_lambda.error_body) names
    it the same way, so a Retry/Catch matches in both or in neither."""
    for cls in errors.LAMBDA_ERRORS:
        exc = cls("x")
        assert errors.lambda_error_type(exc) == cls.__name__ == cls.error_name()
        assert error_body(exc)["errorType"] == cls.__name__

    class Renamed(Exception):
        error_type = "Decision.Missing"  # AWS reads no attribute: this is still "Renamed"

    assert error_body(Renamed("x"))["errorType"] == "Renamed"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_machines_retry_and_catch_only_names_of_the_protocol(path: Path) -> None:
    """A Retry or Catch on a name nobody sends never fires: every matched name is one the engine sends
    (SendTaskFailure), the Lambda service's own, or States.ALL."""
    _, machine = _compiled(path)
    matched = {name for _, s in _states(machine.definition) for r in (*s.get("Retry", []), *s.get("Catch", []))
               for name in r["ErrorEquals"]}
    assert matched <= {*errors.WAVE_ERRORS, *errors.LAMBDA_SERVICE_ERRORS, errors.STATES_ALL}
    assert set(errors.LAMBDA_SERVICE_ERRORS) <= matched


# -- keys ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", [WaveKey("train"), WaveKey("train", {"outer": 1, "refine": 12}),
                                 WaveKey("a-b_c.d", {"x": 3})])
def test_a_wave_key_round_trips(key: WaveKey) -> None:
    assert WaveKey.parse(key.format()) == key
    assert WaveKey.parse(key.format(), state=key.state) == key
    assert hash(WaveKey.parse(key.format())) == hash(key)


def test_a_wave_key_has_its_counters_sorted_and_its_label() -> None:
    key = WaveKey("train", {"refine": 2, "outer": 1})
    assert key.format() == "train|outer=1,refine=2"
    assert key.label() == "train [outer=1,refine=2]"
    assert key.loops_key == "outer=1,refine=2"
    with pytest.raises(ValueError, match="is not <loop>=<iteration>"):
        WaveKey.parse("train|outer")


def test_loop_counters_decode_with_the_compilers_keys() -> None:
    loaded, machine = _compiled(SPECS / "gate-loop.yaml")
    assert machine.loop_keys == loop_keys(loaded.spec)
    (name, key), *_ = machine.loop_keys.items()
    assert decode_loops(loaded.spec, {key: 2, "l999": 1}) == {name: 2}
    assert decode_loops(loaded.spec, {key: 0}) == {}


# -- run ids -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("run_id", ["a", "run-1", "A_b-9", "x" * run_ids.RUN_ID_MAX])
def test_valid_run_ids(run_id: str) -> None:
    assert run_ids.check_run_id(run_id) == run_id


@pytest.mark.parametrize("run_id", ["", "-a", "_a", "a.b", "a b", "a/b", "é", "x" * (run_ids.RUN_ID_MAX + 1)])
def test_invalid_run_ids_are_refused_with_the_rule(run_id: str) -> None:
    with pytest.raises(run_ids.InvalidRunId, match="letters, digits"):
        run_ids.check_run_id(run_id)


def test_a_resumed_runs_execution_names_stay_within_awss_80_characters() -> None:
    longest = "x" * run_ids.RUN_ID_MAX
    assert run_ids.execution_name(longest) == longest
    last = run_ids.execution_name(longest, run_ids.RESUME_MAX)
    assert len(last) == run_ids.EXECUTION_NAME_MAX == 80
    assert run_ids.next_execution_name("r", "r") == "r-r2"
    assert run_ids.next_execution_name("r", "r-r2") == "r-r3"
    assert run_ids.resume_number("r", "other") == 0
    with pytest.raises(run_ids.InvalidRunId):
        run_ids.execution_name(longest, run_ids.RESUME_MAX + 1)


def test_the_run_id_in_an_execution_input() -> None:
    assert run_id_of_input('{"run": {"run_id": "r-1", "bucket": "b"}}') == "r-1"
    assert run_id_of_input("not json") is None
    assert run_id_of_input(None) is None


# -- nothing else spells the contract ------------------------------------------------------------------------
SPELLINGS = re.compile(
    r"\$\{[A-Za-z]+FunctionArn\}"  # an ARN placeholder
    r"|[\"'](?:Wave|Trigger|Run|Decision|Step)\.[A-Z][A-Za-z]+[\"']"  # a project error name
    r"|[\"']States\.(?:ALL|Timeout|HeartbeatTimeout|Runtime|TaskFailed|ExceedToleratedFailureThreshold)[\"']"
    r"|[\"'](?:Lambda\.[A-Za-z]+Exception|Sandbox\.Timedout)[\"']"
    r"|functions\.[a-z_{}]+\.handler\.handler"  # a handler path
    r"|[\"'][a-z]+\|[a-z]+=\d"  # a wave key built by hand
)


def test_no_module_outside_the_protocol_package_spells_a_slot_an_error_name_or_a_handler_path() -> None:
    offenders = []
    for folder in ("layers", "functions", "infra", "bench", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "protocol" in path.relative_to(ROOT).parts:
                continue
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if SPELLINGS.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert offenders == []


def test_the_engine_imports_no_aws_sdk() -> None:
    """The engine talks through its ports (engine.ports); only adapters import boto3/botocore."""
    import ast

    offenders = []
    for path in sorted((ROOT / "layers/engine/npa_workflow/engine").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("boto3", "botocore")]
    assert offenders == []


def _sdk_imports_at_module_level(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:  # module level only: a lazy import inside a function is the caller's choice
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
    return [n for n in names if n.split(".")[0] in ("boto3", "botocore")]


def _step_functions_calls(tree: ast.Module) -> list[str]:
    """Calls of a Step Functions API operation by its boto3 name (`describe_execution`, `stop_execution`, ...),
    every operation of botocore's own service model."""
    import botocore.session
    from botocore import xform_name

    model = botocore.session.get_session().get_service_model("stepfunctions")
    operations = {xform_name(name) for name in model.operation_names}
    return [f"line {node.lineno}: {node.func.attr}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in operations]


def test_the_engine_and_the_stack_client_reach_step_functions_only_through_the_executions_port() -> None:
    """`engine/` and `stack_client.py` call `Executions` (adapters.sfn_executions is the one that calls the SDK);
    neither imports the AWS SDK at module level."""
    package = ROOT / "layers/engine/npa_workflow"
    offenders = []
    for path in [*sorted((package / "engine").glob("*.py")), package / "stack_client.py"]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.name}: import {n}" for n in _sdk_imports_at_module_level(tree)]
        offenders += [f"{path.name}: {call}" for call in _step_functions_calls(tree)]
    assert offenders == []


def test_the_step_functions_scan_sees_a_raw_client_call() -> None:
    tree = ast.parse("import boto3\nsfn = boto3.client('stepfunctions')\nsfn.redrive_execution(executionArn='a')\n")
    assert _sdk_imports_at_module_level(tree) == ["boto3"]
    assert _step_functions_calls(tree) == ["line 3: redrive_execution"]


def test_a_ledger_wave_key_reads_back_through_the_report_and_the_cli() -> None:
    from npa_workflow.cli.run import _label
    from npa_workflow.ledger import WaveAttempt
    from npa_workflow.run_report import loop_counters

    key = WaveKey("train", {"refine": 2, "outer": 1})
    wave = WaveAttempt(run_id="r", wave_key=key.format(), state="train", attempt=1)
    assert loop_counters(wave) == {"outer": 1, "refine": 2}
    assert _label(wave) == "train [outer=1,refine=2]"


@pytest.mark.parametrize("command", ["run", "submit"])
def test_run_and_submit_refuse_the_same_run_id_with_the_same_line(command: str, tmp_path: Path) -> None:
    """`run --run-id a.b` used to be accepted while `submit --run-id a.b` was rejected by the inbox."""
    import os
    import subprocess
    import sys

    args = [str(Path(sys.executable).parent / "npa-workflow"), command, str(SPECS / "fanout.yaml"), "--run-id", "a.b"]
    if command == "submit":
        args += ["--endpoint", "http://127.0.0.1:9"]  # never reached: the id is checked first
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**os.environ, "NPA_WORKFLOW_HOME": str(tmp_path / "home")})
    assert out.returncode != 0
    assert run_ids.run_id_problem("a.b") in out.stderr

"""The engine layer and one function per handler."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from infra_support import ENDPOINT, SECRET_ARN, Synth

import infra.functions as functions_module
from infra.functions import (
    LAYER_PYTHON_VERSION,
    RUNTIME,
    layer_requirements,
    log_retention,
    project_layer_requirements,
    stage_handlers,
)
from npa_workflow.protocol import functions as function_table

EXPECTED_HANDLERS = ("inbox", "launch", "decide", "trigger", "watch", "cleanup", "reap")


def _functions(synth: Synth) -> dict[str, dict]:
    """name → properties, for every engine function."""
    by_name = {}
    for name, fn in synth.stack.engine.functions.items():
        by_name[name] = synth.template["Resources"][synth.logical_id(fn)]["Properties"]
    return by_name


def test_runtime_is_the_newest_python_the_library_offers() -> None:
    from aws_cdk import aws_lambda

    offered = [n for n in dir(aws_lambda.Runtime) if n.startswith("PYTHON_3_")]
    newest = max(offered, key=lambda n: int(n.rsplit("_", 1)[1]))
    assert RUNTIME.name == getattr(aws_lambda.Runtime, newest).name == f"python{LAYER_PYTHON_VERSION}"


def test_one_function_per_handler_with_the_functions_handler_string(default_synth: Synth) -> None:
    assert function_table.NAMES == EXPECTED_HANDLERS
    functions = _functions(default_synth)
    assert set(functions) == set(EXPECTED_HANDLERS)
    # Nothing else but the catalog deployment's handler (aws-cdk-lib's BucketDeployment, see catalog.py).
    others = set(default_synth.resources("AWS::Lambda::Function")) - {
        default_synth.logical_id(fn) for fn in default_synth.stack.engine.functions.values()
    }
    assert others == {default_synth.logical_id(default_synth.stack.catalog.handler)}
    for name, props in functions.items():
        assert props["Handler"] == f"functions.{name}.handler.handler"
        assert props["Runtime"] == RUNTIME.name
        assert props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["LoggingConfig"]["LogFormat"] == "JSON"


def test_every_handler_module_in_functions_has_a_function() -> None:
    from infra.functions import FUNCTIONS_SOURCE

    modules = {p.parent.name for p in FUNCTIONS_SOURCE.glob("*/handler.py")}
    assert modules == set(EXPECTED_HANDLERS)


def test_functions_share_the_engine_layer_and_one_code_asset(default_synth: Synth) -> None:
    layer_id = default_synth.logical_id(default_synth.stack.engine.layer)
    layer = default_synth.template["Resources"][layer_id]["Properties"]
    assert layer["CompatibleRuntimes"] == [RUNTIME.name]
    assert layer["CompatibleArchitectures"] == ["arm64"]
    functions = _functions(default_synth)
    assert all(props["Layers"] == [{"Ref": layer_id}] for props in functions.values())
    assert len({json.dumps(props["Code"], sort_keys=True) for props in functions.values()}) == 1


def test_each_function_has_its_own_role_and_log_group(default_synth: Synth) -> None:
    functions = _functions(default_synth)
    roles = {json.dumps(props["Role"]) for props in functions.values()}
    assert len(roles) == len(functions)
    log_groups = {json.dumps(props["LoggingConfig"]["LogGroup"]) for props in functions.values()}
    assert len(log_groups) == len(functions)
    for lid, role in default_synth.resources("AWS::IAM::Role").items():
        assert "ManagedPolicyArns" not in role["Properties"], f"{lid} uses a managed policy"


def test_environment_the_handlers_read(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    functions = _functions(default_synth)
    stack = default_synth.stack
    for name, props in functions.items():
        env = props["Environment"]["Variables"]
        assert env["NPA_WORKFLOW_LEDGER_TABLE"] == {"Ref": default_synth.logical_id(stack.storage.table)}
        assert env["NPA_WORKFLOW_BUCKET"] == {"Ref": default_synth.logical_id(stack.storage.bucket)}
        assert env["NPA_WORKFLOW_EXECUTOR"] == "skypilot"
        assert env["SKYPILOT_API_SERVER_ENDPOINT"] == ENDPOINT
        assert env["POWERTOOLS_SERVICE_NAME"] == f"npa-workflow-{name}"
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == "npa-workflow"
        assert env["PYDANTIC_DISABLE_PLUGINS"] == "__all__"
        if name in ("launch", "watch", "cleanup", "reap"):
            assert env["SKYPILOT_TOKEN_SECRET_ARN"] == {"Ref": default_synth.logical_id(stack.secret)}
        else:
            assert "SKYPILOT_TOKEN_SECRET_ARN" not in env
    inbox = functions["inbox"]["Environment"]["Variables"]
    assert inbox["NPA_WORKFLOW_ALLOW_AD_HOC"] == "false"
    # The deployed machines are in catalog/machines.json, not in the environment (Lambda's 4 KB limit).
    assert "NPA_WORKFLOW_STATE_MACHINES" not in inbox
    joined = inbox["NPA_WORKFLOW_MACHINE_ARN_PREFIX"]["Fn::Join"][1]
    text = "".join(part if isinstance(part, str) else "<" + part["Ref"] + ">" for part in joined)
    assert text == "arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:stateMachine:"

    ad_hoc = _functions(ad_hoc_synth)
    assert ad_hoc["inbox"]["Environment"]["Variables"]["NPA_WORKFLOW_ALLOW_AD_HOC"] == "true"
    assert ad_hoc["launch"]["Environment"]["Variables"]["SKYPILOT_TOKEN_SECRET_ARN"] == SECRET_ARN
    assert len(ad_hoc_synth.resources("AWS::SecretsManager::Secret")) == 0  # existing secret referenced
    assert len(default_synth.resources("AWS::SecretsManager::Secret")) == 1  # none given: created


def test_layer_requirements_are_the_projects_runtime_deps_without_cli_only_or_runtime_provided() -> None:
    names = {r.split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in project_layer_requirements()}
    assert names == {"pydantic", "pyyaml", "aws-lambda-powertools"}


def test_the_layer_installs_the_locks_exact_pins_inside_pyprojects_ranges() -> None:
    """Every distribution the layer ships is pinned `==` (transitive ones too: the bundler installs `--no-deps`),
    and each pin of a pyproject.toml dependency satisfies its range."""
    from packaging.requirements import Requirement

    from infra.layer_lock import canonical

    pins = {canonical(pin.split("==")[0]): pin.split("==")[1] for pin in layer_requirements()}
    assert all("==" in pin for pin in layer_requirements())
    for requirement in map(Requirement, project_layer_requirements()):
        assert requirement.specifier.contains(pins[canonical(requirement.name)], prereleases=True), requirement
    assert {"pydantic-core", "typing-extensions", "jmespath"} <= pins.keys()  # the transitive ones are pinned too


def test_a_lock_that_misses_a_dependency_or_is_not_exact_says_how_to_regenerate(tmp_path: Path) -> None:
    from infra.layer_lock import LockError

    lock = tmp_path / "requirements.lock"
    lock.write_text("# header\npydantic==2.11.0\npyyaml==6.0.2\n")
    with pytest.raises(LockError, match=r"pins nothing for aws-lambda-powertools.*fix: .*-m infra.layer_lock"):
        layer_requirements(lock)
    lock.write_text("pydantic>=2.7\n")
    with pytest.raises(LockError, match=r"requirements.lock:1: 'pydantic>=2.7' is not an exact pin"):
        layer_requirements(lock)


def _layer_asset_key(requirements: list[str]) -> str:
    import aws_cdk as cdk
    from aws_cdk import aws_lambda

    from infra.functions import engine_layer_code

    app = cdk.App(context={"aws:cdk:bundling-stacks": []})
    stack = cdk.Stack(app, "LayerHash")
    layer = aws_lambda.LayerVersion(stack, "Layer", code=engine_layer_code(requirements))
    return stack.resolve(layer.node.default_child.content)["s3Key"]


def test_changing_a_pinned_version_in_the_lock_changes_the_layers_asset_hash(tmp_path: Path) -> None:
    """`cdk deploy` uploads an asset only when its hash (the S3 key) is new: a dependency fix must change it."""
    lock = functions_module.LAYER_LOCK.read_text(encoding="utf-8")
    pydantic = next(line for line in lock.splitlines() if line.startswith("pydantic=="))
    bumped = tmp_path / "requirements.lock"
    bumped.write_text(lock.replace(pydantic, pydantic + ".post1"), encoding="utf-8")
    base = _layer_asset_key(layer_requirements())
    assert _layer_asset_key(layer_requirements(bumped)) != base
    assert _layer_asset_key(layer_requirements()) == base  # and the same lock, the same hash


def test_layer_asset_hash_changes_with_requirements_and_bundler_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local bundler is not part of CDK's asset hash: its inputs are, through the bundling environment."""
    base = _layer_asset_key(["pydantic>=2.7,<3"])
    assert _layer_asset_key(["pydantic>=2.7,<3"]) == base
    assert _layer_asset_key(["pydantic>=2.8,<3"]) != base
    for name, other in (("LAYER_BUNDLER_REVISION", "test-next"), ("LAYER_PLATFORM", "manylinux2014_x86_64")):
        with monkeypatch.context() as patch:
            patch.setattr(functions_module, name, other)
            assert _layer_asset_key(["pydantic>=2.7,<3"]) != base, name
    assert _layer_asset_key(["pydantic>=2.7,<3"]) == base
    # A host that can compile the layer's bytecode builds another layer than one that cannot.
    compiled = "/usr/bin/true" if functions_module.layer_compiler() is None else None
    with monkeypatch.context() as patch:
        patch.setattr(functions_module, "layer_compiler", lambda: compiled)
        assert _layer_asset_key(["pydantic>=2.7,<3"]) != base


def test_the_layer_is_compiled_to_unchecked_hash_bytecode(tmp_path: Path) -> None:
    package = tmp_path / "python" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    functions_module.compile_bytecode(tmp_path / "python", sys.executable)
    [pyc] = (package / "__pycache__").glob("__init__.*.pyc")
    assert pyc.name == f"__init__.{sys.implementation.cache_tag}.pyc"
    header = pyc.read_bytes()[:16]
    assert header[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(header[4:8], "little") == 0b01  # hash-based, not checked against the source


def test_a_layer_that_cannot_be_compiled_says_so(tmp_path: Path) -> None:
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "broken.py").write_text("def (:\n")
    with pytest.raises(RuntimeError, match="could not compile the layer"):
        functions_module.compile_bytecode(tmp_path / "python", sys.executable)


def test_the_layer_compiler_is_an_interpreter_of_the_layers_python(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    monkeypatch.setattr(functions_module.shutil, "which", lambda name: seen.append(name) or None)
    assert functions_module.layer_compiler() is None
    assert seen == [f"python{LAYER_PYTHON_VERSION}"]


def test_handler_asset_is_a_copy_of_the_functions_python_files_only(tmp_path: Path) -> None:
    src = tmp_path / "functions"
    (src / "launch" / "__pycache__").mkdir(parents=True)
    (src / "launch" / "handler.py").write_text("def handler(e, c): ...\n")
    (src / "launch" / "__pycache__" / "handler.cpython-311.pyc").write_bytes(b"x")
    (src / "launch" / "notes.md").write_text("not code")
    staged = stage_handlers(src)
    files = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
    assert files == ["functions/__init__.py", "functions/launch/handler.py"]


@pytest.mark.parametrize(
    ("days", "expected"), [(1, "ONE_DAY"), (30, "ONE_MONTH"), (31, "TWO_MONTHS"), (9999, "TEN_YEARS")]
)
def test_log_retention_keeps_at_least_the_retention_days(days: int, expected: str) -> None:
    assert log_retention(days).name == expected


def test_a_failed_layer_build_says_what_pip_said_without_a_traceback(tmp_path: Path) -> None:
    import os
    import subprocess

    from infra_support import REPO_ROOT

    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "empty-wheelhouse"),
           "CDK_OUTDIR": str(tmp_path / "out"), "CDK_VALIDATION": "false"}
    result = subprocess.run([sys.executable, str(REPO_ROOT / "infra" / "app.py")], capture_output=True, text=True,
                            env=env, cwd=REPO_ROOT, timeout=300, check=False)
    assert result.returncode == 1
    assert "error: building the engine layer failed: pip could not install" in result.stderr
    assert "No matching distribution" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_watch_knows_the_compiled_heartbeat(default_synth: Synth) -> None:
    """engine/watch.py heartbeats a token every 40 % of HeartbeatSeconds (not every tick) when it is told it."""
    [watch] = [r for r in default_synth.resources("AWS::Lambda::Function").values()
               if r["Properties"]["Environment"]["Variables"].get("POWERTOOLS_SERVICE_NAME") == "npa-workflow-watch"]
    beat = watch["Properties"]["Environment"]["Variables"]["NPA_WORKFLOW_HEARTBEAT_SECONDS"]
    assert beat == str(default_synth.stack.compile_options.heartbeat_seconds)


def test_the_launch_timeout_holds_its_call_budget_and_the_exchange_in_flight(
    default_synth: Synth, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11 item 5: the launch ran 60 s while its SkyPilot calls could wait 90 s + a 30 s retry window; Lambda kills
    a function at its timeout mid-call, leaving the attempt LAUNCHING. The deployed timeout is the calls' budget plus
    a margin that holds the one exchange in flight (SkyPilotApi's connect + read timeouts) and the ledger write, and
    the handler, given that timeout, opens exactly that budget."""
    import inspect

    from functions.launch import handler as launch_handler
    from npa_workflow.adapters.skypilot_api import SkyPilotApi
    from npa_workflow.engine import budget
    from npa_workflow.engine import launch as engine_launch
    from npa_workflow.protocol import functions as table

    timeout = _functions(default_synth)["launch"]["Timeout"]
    assert timeout >= table.LAUNCH_CALL_BUDGET_SECONDS + table.LAUNCH_MARGIN_SECONDS
    client = inspect.signature(SkyPilotApi).parameters
    in_flight = client["connect_timeout"].default + client["read_timeout"].default
    assert table.LAUNCH_MARGIN_SECONDS > in_flight  # and a few seconds for the ledger write
    assert timeout <= 900  # Lambda's maximum

    opened: list[float | None] = []

    class Context:  # what Lambda gives a handler, at the start of an invocation of the deployed function
        function_name, memory_limit_in_mb, aws_request_id = "launch", 512, "req-1"
        invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:launch"

        def get_remaining_time_in_millis(self) -> int:
            return timeout * 1000

    monkeypatch.setattr(launch_handler, "engine_from_environment", lambda: None)
    monkeypatch.setattr(engine_launch, "launch", lambda engine, request: opened.append(budget.remaining()) or {})
    launch_handler.handler({"run_id": "r-1", "state": "train", "token": "t"}, Context())
    [left] = opened
    assert left is not None and table.LAUNCH_CALL_BUDGET_SECONDS - 1 < left <= table.LAUNCH_CALL_BUDGET_SECONDS


def test_the_control_functions_reserve_concurrency_a_launch_fan_out_cannot_take(default_synth: Synth) -> None:
    """Lambda: ReservedConcurrentExecutions both guarantees and caps a function's concurrency, and an account (1,000
    by default) keeps at least 100 unreserved. A 10,000-member Distributed Map's launches take the unreserved pool;
    the control functions keep theirs, and launch still has most of the account."""
    from npa_workflow.protocol import functions as table

    functions = _functions(default_synth)
    for slot in table.FUNCTIONS:
        assert functions[slot.name].get("ReservedConcurrentExecutions") == slot.reserved_concurrency, slot.name
    assert "ReservedConcurrentExecutions" not in functions["launch"]  # the fan-out shares the unreserved pool
    for name in ("inbox", "decide", "trigger", "cleanup", "reap"):
        assert functions[name]["ReservedConcurrentExecutions"] >= 1, name
    reserved = sum(slot.reserved_concurrency or 0 for slot in table.FUNCTIONS)
    assert table.ACCOUNT_CONCURRENCY - reserved >= table.MIN_UNRESERVED_CONCURRENCY
    assert table.ACCOUNT_CONCURRENCY - reserved >= 900  # launch keeps nine tenths of a default account

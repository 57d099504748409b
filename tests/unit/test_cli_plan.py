"""The `validate`, `plan` and `schema` commands: exit codes, stderr lines, JSON contracts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_workflow.cli.app import app

HEADER = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: demo}
"""

VALID = HEADER + """\
config: {mc: "2", who: world}
initial: prep
states:
  prep: {run: {shell: "hello {{config.who}}"}, next: fan}
  fan: {parallel: [a, b, c], maxConcurrency: config.mc, next: route}
  a: {run: {shell: a}, outputs: [{uri: "s3://bk/{{run.id}}/a", schema: r}]}
  b: {run: {shell: b}}
  c: {run: {shell: c}}
  route:
    run: {shell: r}
    transitions:
      - {when: promote_checkpoint, goto: publish}
      - {when: loop_back, goto: escalate}
    next: escalate
  publish: {run: {shell: p}, terminal: true}
  escalate: {run: {shell: e}, terminal: true}
"""

INVALID = HEADER + """\
states:
  a: {run: {shell: "x {{config.missing}}"}, next: nowhere}
  b: {parallel: [ghost]}
"""

WARNING_ONLY = HEADER + """\
states:
  a: {run: {shell: a}, terminal: true, trasitions: []}
"""

PLAN_TIME_ERROR = HEADER + """\
states:
  use: {run: {shell: "{{state.make.uri}}"}, next: make}
  make: {run: {shell: m}, outputs: [{uri: "s3://bk/x", schema: s}], terminal: true}
"""

PROBLEM_LINE = re.compile(r"^(?P<file>[^:]+\.yaml): (?P<path>[^ ]+): (?P<message>.+)$")


@pytest.fixture
def runner() -> CliRunner:
    # A catalog named by the environment would change which toolRefs are known.
    return CliRunner(env={"NPA_WORKFLOW_CATALOG": None})


@pytest.fixture
def write(tmp_path: Path):
    def run(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return str(path)

    return run


def invoke(runner: CliRunner, *args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


# --- validate -------------------------------------------------------------------------------------


def test_validate_valid_spec_exits_0(runner, write):
    path = write("ok.yaml", VALID)
    result = invoke(runner, "validate", path)
    assert result.exit_code == 0, result.stderr
    assert "valid" in result.stdout
    assert result.stderr == ""


def test_validate_invalid_spec_exits_1_with_one_line_per_error(runner, write):
    path = write("bad.yaml", INVALID)
    result = invoke(runner, "validate", path)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) >= 3
    for line in lines:
        match = PROBLEM_LINE.match(line)
        assert match, line
        assert match["file"] == path
    paths = {PROBLEM_LINE.match(line)["path"] for line in lines}
    assert {"states.a.next", "states.b.parallel[0]", "states.a.run.shell"} <= paths


def test_validate_reports_every_spec(runner, write):
    good, bad = write("ok.yaml", VALID), write("bad.yaml", INVALID)
    result = invoke(runner, "validate", good, bad)
    assert result.exit_code == 1
    assert all(line.startswith(bad) for line in result.stderr.splitlines())


def test_validate_json(runner, write):
    good, bad = write("ok.yaml", VALID), write("bad.yaml", INVALID)
    result = invoke(runner, "validate", "--json", good, bad)
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["valid"] is False
    assert [s["valid"] for s in doc["specs"]] == [True, False]
    assert all(p["file"] == bad for p in doc["specs"][1]["problems"])


def test_validate_missing_file_exits_1(runner, tmp_path):
    result = invoke(runner, "validate", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 1
    assert "file not found" in result.stderr


def test_unknown_key_fails_unless_allowed_and_strict_fails_again(runner, write):
    path = write("warn.yaml", WARNING_ONLY)
    default = invoke(runner, "validate", path)
    assert default.exit_code == 1
    assert "did you mean 'transitions'?" in default.stderr
    result = invoke(runner, "validate", "--allow-unknown-keys", path)
    assert result.exit_code == 0
    assert "trasitions" in result.stderr
    assert "[warning]" in result.stderr
    strict = invoke(runner, "validate", "--strict", "--allow-unknown-keys", path)
    assert strict.exit_code == 1
    assert "trasitions" in strict.stderr
    assert PROBLEM_LINE.match(strict.stderr.splitlines()[0])


def test_validate_var_override_is_revalidated(runner, write):
    path = write("ok.yaml", VALID)
    assert invoke(runner, "validate", path, "--var", "mc=3").exit_code == 0
    result = invoke(runner, "validate", path, "--var", "mc=zero")
    assert result.exit_code == 1
    assert "states.fan.maxConcurrency" in result.stderr


@pytest.mark.parametrize("bad", ["novalue", "=x", " =x"])
def test_bad_var_is_a_usage_error(runner, write, bad):
    path = write("ok.yaml", VALID)
    assert invoke(runner, "validate", path, "--var", bad).exit_code == 2
    assert invoke(runner, "plan", path, "--var", bad).exit_code == 2


# --- plan -----------------------------------------------------------------------------------------


def test_plan_json_contract(runner, write):
    path = write("ok.yaml", VALID)
    result = invoke(runner, "plan", path, "--json", "--run-id", "r1")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert list(doc) == ["workflow", "api_version", "initial", "assume_decision", "steps"]
    assert doc["workflow"] == "demo"
    assert doc["initial"] == "prep"
    assert doc["assume_decision"] == "loop_back_to_inner_loop"
    assert [s["state"] for s in doc["steps"]] == ["prep", "a", "b", "c", "route", "escalate"]
    for step in doc["steps"]:
        assert set(step) == {
            "state", "iteration", "loop_label", "argv", "shell", "tool_ref", "resources",
            "resources_profile", "outputs", "inputs", "group", "loop", "round",
        }
    assert doc["steps"][0]["shell"] == "hello world"
    assert doc["steps"][1]["outputs"] == [{"uri": "s3://bk/r1/a", "schema": "r"}]


def test_plan_assume_and_var(runner, write):
    path = write("ok.yaml", VALID)
    result = invoke(runner, "plan", path, "--json", "--assume-decision", "promote", "--var", "who=you")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["assume_decision"] == "promote_checkpoint"
    assert doc["steps"][-1]["state"] == "publish"
    assert doc["steps"][0]["shell"] == "hello you"


def test_plan_default_run_id(runner, write):
    path = write("ok.yaml", VALID)
    doc = json.loads(invoke(runner, "plan", path, "--json").stdout)
    assert doc["steps"][1]["outputs"][0]["uri"] == "s3://bk/demo-plan/a"


def test_plan_bad_assume_decision_is_a_usage_error(runner, write):
    path = write("ok.yaml", VALID)
    result = invoke(runner, "plan", path, "--assume-decision", "maybe")
    assert result.exit_code == 2
    assert "assume-decision" in result.stderr


def test_plan_negative_max_concurrency_is_a_usage_error(runner, write):
    path = write("ok.yaml", VALID)
    assert invoke(runner, "plan", path, "--waves", "--max-concurrency", "-1").exit_code == 2


def test_plan_invalid_spec_exits_1(runner, write):
    path = write("bad.yaml", INVALID)
    result = invoke(runner, "plan", path, "--json")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert all(PROBLEM_LINE.match(line) for line in result.stderr.splitlines())


def test_plan_time_error_exits_1_naming_the_state(runner, write):
    path = write("late.yaml", PLAN_TIME_ERROR)
    assert invoke(runner, "validate", path).exit_code == 0  # tolerated at validation
    result = invoke(runner, "plan", path, "--json")
    assert result.exit_code == 1
    line = result.stderr.strip()
    match = PROBLEM_LINE.match(line)
    assert match, line
    assert match["path"] == "states.use"
    assert "state.make.uri" in match["message"]


def test_plan_shows_warnings_on_stderr_and_plans(runner, write):
    path = write("warn.yaml", WARNING_ONLY)
    assert invoke(runner, "plan", path, "--json").exit_code == 1
    result = invoke(runner, "plan", path, "--json", "--allow-unknown-keys")
    assert result.exit_code == 0
    assert "trasitions" in result.stderr
    assert json.loads(result.stdout)["steps"][0]["state"] == "a"


def test_plan_table(runner, write):
    path = write("ok.yaml", VALID)
    result = invoke(runner, "plan", path)
    assert result.exit_code == 0
    assert "escalate" in result.stdout


def test_waves_json_contract(runner, write):
    path = write("ok.yaml", VALID)
    result = invoke(runner, "plan", path, "--waves", "--json", "--run-id", "r2")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert list(doc) == ["workflow", "run_id", "assume_decision", "wave_count", "parallel_waves", "waves"]
    assert doc["run_id"] == "r2"
    assert doc["wave_count"] == 4
    assert doc["parallel_waves"] == 1
    for wave in doc["waves"]:
        assert list(wave) == ["index", "kind", "group", "name", "max_concurrency", "batches", "steps"]
    fan = doc["waves"][1]
    assert (fan["kind"], fan["name"], fan["max_concurrency"], fan["batches"]) == ("parallel", "fan", 2, 2)
    assert fan["steps"][0] == {
        "state": "a", "iteration": None, "tool_ref": "", "resources": "default", "outputs": ["s3://bk/r2/a"],
        "round": None,
    }


def test_waves_cap(runner, write):
    path = write("ok.yaml", VALID)
    doc = json.loads(invoke(runner, "plan", path, "--waves", "--json", "--max-concurrency", "1").stdout)
    assert (doc["waves"][1]["max_concurrency"], doc["waves"][1]["batches"]) == (1, 3)
    doc = json.loads(invoke(runner, "plan", path, "--waves", "--json", "--max-concurrency", "9").stdout)
    assert (doc["waves"][1]["max_concurrency"], doc["waves"][1]["batches"]) == (2, 2)


def test_waves_table(runner, write):
    path = write("ok.yaml", VALID)
    result = invoke(runner, "plan", path, "--waves")
    assert result.exit_code == 0
    assert "parallel" in result.stdout


def test_catalog_option(runner, write):
    catalog = write("cat.yaml", """\
        apiVersion: npa.workflow.tools/v1
        tools:
          demo.echo: {argv: [echo, "{{config.msg}}"]}
        """)
    spec = write("tool.yaml", HEADER + """\
config: {msg: hi}
states:
  a: {toolRef: demo.echo, terminal: true}
""")
    result = invoke(runner, "plan", spec, "--json", "--catalog", catalog)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["steps"][0]["argv"] == ["echo", "hi"]
    missing = invoke(runner, "validate", spec)  # no tools.yaml beside it, no --catalog
    assert missing.exit_code == 1
    assert "states.a.toolRef" in missing.stderr


# --- schema ---------------------------------------------------------------------------------------


def test_schema_is_json_with_spec_properties(runner):
    result = invoke(runner, "schema")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert {"apiVersion", "states"} <= set(doc["properties"])


def test_schema_flags_what_validate_rejects_and_accepts_every_example():
    import jsonschema
    import yaml

    from npa_workflow.spec.schema import spec_json_schema

    schema = spec_json_schema()
    state = schema["$defs"]["State"]
    assert state["additionalProperties"] is False and {"toolRef", "tool_ref"} <= set(state["properties"])
    assert all(p.get("description") for p in state["properties"].values())
    specs = Path(__file__).resolve().parents[2] / "specs"
    for path in sorted(specs.glob("*.yaml")):
        if path.name != "tools.yaml":
            jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    typo = yaml.safe_load((specs / "fanout.yaml").read_text())
    typo["states"]["prepare"]["toolRf"] = typo["states"]["prepare"].pop("toolRef")
    with pytest.raises(jsonschema.ValidationError, match="toolRf"):
        jsonschema.validate(typo, schema)


def test_no_arguments_shows_help(runner):
    result = runner.invoke(app, [])
    assert result.exit_code in (0, 2)
    assert "plan" in result.output


def test_version_and_short_help(runner):
    from importlib.metadata import version

    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.output.strip() == f"npa-workflow {version('npa-workflow')}"
    for argv in (["-h"], ["validate", "-h"], ["jobs", "-h"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == 0, (argv, result.output)
        assert result.output.startswith("Usage: "), argv


def test_help_at_80_columns_keeps_every_option_name_whole():
    env = {**os.environ, "COLUMNS": "80"}
    done = subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "run", "--help"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert "--retry-interval-seconds" in done.stdout and "--max-infrastructure-recoveries" in done.stdout
    assert "…" not in done.stdout


# --- the installed console script -----------------------------------------------------------------

SCRIPT = Path(sys.executable).parent / "npa-workflow"


@pytest.mark.skipif(not SCRIPT.exists(), reason="console script not installed in this environment")
def test_console_script_exit_codes(write):
    env = {k: v for k, v in os.environ.items() if k != "NPA_WORKFLOW_CATALOG"}
    ok, bad = write("ok.yaml", VALID), write("bad.yaml", INVALID)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)

    planned = run("plan", ok, "--waves", "--json")
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["wave_count"] == 4
    invalid = run("validate", bad)
    assert invalid.returncode == 1
    assert all(PROBLEM_LINE.match(line) for line in invalid.stderr.splitlines())
    assert run("plan", ok, "--var", "oops").returncode == 2


def _modules_after(*argv: str) -> set[str]:
    """The top-level packages and npa_workflow.cli modules a CLI process has imported when it exits."""
    code = ("import sys, atexit; sys.argv = ['npa-workflow', *sys.argv[1:]]; "
            "atexit.register(lambda: sys.__stderr__.write('MODULES ' + ' '.join(sorted("
            "{m.split('.')[0] for m in sys.modules} | {m for m in sys.modules if m.startswith('npa_workflow.cli.')}"
            ")) + '\\n')); "
            "from npa_workflow.cli.app import main; main()")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60)
    [line] = [line for line in done.stderr.splitlines() if line.startswith("MODULES ")]
    return set(line.split()[1:])


def test_help_starts_without_the_spec_stack_or_aws_clients():
    loaded = _modules_after("--help")
    assert loaded & {"pydantic", "yaml", "boto3", "botocore", "moto"} == set()


def test_validate_loads_its_own_command_only(write):
    # Start-up (bench/cli_startup.py): `validate` builds one command, imports no table renderer, no AWS
    # client and none of the run/stack/log commands.
    loaded = _modules_after("validate", write("ok.yaml", VALID))
    assert "npa_workflow.cli.spec_commands" in loaded and "yaml" in loaded
    assert loaded & {"rich", "boto3", "botocore", "moto"} == set()
    assert {m for m in loaded if m.startswith("npa_workflow.cli.")} <= {
        "npa_workflow.cli.app", "npa_workflow.cli.spec_commands", "npa_workflow.cli.common", "npa_workflow.cli.cost",
        "npa_workflow.cli.output"}


def test_one_command_app_parses_as_the_whole_tree(write):
    # main() builds only the command asked for; it must still read `validate X` as the command and its spec.
    ok = write("ok.yaml", VALID)
    done = subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "validate", ok],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"✓ {ok}: valid"
    typo = subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "valdate", ok],
                          capture_output=True, text=True, timeout=60)
    assert typo.returncode == 2 and "Did you mean 'validate'" in typo.stderr


def test_png_to_a_terminal_is_a_usage_error(monkeypatch, runner):
    import types

    import npa_workflow.cli.graph as graph_cli

    tty = types.SimpleNamespace(isatty=lambda: True)
    monkeypatch.setattr(graph_cli, "sys", types.SimpleNamespace(stdout=tty, stderr=sys.stderr))
    result = invoke(runner, "graph", str(Path(__file__).resolve().parents[2] / "specs" / "fanout.yaml"),
                    "--format", "png")
    assert result.exit_code == 2
    assert "--out FILE.png" in result.output

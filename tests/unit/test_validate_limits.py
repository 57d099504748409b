"""`validate` runs every limit `compile`, the inbox and the synth enforce, with their message and fix (issue 17
item 6), and `compile` reports them as one line each instead of a traceback. The AWS limits: a Standard execution
fails at 25,000 history events; a state machine definition is at most 1 MiB; a Distributed Map runs at most 10,000
child executions at once (MaxConcurrency)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_compile_asl import HEAD
from test_compile_cloud import chain
from test_history_estimate import GATE, group
from typer.testing import CliRunner

from npa_workflow.cli.app import app
from npa_workflow.compile.asl import compile_spec
from npa_workflow.errors import SpecError
from npa_workflow.spec.load import load_spec_text

g, body = group(1)
HISTORY = (f"states:\n  refine: {{sequence: [g, gate], loop: {{max: 1100, until: promote_checkpoint}}, "
           f"terminal: true}}\n  {g}\n{body}{GATE}")
SIZE = chain(600)


def _compile_problem(text: str) -> dict[str, str]:
    loaded = load_spec_text(HEAD + text)  # valid in the language: only the compile refuses it
    with pytest.raises(SpecError) as info:
        compile_spec(loaded)
    [problem] = info.value.problems
    return {"path": problem.path, "message": problem.message, "hint": problem.hint}


# Map concurrency goes through the same compile as the size (compile/limits.py, for a group of more than 10,000
# members: the language caps an explicit maxConcurrency at 64); a spec that big takes the loader most of a minute on
# a busy machine, so it is not repeated here (test_compile_cloud.py compiles a 10,000-member group).
@pytest.mark.parametrize("text", [HISTORY, SIZE], ids=["history", "size"])
def test_validate_refuses_what_compile_refuses_with_the_same_message_and_fix(tmp_path: Path, text: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(HEAD + text)
    result = CliRunner().invoke(app, ["validate", str(spec), "--json"])
    assert result.exit_code == 1, result.output
    [doc] = json.loads(result.output)["specs"]
    assert not doc["valid"]
    expected = _compile_problem(text)
    assert [{k: p[k] for k in ("path", "message", "hint")} for p in doc["problems"]] == [expected]
    assert doc["problems"][0]["file"] == str(spec)


@pytest.mark.parametrize("text", [HISTORY, SIZE], ids=["history", "size"])
def test_compile_prints_one_line_per_limit_and_no_traceback(tmp_path: Path, text: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(HEAD + text)
    result = CliRunner().invoke(app, ["compile", str(spec)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert " ".join(_compile_problem(text)["message"].split()[:6]) in " ".join(result.output.split())


def test_a_spec_over_two_limits_gets_both_at_once(tmp_path: Path) -> None:
    """The history check comes before the compile: validate compiles again without it to report the rest."""
    text = (f"states:\n  refine: {{sequence: [g, gate], loop: {{max: 1100, until: promote_checkpoint}}, next: s0}}\n"
            f"  {g}\n{body}{GATE}" + SIZE.removeprefix("states:\n"))
    spec = tmp_path / "spec.yaml"
    spec.write_text(HEAD + text)
    result = CliRunner().invoke(app, ["validate", str(spec), "--json"])
    [doc] = json.loads(result.output)["specs"]
    problems = {p["path"]: p["message"] for p in doc["problems"]}
    assert set(problems) == {"states", "states.refine.loop.max"}, doc
    assert "history events" in problems["states.refine.loop.max"] and "1,048,576" in problems["states"]


def test_a_valid_spec_stays_valid(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(HEAD + chain(3))
    assert CliRunner().invoke(app, ["validate", str(spec)]).exit_code == 0


def test_below_the_size_gate_a_definition_is_far_from_one_mib():
    """compile/limits.py skips the compile (the size and concurrency checks) for a spec of fewer than
    SIZE_CHECK_MIN_STATES states and no group above 10,000 members: even with 80-character state names and the
    largest retry budgets such a spec compiles to under half of Step Functions' 1 MiB."""
    from npa_workflow.compile.asl import CompileOptions
    from npa_workflow.compile.limits import SIZE_CHECK_MIN_STATES
    from npa_workflow.compile.size import MAX_DEFINITION_BYTES, deployed_definition_bytes, serialize_definition

    name = "s{:03d}" + "x" * 76  # 80 characters, the longest ASL state name
    loaded = load_spec_text(HEAD + chain(SIZE_CHECK_MIN_STATES - 1, name))
    machine = compile_spec(loaded, CompileOptions(retries=20, max_infrastructure_recoveries=5))
    assert deployed_definition_bytes(serialize_definition(machine.definition)) < MAX_DEFINITION_BYTES / 2

"""Smaller message fixes of issue 21: each mistake said once, at the file and place to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_workflow.errors import SpecError
from npa_workflow.spec.load import load_spec, load_spec_text

HEADER = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: w}\n"


def problems(text: str, **kwargs) -> list[tuple[str, str, str, str]]:
    with pytest.raises(SpecError) as raised:
        load_spec_text(text, file="spec.yaml", **kwargs)
    return [(p.file, p.path, p.message, p.hint) for p in raised.value.problems]


def test_a_skypilot_task_is_said_to_be_one_in_one_line() -> None:
    [(_, path, message, hint)] = problems("name: train\nresources: {accelerators: H100:1}\nsetup: pip install x\n"
                                          "run: python train.py\n")
    assert (path, message) == ("$", "this is a SkyPilot task, not a workflow spec")
    assert "npa-workflow render SPEC" in hint


def test_no_catalog_is_said_once_whatever_the_number_of_tool_refs() -> None:
    states = "".join(f"  s{i}: {{toolRef: team.step{i}, next: s{i + 1}}}\n" for i in range(5))
    found = problems(HEADER + "initial: s0\nstates:\n" + states + "  s5: {run: {shell: x}, terminal: true}\n")
    assert len(found) == 5  # each unknown toolRef still names its state
    assert sum("no tool catalog was loaded: pass --catalog" in hint for *_, hint in found) == 1


def test_a_var_that_made_a_field_invalid_is_named_as_the_fix() -> None:
    text = (HEADER + "config: {fit_concurrency: '3'}\nstates:\n"
            "  g: {parallel: [a, b], maxConcurrency: '{{config.fit_concurrency}}', terminal: true}\n"
            "  a: {run: {shell: x}}\n  b: {run: {shell: x}}\n")
    [(_, path, message, hint)] = problems(text, overrides={"fit_concurrency": "0"})
    assert path == "states.g.maxConcurrency" and "(from --var fit_concurrency=0)" in message
    assert hint.startswith("change --var fit_concurrency=0")


def test_a_broken_catalog_does_not_hide_the_specs_errors_and_its_tokens_are_its_own(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(HEADER + "states:\n  a: {toolRef: t.fit, next: nowhere}\n  b: {toolRef: t.fit, terminal: true}\n")
    catalog = "apiVersion: npa.workflow.tools/v1\ntools:\n  t.fit: {argv: [fit], imgae: x}\n"
    (tmp_path / "tools.yaml").write_text(catalog)
    with pytest.raises(SpecError) as raised:
        load_spec(spec)
    found = [(Path(p.file).name, p.path) for p in raised.value.problems]
    assert found == [("tools.yaml", "tools.t.fit.imgae"), ("spec.yaml", "states.a.next")]
    # a token-shaped mistake in a tool's argv: once, in the catalog, however many states use the tool
    (tmp_path / "tools.yaml").write_text("apiVersion: npa.workflow.tools/v1\ntools:\n"
                                         "  t.fit: {argv: [fit, '{{params.lr}}']}\n")
    spec.write_text(HEADER + "states:\n  a: {toolRef: t.fit, next: b}\n  b: {toolRef: t.fit, terminal: true}\n")
    with pytest.raises(SpecError) as raised:
        load_spec(spec)
    [problem] = [p for p in raised.value.problems if "unrecognised token" in p.message]
    assert (Path(problem.file).name, problem.path) == ("tools.yaml", "tools.t.fit.argv[1]")

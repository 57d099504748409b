"""The message catalogue: every problem the project can report names where, what, and a real fix.

Two walks. Statically, every constructor of a user-facing problem in the source (`Problem(...)`,
`SpecError.single(...)`, the validator's `error(...)`/`warn(...)`, `TokenError`, `IntFieldError`) is
called with a fix that is not an empty literal. Dynamically, a corpus of broken documents goes through the
loader, the validator and the run-request model: each problem has a file, a fix, and no internal name
(pydantic's union members, type reprs, its English)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

import npa_workflow
from npa_workflow.engine.inbox import RunRequest, read_document
from npa_workflow.errors import Problem, SpecError
from npa_workflow.spec.catalog import load_catalog_text
from npa_workflow.spec.load import load_spec_text
from npa_workflow.spec.paths import pydantic_problems

PACKAGE = Path(npa_workflow.__file__).resolve().parent
# constructor -> index of its fix among the positional arguments
CONSTRUCTORS = {"Problem": 2, "SpecError.single": 2, "c.error": 2, "c.warn": 2, "self.error": 2,
                "TokenError": 1, "IntFieldError": 1}
INTERNAL = re.compile(r"constrained-|dict\[str|function-(after|before|wrap)|Input should|String should|"
                      r"pydantic|model_type|<class |Traceback|NoneType|\(fix: \)")


def _fix_argument(call: ast.Call, index: int) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == "hint":
            return keyword.value
    return call.args[index] if len(call.args) > index else None


def test_every_problem_constructor_in_the_source_is_given_a_fix() -> None:
    missing = []
    count = 0
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            if name not in CONSTRUCTORS:
                continue
            count += 1
            fix = _fix_argument(node, CONSTRUCTORS[name])
            if fix is None or (isinstance(fix, ast.Constant) and not str(fix.value).strip()):
                missing.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert count > 100, "the walk found too few constructors: did a name change?"
    assert not missing, "problems without a fix:\n" + "\n".join(missing)


HEAD = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\n"
BAD_SPECS = {
    "tab indent": HEAD + "states:\n\thello: {}\n",
    "unclosed quote": HEAD + 'states: {a: {run: {shell: "echo}}}\n',
    "unclosed bracket": HEAD + "states: {a: {run: {argv: [echo, hi}}}\n",
    "duplicate key": HEAD + "states: {a: {run: {shell: x}, terminal: true}}\nstates: {}\n",
    "not a mapping": "- just\n- a list\n",
    "no states": HEAD,
    "states a list": HEAD + "states: [a, b]\n",
    "state a string": HEAD + "states: {a: hello}\n",
    "unknown state key": HEAD + "states: {a: {run: {shell: x}, terminal: true, colour: red}}\n",
    "bad next": HEAD + "states: {a: {run: {shell: x}, next: nowhere}}\n",
    "loop max text": HEAD + "states:\n  a: {run: {shell: x}, next: l}\n  l: {sequence: [a], loop: {max: lots}}\n",
    "loop max huge": HEAD + "states:\n  l: {sequence: [a], loop: {max: 100000000000000}, terminal: true}\n"
                            "  a: {run: {shell: x}}\n",
    "bad token": HEAD + "states: {a: {run: {shell: 'echo {{config.nope}}'}, terminal: true}}\n",
    "outputs a string": HEAD + "states: {a: {run: {shell: x}, outputs: s3://b/k, terminal: true}}\n",
    "params a list": HEAD + "states: {a: {run: {shell: x}, params: [1], terminal: true}}\n",
    "parallel of numbers": HEAD + "states: {g: {parallel: [1, 2], terminal: true}}\n",
    "bad multinode": HEAD + "states: {a: {run: {shell: x}, multiNodeMode: maybe, terminal: true}}\n",
    "trigger not s3": HEAD + "states: {a: {trigger: {uri: http://x/}, run: {shell: x}, terminal: true}}\n",
    "bad api version": "apiVersion: npa.workflow/v9\nkind: Workflow\nmetadata: {name: t}\nstates: {}\n",
    "metadata name bad": "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: 5}\nstates: {}\n",
    "alias bomb": "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{','.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)),
    "deep": "[" * 200 + "]" * 200,
    "non-string key": HEAD + "states: {1: {run: {shell: x}, terminal: true}}\n",
}
BAD_REQUESTS = {
    "empty spec": {"apiVersion": "npa.workflow.run/v1", "spec": ""},
    "spec a number": {"apiVersion": "npa.workflow.run/v1", "spec": 5},
    "vars a list": {"apiVersion": "npa.workflow.run/v1", "spec": "t", "vars": {"a": [1]}},
    "bad run id": {"apiVersion": "npa.workflow.run/v1", "spec": "t", "runId": "bad id!"},
    "negative retries": {"apiVersion": "npa.workflow.run/v1", "spec": "t", "options": {"retries": -1}},
    "huge wait": {"apiVersion": "npa.workflow.run/v1", "spec": "t", "options": {"maxWaitSeconds": 10**20}},
    "wait a word": {"apiVersion": "npa.workflow.run/v1", "spec": "t", "options": {"maxWaitSeconds": "soon"}},
    "unknown option": {"apiVersion": "npa.workflow.run/v1", "spec": "t", "options": {"bogus": 1}},
    "bad decision": {"apiVersion": "npa.workflow.run/v1", "spec": "t", "options": {"assumeDecision": "yes"}},
    "no api version": {"spec": "t"},
    "options a list": {"apiVersion": "npa.workflow.run/v1", "spec": "t", "options": [1]},
}
BAD_CATALOGS = {
    "tools a list": "apiVersion: npa.workflow.tools/v1\ntools: [a]\n",
    "misspelt field": "apiVersion: npa.workflow.tools/v1\ntools: {a: {argv: [x], imgae: y}}\n",
    "wrong api": "apiVersion: v0\ntools: {}\n",
}


def _check(problems: list[Problem], file: str) -> None:
    assert problems
    for p in problems:
        text = p.format()
        assert p.hint.strip(), f"no fix: {text}"
        assert p.file == file or file in text, f"no file: {text}"
        assert not INTERNAL.search(text), f"internal name: {text}"


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_a_broken_spec_gets_file_path_and_fix(case: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec_text(BAD_SPECS[case], file="specs/broken.yaml")
    _check(caught.value.problems, "specs/broken.yaml")


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_a_broken_run_request_gets_path_and_fix(case: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RunRequest.model_validate(BAD_REQUESTS[case])
    _check(pydantic_problems(caught.value, "", "s3://b/inbox/r.yaml"), "s3://b/inbox/r.yaml")


@pytest.mark.parametrize("case", sorted(BAD_CATALOGS))
def test_a_broken_catalog_gets_path_and_fix(case: str) -> None:
    with pytest.raises(SpecError) as caught:
        load_catalog_text(BAD_CATALOGS[case], "tools.yaml")
    _check(caught.value.problems, "tools.yaml")


@pytest.mark.parametrize("body", [b"\xff\xfe binary", b"a: [1\n", b"x" * (2 * 1024 * 1024)])
def test_a_broken_upload_gets_the_object_and_a_fix(body: bytes) -> None:
    with pytest.raises(SpecError) as caught:
        read_document(body, "s3://b/inbox/u.yaml")
    _check(caught.value.problems, "s3://b/inbox/u.yaml")

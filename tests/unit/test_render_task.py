"""The portable scheduler task document (`render.task`)."""

from __future__ import annotations

from typing import Any

import pytest

from npa_workflow.plan.model import PlanStep
from npa_workflow.render import portable_task
from npa_workflow.render.task import step_image


def make_step(state: str = "prep", **kw: Any) -> PlanStep:
    fields: dict[str, Any] = {
        "state": state,
        "iteration": None,
        "loop_label": "",
        "argv": ["python3", "-m", "prep"],
        "shell": "",
        "tool_ref": "",
        "resources": "default",
        "resources_profile": {},
        "outputs": [],
        "inputs": [],
        "group": "",
    }
    fields.update(kw)
    return PlanStep(**fields)


def test_fields_of_a_tool_step() -> None:
    profile = {
        "cloud": "kubernetes",
        "cpus": 4,
        "memory": "16Gi",
        "image": "ghcr.io/acme/tool:1.0",
        "kubernetes": {"pod_config": {"spec": {"priorityClassName": "hi"}}},
        "num_nodes": 2,
        "deployIfAbsent": True,
    }
    step = make_step(
        "train",
        iteration=3,
        tool_ref="workbench.train.run",
        argv=["npa", "train", "--out", "s3://b/r1/train/"],
        resources="gpu",
        resources_profile=profile,
        outputs=[{"uri": "s3://b/r1/train/", "schema": "dir"}],
        num_nodes=2,
        image="ghcr.io/acme/default:0.1",
        env={"TOOL_ENV": "1"},
        setup="pip install x",
    )
    doc = portable_task(step, workflow="demo", run_id="r1")
    assert doc == {
        "name": "train-3",
        "run_id": "r1",
        "workflow": "demo",
        "tool_ref": "workbench.train.run",
        "resources": profile,
        "num_nodes": 2,
        "command": ["npa", "train", "--out", "s3://b/r1/train/"],
        "image": "ghcr.io/acme/tool:1.0",
        "outputs": [{"uri": "s3://b/r1/train/", "schema": "dir"}],
    }
    # No env/secrets/setup in the portable document.
    assert not {"env", "envs", "secrets", "setup"} & set(doc)


def test_resources_are_a_deep_copy() -> None:
    profile = {"kubernetes": {"pod_config": {"spec": {"volumes": [{"name": "v"}]}}}}
    step = make_step(resources_profile=profile)
    doc = portable_task(step, workflow="w", run_id="r")
    doc["resources"]["kubernetes"]["pod_config"]["spec"]["volumes"].append({"name": "x"})
    assert profile["kubernetes"]["pod_config"]["spec"]["volumes"] == [{"name": "v"}]


def test_shell_step_and_empty_step() -> None:
    shell = make_step("report", argv=[], shell="echo done | tee x")
    assert portable_task(shell, workflow="w", run_id="r")["command"] == ["bash", "-c", "echo done | tee x"]
    noop = make_step("end", argv=[], shell="  ")
    doc = portable_task(noop, workflow="w", run_id="r")
    assert doc["command"] == []
    assert doc["tool_ref"] == ""
    assert doc["image"] == ""
    assert doc["num_nodes"] == 1
    assert doc["outputs"] == []


@pytest.mark.parametrize(
    ("profile_image", "step_img", "expected"),
    [
        ("ghcr.io/acme/p:1", "ghcr.io/acme/tool:1", "ghcr.io/acme/p:1"),  # profile wins
        ("", "ghcr.io/acme/tool:1", "ghcr.io/acme/tool:1"),  # tool default
        (None, "", ""),  # none at all
        ("tool://cosmos3", "ghcr.io/acme/cosmos3:2", "ghcr.io/acme/cosmos3:2"),  # expanded by the planner
    ],
)
def test_image_precedence(profile_image: str | None, step_img: str, expected: str) -> None:
    profile = {} if profile_image is None else {"image": profile_image}
    step = make_step(resources_profile=profile, image=step_img)
    assert step_image(step) == expected
    assert portable_task(step, workflow="w", run_id="r")["image"] == expected

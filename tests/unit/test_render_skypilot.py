"""SkyPilot rendering (docs/operating.md, `render`): one step, a pipeline, a JobGroup; job names and wave keys.

The `skypilot`-marked tests load every kind of rendered document with SkyPilot's own loader.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from npa_workflow.plan.model import PlanStep, Wave
from npa_workflow.render import (
    SECRET_PLACEHOLDER,
    RenderError,
    job_name,
    render_batch,
    render_pipeline,
    render_wave,
    skypilot_task,
    wave_key,
    with_secret_values,
)

K8S = {"cloud": "kubernetes", "cpus": 4, "memory": "16Gi", "image": "ghcr.io/acme/tool:1.0"}
IDENTITY_ENVS = [
    "NPA_WORKFLOW_NAME",
    "NPA_WORKFLOW_RUN_ID",
    "NPA_WORKFLOW_STATE",
    "NPA_WORKFLOW_ATTEMPT_ID",
    "NPA_WORKFLOW_FENCE_SEQUENCE",
    "NPA_WORKFLOW_FENCE_ATTEMPT",
    "NPA_WORKFLOW_ATTEMPT",
    "NPA_WORKFLOW_WAVE_KEY",
]


def make_step(state: str = "prep", **kw: Any) -> PlanStep:
    fields: dict[str, Any] = {
        "state": state,
        "iteration": None,
        "loop_label": "",
        "argv": ["python3", "-m", state.replace("-", "_"), "--out", f"s3://bk/demo/r1/{state}/"],
        "shell": "",
        "tool_ref": "",
        "resources": "default",
        "resources_profile": dict(K8S),
        "outputs": [],
        "inputs": [],
        "group": "",
    }
    fields.update(kw)
    return PlanStep(**fields)


def task(step: PlanStep, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"workflow": "demo", "run_id": "r1", "fence_sequence": 1, "attempt": 1}
    args.update(kw)
    return skypilot_task(step, **args)


KW: dict[str, Any] = {"workflow": "demo", "run_id": "r1", "fence_sequence": 2, "attempt": 1}


def docs(text: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(text))


# --- resources --------------------------------------------------------------------------------


def test_kubernetes_normalization() -> None:
    profile = {
        "cloud": "kubernetes",
        "accelerators": "H100:1",
        "cpus": 8,
        "memory": "64Gi",
        "disk_size": 100,
        "image": "ghcr.io/acme/trainer:2.0",
    }
    doc = task(make_step(resources_profile=profile))
    assert doc["resources"] == {
        "cloud": "kubernetes",
        "accelerators": "H100:1",
        "cpus": "8+",
        "memory": "64+",
        "disk_size": 100,
        "image_id": "docker:ghcr.io/acme/trainer:2.0",
    }


@pytest.mark.parametrize(
    ("cpus", "memory", "want_cpus", "want_memory"),
    [
        (4, "16Gi", "4+", "16+"),
        ("4", "16G", "4+", "16+"),
        ("4+", 16, "4+", "16+"),
        (0.5, "16Gi+", "0.5+", "16+"),
    ],
)
def test_kubernetes_cpus_memory_forms(cpus: Any, memory: Any, want_cpus: str, want_memory: str) -> None:
    doc = task(make_step(resources_profile={"cloud": "kubernetes", "cpus": cpus, "memory": memory}))
    assert doc["resources"]["cpus"] == want_cpus
    assert doc["resources"]["memory"] == want_memory


def test_k8s_alias_is_rendered_as_kubernetes() -> None:
    doc = task(make_step(resources_profile={"cloud": "k8s", "cpus": 2, "memory": "8G", "disk_size": 50}))
    assert doc["resources"] == {"cloud": "kubernetes", "cpus": "2+", "memory": "8+", "disk_size": 50}


def test_other_clouds_drop_disk_size_and_keep_values() -> None:
    profile = {
        "cloud": "aws",
        "cpus": 4,
        "memory": "16Gi",
        "disk_size": 200,
        "use_spot": True,
        "region": "us-east-1",
        "accelerators": {"A100": 2},
    }
    doc = task(make_step(resources_profile=profile))
    assert doc["resources"] == {
        "cloud": "aws",
        "accelerators": {"A100": 2},
        "cpus": 4,
        "memory": "16Gi",
        "use_spot": True,
        "region": "us-east-1",
    }


def test_only_known_keys_copied_and_empties_skipped() -> None:
    profile = {
        "cloud": "",
        "accelerators": None,
        "cpus": "  ",
        "memory": "",
        "region": "",
        "use_spot": False,
        "image": "",
        "kubernetes": {"foo": 1},
        "num_nodes": 1,
        "deployIfAbsent": True,
        "whatever": "x",
    }
    doc = task(make_step(resources_profile=profile))
    assert doc["resources"] == {"use_spot": False}
    assert "config" not in doc


def test_no_resources_block_when_nothing_to_say() -> None:
    doc = task(make_step(resources_profile={}))
    assert "resources" not in doc
    assert "NPA_TASK_IMAGE" not in doc["envs"]


@pytest.mark.parametrize(
    ("profile_image", "step_img", "expected"),
    [
        ("ghcr.io/acme/p:1", "ghcr.io/acme/tool:1", "ghcr.io/acme/p:1"),
        ("", "ghcr.io/acme/tool:1", "ghcr.io/acme/tool:1"),
        ("tool://cosmos3", "ghcr.io/acme/cosmos3:2", "ghcr.io/acme/cosmos3:2"),
    ],
)
def test_image_id_and_task_image_env(profile_image: str, step_img: str, expected: str) -> None:
    doc = task(make_step(resources_profile={"cloud": "aws", "image": profile_image}, image=step_img))
    assert doc["resources"]["image_id"] == f"docker:{expected}"
    assert doc["envs"]["NPA_TASK_IMAGE"] == expected


def test_num_nodes_lifted_to_task_level_only_when_above_one() -> None:
    one = task(make_step(resources_profile={**K8S, "num_nodes": 1}, num_nodes=1))
    assert "num_nodes" not in one
    four = task(make_step(resources_profile={**K8S, "num_nodes": 4}, num_nodes=4))
    assert four["num_nodes"] == 4
    assert "num_nodes" not in four["resources"]


def test_kubernetes_config_block() -> None:
    pod = {"metadata": {"labels": {"team": "x"}}, "spec": {"priorityClassName": "hi", "volumes": [{"name": "v"}]}}
    profile = {**K8S, "kubernetes": {"pod_config": pod, "provision_timeout": 600, "other": 1}}
    step = make_step(resources_profile=profile)
    doc = task(step)
    assert doc["config"] == {"kubernetes": {"pod_config": pod, "provision_timeout": 600}}
    doc["config"]["kubernetes"]["pod_config"]["spec"]["volumes"].append({"name": "w"})
    assert pod["spec"]["volumes"] == [{"name": "v"}]  # a copy, not the plan's object
    only_timeout = task(make_step(resources_profile={**K8S, "kubernetes": {"provision_timeout": 30}}))
    assert only_timeout["config"] == {"kubernetes": {"provision_timeout": 30}}


# --- envs, secrets, setup, run ----------------------------------------------------------------


def test_identity_envs() -> None:
    step = make_step("train", iteration=2, env={"TOOL_FLAG": "on"}, loops={"train": 2})
    doc = task(step, fence_sequence=7, attempt=3)
    envs = doc["envs"]
    assert list(envs)[: len(IDENTITY_ENVS)] == IDENTITY_ENVS
    assert envs["NPA_WORKFLOW_NAME"] == "demo"
    assert envs["NPA_WORKFLOW_RUN_ID"] == "r1"
    assert envs["NPA_WORKFLOW_STATE"] == "train-2"
    assert envs["NPA_WORKFLOW_ATTEMPT_ID"] == hashlib.sha256(b"demo/r1/train-2/3").hexdigest()
    assert envs["NPA_WORKFLOW_FENCE_SEQUENCE"] == "7"
    assert envs["NPA_WORKFLOW_FENCE_ATTEMPT"] == "3"
    assert envs["NPA_WORKFLOW_ATTEMPT"] == "3"
    assert envs["NPA_WORKFLOW_WAVE_KEY"] == "train|train=2"  # the ledger's key of the wave (state, counters)
    assert envs["NPA_TASK_IMAGE"] == "ghcr.io/acme/tool:1.0"
    assert envs["TOOL_FLAG"] == "on"
    assert all(isinstance(v, str) for v in envs.values())


def test_attempt_id_changes_with_attempt_only() -> None:
    step = make_step()
    a1 = task(step, attempt=1)["envs"]["NPA_WORKFLOW_ATTEMPT_ID"]
    assert a1 == task(step, attempt=1, fence_sequence=9)["envs"]["NPA_WORKFLOW_ATTEMPT_ID"]
    assert a1 != task(step, attempt=2)["envs"]["NPA_WORKFLOW_ATTEMPT_ID"]
    assert re.fullmatch(r"[0-9a-f]{64}", a1)


def test_env_precedence_tool_lt_identity_lt_extra() -> None:
    step = make_step(env={"NPA_WORKFLOW_STATE": "spoofed", "SHARED": "tool"})
    doc = task(step, extra_env={"SHARED": "caller", "AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "N": 3})
    envs = doc["envs"]
    assert envs["NPA_WORKFLOW_STATE"] == "prep"
    assert envs["SHARED"] == "caller"
    assert envs["AWS_ENDPOINT_URL"] == "http://127.0.0.1:5000"
    assert envs["N"] == "3"
    override = task(step, extra_env={"NPA_WORKFLOW_ATTEMPT_ID": "launch-123"})
    assert override["envs"]["NPA_WORKFLOW_ATTEMPT_ID"] == "launch-123"


@pytest.mark.parametrize("bad", ["1X", "A-B", "", "A B"])
def test_invalid_env_names_rejected(bad: str) -> None:
    with pytest.raises(RenderError, match="not a valid environment variable name"):
        task(make_step(), extra_env={bad: "x"})
    with pytest.raises(RenderError, match="not a valid environment variable name"):
        task(make_step(env={bad: "x"}))
    with pytest.raises(RenderError, match="not a valid environment variable name"):
        task(make_step(), secret_names=[bad])


def test_secrets_are_placeholders() -> None:
    doc = task(make_step(), secret_names=["HF_TOKEN", "NEBIUS_KEY", "HF_TOKEN"])
    assert doc["secrets"] == {"HF_TOKEN": SECRET_PLACEHOLDER, "NEBIUS_KEY": SECRET_PLACEHOLDER}
    assert SECRET_PLACEHOLDER == "<resolved at launch>"
    assert "HF_TOKEN" not in doc["envs"]
    assert "secrets" not in task(make_step())


def test_secret_and_env_with_same_name_rejected() -> None:
    with pytest.raises(RenderError, match="HF_TOKEN set both as env and as secret"):
        task(make_step(env={"HF_TOKEN": "x"}), secret_names=["HF_TOKEN"])


def test_with_secret_values_yaml_and_dict() -> None:
    real = {"HF_TOKEN": "hf_s3cr3t_value", "NEBIUS_KEY": "nb_s3cr3t_value", "UNUSED": "zzz_unused"}
    steps = [make_step("a"), make_step("b")]
    text = render_batch(steps, name="r1-02-grp", secret_names=["HF_TOKEN", "NEBIUS_KEY"], **KW)
    for value in real.values():
        assert value not in text
    assert text.count(SECRET_PLACEHOLDER) == 4
    filled = with_secret_values(text, real)
    assert isinstance(filled, str)
    assert SECRET_PLACEHOLDER not in filled
    loaded = docs(filled)
    assert loaded[0] == {"name": "r1-02-grp", "execution": "parallel"}
    for d in loaded[1:]:
        assert d["secrets"] == {"HF_TOKEN": "hf_s3cr3t_value", "NEBIUS_KEY": "nb_s3cr3t_value"}
    assert "zzz_unused" not in filled
    # The rendered text itself is untouched.
    assert "hf_s3cr3t_value" not in text

    one = task(make_step(), secret_names=["HF_TOKEN"])
    filled_doc = with_secret_values(one, real)
    assert isinstance(filled_doc, dict)
    assert filled_doc["secrets"] == {"HF_TOKEN": "hf_s3cr3t_value"}
    assert one["secrets"] == {"HF_TOKEN": SECRET_PLACEHOLDER}  # input not mutated


def test_with_secret_values_missing_value_names_secret_not_values() -> None:
    text = render_pipeline([make_step()], name="p", secret_names=["HF_TOKEN", "NEBIUS_KEY"], **KW)
    with pytest.raises(RenderError, match="no value for secret 'NEBIUS_KEY'") as info:
        with_secret_values(text, {"HF_TOKEN": "hf_s3cr3t_value"})
    assert "hf_s3cr3t_value" not in str(info.value)


def test_a_job_document_takes_its_secrets_values_only_where_it_is_written() -> None:
    from npa_workflow.render import launch_job

    job = launch_job(make_step(), workflow="demo", run_id="r1", loops={}, attempt=1, fence_sequence=1,
                     secret_names=["HF_TOKEN", "NEBIUS_KEY"])
    assert job.secret_names == ("HF_TOKEN", "NEBIUS_KEY")
    real = {"HF_TOKEN": "hf_s3cr3t_value", "NEBIUS_KEY": "nb_s3cr3t_value", "UNUSED": "zzz_unused"}
    filled = job.text(real)
    assert docs(filled)[1]["secrets"] == {"HF_TOKEN": "hf_s3cr3t_value", "NEBIUS_KEY": "nb_s3cr3t_value"}
    assert "zzz_unused" not in filled
    # The document itself keeps the placeholders: what `render` shows, and the same text the values fill.
    assert job.task["secrets"] == {"HF_TOKEN": SECRET_PLACEHOLDER, "NEBIUS_KEY": SECRET_PLACEHOLDER}
    assert filled == with_secret_values(job.text(), real)
    with pytest.raises(RenderError, match="no value for secret 'NEBIUS_KEY'") as info:
        job.text({"HF_TOKEN": "hf_s3cr3t_value"})
    assert "hf_s3cr3t_value" not in str(info.value)


def test_setup_only_when_non_empty() -> None:
    assert "setup" not in task(make_step(setup=""))
    assert "setup" not in task(make_step(setup="  \n"))
    assert task(make_step(setup="pip install npa\n"))["setup"] == "pip install npa\n"


def test_run_script_argv_quoting() -> None:
    argv = ["python3", "-c", "print('a b'); import sys", "--x", "it's", "$HOME", "s3://b/k/"]
    run = task(make_step(argv=argv))["run"]
    lines = run.splitlines()
    assert lines[0] == "set -euo pipefail"
    assert shlex.split(lines[1]) == argv
    assert lines[1] == shlex.join(argv)
    assert "$HOME'" in lines[1]  # quoted: not expanded by bash


def test_run_script_shell_step() -> None:
    run = task(make_step(argv=[], shell="echo done | tee /tmp/x && exit 0"))["run"]
    assert run == "set -euo pipefail\nbash -c 'echo done | tee /tmp/x && exit 0'\n"


def test_empty_command_is_an_error() -> None:
    with pytest.raises(RenderError) as info:
        task(make_step("finish", argv=[], shell=" "))
    assert isinstance(info.value, ValueError)
    assert str(info.value) == "state 'finish' has no command to render"
    looped = make_step("tick", iteration=4, argv=[], shell="")
    with pytest.raises(RenderError, match="state 'tick-4' has no command to render"):
        render_pipeline([make_step("a"), looped], name="p", **KW)


def test_task_key_order() -> None:
    profile = {**K8S, "kubernetes": {"provision_timeout": 5}}
    doc = task(make_step(resources_profile=profile, num_nodes=2, setup="s"), secret_names=["S"])
    assert list(doc) == ["name", "resources", "num_nodes", "envs", "secrets", "setup", "run", "config"]


# --- job names and wave keys ------------------------------------------------------------------


def test_job_name_basic() -> None:
    assert job_name("r1", 2, "sweep", None, 1) == "r1-02-sweep"
    assert job_name("r1", 3, "train", 4, 1) == "r1-03-train-4"
    assert job_name("r1", 123, "x", None, 1) == "r1-123-x"
    assert job_name("r1", 2, "sweep", None, 2) == "r1-02-sweep-a2"


def test_job_name_sanitized_and_trimmed() -> None:
    assert job_name("Run.ID", 1, "Stage 01/Trigger", None, 1) == "run-id-01-stage-01-trigger"
    assert job_name("-r1", 1, "a.", None, 1) == "r1-01-a"
    assert job_name("r1", 1, "état", None, 1) == "r1-01--tat"


def test_job_name_truncation_keeps_attempt_suffix() -> None:
    run_id = "run-" + "x" * 80
    plain = job_name(run_id, 5, "stage", None, 1)
    assert len(plain) == 60
    assert plain.startswith(run_id[:40])
    retry = job_name(run_id, 5, "stage", 2, 12)
    assert len(retry) <= 60
    assert retry.endswith("-a12")
    # Truncated names keep a digest of the whole name: two waves of a long run id never share a name.
    assert job_name(run_id, 5, "train", None, 1) != job_name(run_id, 5, "gate", None, 1)
    # truncation never leaves a dangling dash before the suffix
    dashy = job_name("a" * 55 + "-" * 10, 1, "s", None, 3)
    assert dashy.startswith("a" * 40) and dashy.endswith("-a3") and "--" not in dashy
    for name in (plain, retry, dashy):
        assert re.fullmatch(r"[a-z0-9_-]+", name)


def test_wave_key_examples() -> None:
    trigger = make_step("stage-01-trigger")
    assert wave_key(1, "", [trigger]) == "001|serial|:stage-01-trigger:-"
    shards = [
        make_step("stage-04-shard-0", loop_label="stage-04-wave", group="stage-04-wave"),
        make_step("stage-04-shard-1", loop_label="stage-04-wave", group="stage-04-wave"),
    ]
    assert wave_key(4, "stage-04-wave", shards) == (
        "004|stage-04-wave|stage-04-wave:stage-04-shard-0:-,stage-04-wave:stage-04-shard-1:-"
    )
    rollouts = make_step("stage-07-rollouts", loop_label="inner-loop")
    assert wave_key(7, "", [rollouts]) == "007|serial|inner-loop:stage-07-rollouts:-"
    assert wave_key(12, "serial", [make_step("t", iteration=3)]) == "012|serial|:t:3"


# --- multi-document rendering -----------------------------------------------------------------


def test_pipeline_documents() -> None:
    loop = [make_step("body", iteration=None), make_step("body"), make_step("report", argv=[], shell="echo ok")]
    text = render_pipeline(loop, name="demo", **KW)
    loaded = docs(text)
    assert loaded[0] == {"name": "demo", "execution": "serial"}
    assert [d["name"] for d in loaded[1:]] == ["body", "body", "report"]
    assert text.count("\n---\n") == 3
    assert text == render_pipeline(loop, name="demo", **KW)  # deterministic


def test_job_group_documents() -> None:
    steps = [make_step("lr-a"), make_step("lr.b"), make_step("lr c")]
    text = render_batch(steps, name="r1-02-sweep", **KW)
    loaded = docs(text)
    assert loaded[0] == {"name": "r1-02-sweep", "execution": "parallel"}
    assert [d["name"] for d in loaded[1:]] == ["lr-a", "lr-b", "lr-c"]
    # the env keeps the real state name
    assert [d["envs"]["NPA_WORKFLOW_STATE"] for d in loaded[1:]] == ["lr-a", "lr.b", "lr c"]
    assert text == render_batch(steps, name="r1-02-sweep", **KW)


def test_job_group_duplicate_names_rejected() -> None:
    with pytest.raises(RenderError, match="duplicate task name 'a'"):
        render_batch([make_step("a"), make_step("a")], name="g", **KW)
    with pytest.raises(RenderError, match=r"duplicate task name 'a-b' \(from 'a\.b' and 'a b'\)"):
        render_batch([make_step("a.b"), make_step("a b")], name="g", **KW)
    # loop iterations have distinct task names
    render_batch([make_step("a", iteration=1), make_step("a", iteration=2)], name="g", **KW)


def test_job_group_name_must_be_safe() -> None:
    with pytest.raises(RenderError, match="must match"):
        render_batch([make_step("a"), make_step("b")], name="bad name", **KW)


def test_batch_of_one_is_a_serial_single_task() -> None:
    loaded = docs(render_batch([make_step("solo")], name="r1-03-grp", **KW))
    assert loaded[0] == {"name": "r1-03-grp", "execution": "serial"}
    assert len(loaded) == 2
    assert loaded[1]["name"] == "solo"


def test_empty_inputs_rejected() -> None:
    with pytest.raises(RenderError):
        render_batch([], name="g", **KW)
    with pytest.raises(RenderError):
        render_pipeline([], name="g", **KW)
    with pytest.raises(RenderError):
        render_pipeline([make_step()], name=" ", **KW)


def _wave(kind: str, steps: list[PlanStep], batches: list[list[PlanStep]], group: str = "", name: str = "") -> Wave:
    return Wave(
        index=0, kind=kind, group=group, name=name or group or steps[0].state,
        max_concurrency=len(batches[0]) if batches else 1, batches=batches, steps=steps,
    )


def test_render_wave_serial() -> None:
    step = make_step("train", iteration=2)
    wave = _wave("serial", [step], [[step]])
    [(name, text)] = render_wave(wave, run_id="r1", workflow="demo", counter_start=5, attempt=2)
    assert name == "r1-05-train-2-a2"
    loaded = docs(text)
    assert loaded[0] == {"name": name, "execution": "serial"}
    assert loaded[1]["envs"]["NPA_WORKFLOW_FENCE_SEQUENCE"] == "5"
    assert loaded[1]["envs"]["NPA_WORKFLOW_ATTEMPT"] == "2"


def test_render_wave_parallel_batches() -> None:
    a, b, c = (make_step(s, group="sweep") for s in ("lr-a", "lr-b", "lr-c"))
    wave = _wave("parallel", [a, b, c], [[a, b], [c]], group="sweep")
    out = render_wave(wave, run_id="R1", workflow="demo", counter_start=2, secret_names=["HF_TOKEN"])
    assert [n for n, _ in out] == ["r1-02-sweep", "r1-03-sweep"]
    first, second = (docs(t) for _, t in out)
    assert first[0] == {"name": "r1-02-sweep", "execution": "parallel"}
    assert [d["name"] for d in first[1:]] == ["lr-a", "lr-b"]
    assert second[0] == {"name": "r1-03-sweep", "execution": "serial"}
    assert [d["name"] for d in second[1:]] == ["lr-c"]
    assert first[1]["envs"]["NPA_WORKFLOW_FENCE_SEQUENCE"] == "2"
    assert second[1]["envs"]["NPA_WORKFLOW_FENCE_SEQUENCE"] == "3"
    assert second[1]["secrets"] == {"HF_TOKEN": SECRET_PLACEHOLDER}


# --- SkyPilot's own loader --------------------------------------------------------------------


@pytest.fixture(scope="module")
def dag_utils() -> Any:
    pytest.importorskip("sky")
    from sky.utils import dag_utils as du

    return du


def _resources(t: Any) -> Any:
    [r] = list(t.resources)
    return r


@pytest.mark.skypilot
class TestSkyPilotLoader:
    def test_single_task_document(self, dag_utils: Any) -> None:
        text = yaml.safe_dump(task(make_step("prep"), secret_names=["HF_TOKEN"]), sort_keys=False)
        dag = dag_utils.load_dag_from_yaml_str(text)
        assert not dag.is_job_group()
        assert len(dag.tasks) == 1
        t = dag.tasks[0]
        assert t.name == "prep"
        assert t.envs["NPA_WORKFLOW_STATE"] == "prep"
        assert set(t.secrets) == {"HF_TOKEN"}
        assert t.run.startswith("set -euo pipefail\n")

    def test_pipeline_of_three(self, dag_utils: Any) -> None:
        steps = [make_step("prep"), make_step("body", iteration=1), make_step("report", argv=[], shell="echo ok")]
        dag = dag_utils.load_dag_from_yaml_str(render_pipeline(steps, name="demo", **KW))
        assert not dag.is_job_group()
        assert dag.name == "demo"
        assert [t.name for t in dag.tasks] == ["prep", "body-1", "report"]
        assert dag.is_chain()

    def test_pipeline_with_repeated_names(self, dag_utils: Any) -> None:
        steps = [make_step("body"), make_step("body"), make_step("body")]
        dag = dag_utils.load_dag_from_yaml_str(render_pipeline(steps, name="loop", **KW))
        assert [t.name for t in dag.tasks] == ["body"] * 3

    @pytest.mark.parametrize("size", [2, 3])
    def test_job_group(self, dag_utils: Any, size: int) -> None:
        steps = [make_step(f"lr-{i}", group="sweep") for i in range(size)]
        text = render_batch(steps, name="r1-02-sweep", secret_names=["HF_TOKEN"], **KW)
        assert dag_utils.is_job_group_yaml_str(text)
        dag = dag_utils.load_dag_from_yaml_str(text)
        assert dag.is_job_group()
        assert dag.name == "r1-02-sweep"
        assert len(dag.tasks) == size
        assert [t.name for t in dag.tasks] == [f"lr-{i}" for i in range(size)]
        assert dag.primary_tasks is None  # every member primary

    def test_batch_of_one(self, dag_utils: Any) -> None:
        text = render_batch([make_step("solo")], name="r1-03-grp", **KW)
        assert not dag_utils.is_job_group_yaml_str(text)
        dag = dag_utils.load_dag_from_yaml_str(text)
        assert not dag.is_job_group()
        assert dag.name == "r1-03-grp"
        assert [t.name for t in dag.tasks] == ["solo"]

    def test_kubernetes_profile_with_pod_config(self, dag_utils: Any) -> None:
        pod = {"metadata": {"labels": {"team": "x"}}, "spec": {"priorityClassName": "hi"}}
        profile = {
            "cloud": "k8s",
            "accelerators": "H100:1",
            "cpus": 8,
            "memory": "64Gi",
            "image": "ghcr.io/acme/trainer:2.0",
            "kubernetes": {"pod_config": pod, "provision_timeout": 600},
        }
        text = render_pipeline([make_step("train", resources_profile=profile)], name="k", **KW)
        [t] = dag_utils.load_dag_from_yaml_str(text).tasks
        r = _resources(t)
        assert str(r.cloud) == "Kubernetes"
        assert r.cpus == "8+"
        assert r.memory == "64+"
        assert r.accelerators == {"H100": 1}
        assert r.image_id == {None: "docker:ghcr.io/acme/trainer:2.0"}
        assert r.cluster_config_overrides == {"kubernetes": {"pod_config": pod, "provision_timeout": 600}}

    def test_multi_node(self, dag_utils: Any) -> None:
        step = make_step("shard", resources_profile={**K8S, "num_nodes": 4}, num_nodes=4)
        [t] = dag_utils.load_dag_from_yaml_str(render_pipeline([step], name="m", **KW)).tasks
        assert t.num_nodes == 4

    def test_filled_secrets_still_load(self, dag_utils: Any) -> None:
        text = render_batch([make_step("a"), make_step("b")], name="g", secret_names=["HF_TOKEN"], **KW)
        filled = with_secret_values(text, {"HF_TOKEN": "hf_value"})
        dag = dag_utils.load_dag_from_yaml_str(filled)
        assert dag.is_job_group()
        assert all(t.secrets["HF_TOKEN"].get_secret_value() == "hf_value" for t in dag.tasks)

    def test_a_filled_job_document_loads(self, dag_utils: Any) -> None:
        from npa_workflow.render import launch_job

        job = launch_job(make_step("train"), workflow="demo", run_id="r1", loops={}, attempt=1, fence_sequence=1,
                         secret_names=["HF_TOKEN"])
        dag = dag_utils.load_dag_from_yaml_str(job.text({"HF_TOKEN": "hf_value"}))
        [t] = dag.tasks
        assert dag.name == job.name and t.secrets["HF_TOKEN"].get_secret_value() == "hf_value"

    def test_rendered_waves_load(self, dag_utils: Any) -> None:
        a, b, c = (make_step(s, group="sweep") for s in ("lr-a", "lr-b", "lr-c"))
        wave = _wave("parallel", [a, b, c], [[a, b], [c]], group="sweep")
        out = render_wave(wave, run_id="r1", workflow="demo", counter_start=2, attempt=3)
        loaded = [dag_utils.load_dag_from_yaml_str(t) for _, t in out]
        assert [d.is_job_group() for d in loaded] == [True, False]
        assert [d.name for d in loaded] == [n for n, _ in out] == ["r1-02-sweep-a3", "r1-03-sweep-a3"]

    def test_kubernetes_disk_size_reaches_skypilot(self, dag_utils: Any) -> None:
        """SkyPilot 0.14.1 discards `ephemeral_storage` (the existing engine's k8s rename) and reads
        `disk_size` as the pod's ephemeral storage, so we keep `disk_size` and it is honoured."""
        profile = {"cloud": "kubernetes", "cpus": 2, "memory": 8, "disk_size": 100}
        text = render_pipeline([make_step("big", resources_profile=profile)], name="d", **KW)
        assert "ephemeral_storage" not in text
        [t] = dag_utils.load_dag_from_yaml_str(text).tasks
        assert _resources(t).disk_size_specified is True


def test_launch_document_is_one_serial_task_named_and_identified_per_wave() -> None:
    from npa_workflow.render import launch_document

    step = make_step("train")
    name1, doc1 = launch_document(step, workflow="demo", run_id="r1", loops={"refine": 1}, attempt=1, fence_sequence=1)
    name2, doc2 = launch_document(step, workflow="demo", run_id="r1", loops={"refine": 2}, attempt=1, fence_sequence=2)
    assert (name1, name2) == ("r1-01-train-refine1", "r1-01-train-refine2")
    header, task1 = docs(doc1)
    assert header == {"name": name1, "execution": "serial"}
    task2 = docs(doc2)[1]
    assert task1["envs"]["NPA_WORKFLOW_ATTEMPT_ID"] != task2["envs"]["NPA_WORKFLOW_ATTEMPT_ID"]
    assert (task1["envs"]["NPA_WORKFLOW_FENCE_SEQUENCE"], task2["envs"]["NPA_WORKFLOW_FENCE_SEQUENCE"]) == ("1", "2")


@pytest.mark.parametrize("assume", ["promote_checkpoint", "loop_back"])
def test_libyaml_renders_every_example_as_the_python_emitter_does(
        assume: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Job documents are emitted by libyaml where PyYAML has it (a quarter of the CPU of its Python emitter): the
    text is the same, byte for byte, for every job of every example."""
    import yaml
    from typer.testing import CliRunner

    from npa_workflow.cli.app import app
    from npa_workflow.render import skypilot

    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML without libyaml: the Python emitter renders")
    assert issubclass(skypilot._Dumper, yaml.CSafeDumper)

    emitters: list[str] = []  # which emitter each document went through

    class PythonDumper(yaml.SafeDumper):
        def __init__(self, *args: object, **kwargs: object) -> None:
            emitters.append("python")
            super().__init__(*args, **kwargs)

    class LibyamlDumper(skypilot._Dumper):
        def __init__(self, *args: object, **kwargs: object) -> None:
            emitters.append("libyaml")
            super().__init__(*args, **kwargs)

    PythonDumper.add_representer(str, skypilot._str_representer)
    root = Path(__file__).resolve().parents[2] / "specs"
    examples = sorted(p for p in root.glob("*.yaml") if p.name != "tools.yaml")
    rendered: dict[str, dict[str, str]] = {}
    for label, dumper in (("libyaml", LibyamlDumper), ("python", PythonDumper)):
        monkeypatch.setattr(skypilot, "_Dumper", dumper)
        emitters.clear()
        for spec in examples:
            out = tmp_path / label / spec.stem
            result = CliRunner().invoke(app, ["render", str(spec), "--assume-decision", assume, "--out", str(out)])
            assert result.exit_code == 0, result.output
            rendered.setdefault(label, {}).update(
                {f"{spec.stem}/{f.name}": f.read_text() for f in sorted(out.glob("*.yaml"))})
        assert emitters and set(emitters) == {label}  # every document of this pass went through that emitter
    assert len(rendered["libyaml"]) >= len(examples) and rendered["libyaml"] == rendered["python"]

"""`num_nodes: N` on one machine (`local_jobs.gang` through `local_jobs.job_executor`): N real processes of the step's
command with SkyPilot 0.14.1's node variables, started together, ended together, and each node's own GPUs."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import pytest
from deadlines import deadline as scaled

from npa_workflow.engine.ports import JobRequest
from npa_workflow.local_jobs.executor import LocalExecutor
from npa_workflow.local_jobs.gang import node_environment
from npa_workflow.local_jobs.job_executor import LocalJobExecutor
from npa_workflow.plan.model import PlanStep

pytestmark = pytest.mark.timeout(120)

# Each node writes its variables, then waits (bounded) until every node has: only a gang start succeeds.
NODE = """
import json, os, sys, time
out, nodes = sys.argv[1], int(os.environ["SKYPILOT_NUM_NODES"])
rank = os.environ["SKYPILOT_NODE_RANK"]
keys = ("SKYPILOT_NODE_RANK", "SKYPILOT_NUM_NODES", "SKYPILOT_NODE_IPS", "SKYPILOT_NUM_GPUS_PER_NODE",
        "CUDA_VISIBLE_DEVICES")
seen = {k: os.environ.get(k) for k in keys}
seen["pid"] = os.getpid()
open(os.path.join(out, f"node-{rank}.tmp"), "w").write(json.dumps(seen))
os.replace(os.path.join(out, f"node-{rank}.tmp"), os.path.join(out, f"node-{rank}.json"))
deadline = time.monotonic() + CAP
while len([n for n in os.listdir(out) if n.endswith(".json")]) < nodes:
    if time.monotonic() > deadline:
        sys.exit(9)
    time.sleep(0.02)
if rank == os.environ.get("FAIL_RANK"):
    sys.exit(3)
time.sleep(float(os.environ.get("NODE_SLEEP", "0")))
""".replace("CAP", str(round(scaled(20))))  # at most 20 s on an idle machine, scaled


def step(nodes: int, accelerators: str | None = None) -> PlanStep:
    profile = {"accelerators": accelerators} if accelerators else {}
    return PlanStep(state="train", iteration=None, loop_label="", argv=[sys.executable, "-c", NODE], shell="",
                    tool_ref="", resources="default", resources_profile=profile, outputs=[], inputs=[], group="",
                    num_nodes=nodes)


def request(the_step: PlanStep, out: Path, name: str = "r1-01-train", **env: str) -> JobRequest:
    the_step = dataclasses.replace(the_step, argv=[*the_step.argv, str(out)])
    return JobRequest(name=name, step=the_step, env={"NPA_WORKFLOW_RUN_ID": "r1", **env})


def until(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + scaled(timeout)
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def nodes_seen(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("node-*.json"))]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    (tmp_path / "out").mkdir()
    return tmp_path / "out"


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", f"{tmp_path / 'no-gpus'}{os.pathsep}/usr/bin:/bin")  # no nvidia-smi here
    executor = LocalJobExecutor(LocalExecutor(tmp_path / "state", env={**os.environ}, grace_seconds=1.0),
                                cancel_grace_seconds=1.0)
    yield executor
    executor.close()


def test_n_nodes_run_together_with_skypilots_node_variables(jobs: LocalJobExecutor, out: Path) -> None:
    job_id = jobs.submit(request(step(3), out)).job_id
    until(lambda: jobs.local.status(job_id).is_terminal, "the 3-node job to end")
    assert jobs.local.status(job_id).status == "SUCCEEDED", jobs.local.log_tail(job_id, 20)
    seen = nodes_seen(out)
    assert sorted(s["SKYPILOT_NODE_RANK"] for s in seen) == ["0", "1", "2"]
    assert {s["SKYPILOT_NUM_NODES"] for s in seen} == {"3"}
    assert {s["SKYPILOT_NODE_IPS"] for s in seen} == {"127.0.0.1\n127.0.0.1\n127.0.0.1"}
    assert {s["SKYPILOT_NUM_GPUS_PER_NODE"] for s in seen} == {"0"}
    assert len({s["pid"] for s in seen}) == 3  # three processes


def test_a_single_node_job_gets_rank_0_of_1_as_on_skypilot(jobs: LocalJobExecutor, out: Path) -> None:
    job_id = jobs.submit(request(step(1), out)).job_id
    until(lambda: jobs.local.status(job_id).is_terminal, "the job to end")
    [seen] = nodes_seen(out)
    assert (seen["SKYPILOT_NODE_RANK"], seen["SKYPILOT_NUM_NODES"], seen["SKYPILOT_NODE_IPS"]) == ("0", "1",
                                                                                                  "127.0.0.1")


def test_one_failed_node_fails_the_job_and_stops_the_others(jobs: LocalJobExecutor, out: Path) -> None:
    job_id = jobs.submit(request(step(3), out, FAIL_RANK="1", NODE_SLEEP="60")).job_id
    until(lambda: jobs.local.status(job_id).is_terminal, "the job to fail", timeout=45)
    info = jobs.local.status(job_id)
    assert info.status == "FAILED" and info.exit_code == 3, info
    assert "node 1 of 3 exited with 3" in jobs.local.log_tail(job_id, 20)
    until(lambda: not any(alive(s["pid"]) for s in nodes_seen(out)), "the other nodes to stop", timeout=10)


def test_cancelling_the_job_ends_every_node(jobs: LocalJobExecutor, out: Path) -> None:
    job_id = jobs.submit(request(step(2), out, NODE_SLEEP="60")).job_id
    until(lambda: len(nodes_seen(out)) == 2, "both nodes to start")
    jobs.cancel([job_id])
    assert jobs.confirm_cancelled([job_id], timeout_seconds=20)
    until(lambda: not any(alive(s["pid"]) for s in nodes_seen(out)), "every node to end", timeout=10)
    assert jobs.local.status(job_id).status == "CANCELLED"


def test_each_node_gets_its_own_devices_or_shares_the_jobs_when_the_machine_has_fewer() -> None:
    held = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert [node_environment(held, r, 2, 2)["CUDA_VISIBLE_DEVICES"] for r in range(2)] == ["0,1", "2,3"]
    shared = {"CUDA_VISIBLE_DEVICES": "5,7"}  # the job holds one node's count: its nodes share them
    assert [node_environment(shared, r, 3, 2)["CUDA_VISIBLE_DEVICES"] for r in range(3)] == ["5,7"] * 3
    assert node_environment({"CUDA_VISIBLE_DEVICES": ""}, 0, 2, 0)["CUDA_VISIBLE_DEVICES"] == ""
    assert "CUDA_VISIBLE_DEVICES" not in node_environment({}, 0, 2, 1)  # no GPUs listed: nothing enforced


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalJobExecutor:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/bin/sh\n[ "$1" = -L ] || exit 2\n'
                   'echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-node-a)"\n'
                   'echo "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-node-b)"\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    executor = LocalJobExecutor(LocalExecutor(tmp_path / "state", env={**os.environ}, grace_seconds=1.0,
                                              gpu_lock_dir=tmp_path / "locks"), cancel_grace_seconds=1.0)
    yield executor
    executor.close()


@pytest.mark.parametrize(("nodes", "per_node", "devices"), [
    (2, 1, [["0"], ["1"]]),  # the machine has both nodes' devices: one each
    (2, 2, [["0", "1"], ["0", "1"]]),  # fewer than 2 x 2: the job holds one node's two, its nodes share them
])
def test_gpus_are_allocated_per_node(two_gpus: LocalJobExecutor, out: Path, nodes: int, per_node: int,
                                     devices: list[list[str]]) -> None:
    job_id = two_gpus.submit(request(step(nodes, f"H100:{per_node}"), out)).job_id
    until(lambda: two_gpus.local.status(job_id).is_terminal, "the job to end")
    assert two_gpus.local.status(job_id).status == "SUCCEEDED", two_gpus.local.log_tail(job_id, 20)
    seen = sorted(nodes_seen(out), key=lambda s: s["SKYPILOT_NODE_RANK"])
    assert [sorted(s["CUDA_VISIBLE_DEVICES"].split(",")) for s in seen] == devices
    assert {s["SKYPILOT_NUM_GPUS_PER_NODE"] for s in seen} == {str(per_node)}


def test_more_devices_per_node_than_the_machine_has_is_refused(two_gpus: LocalJobExecutor, out: Path) -> None:
    from npa_workflow.engine.ports import SubmitError

    with pytest.raises(SubmitError, match="asks for 3 GPU\\(s\\) per node .* this machine has 2"):
        two_gpus.submit(request(step(2, "H100:3"), out))

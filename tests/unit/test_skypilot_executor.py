"""The JobExecutor port over SkyPilot, against the protocol double recorded from a real server:
a wave's whole life — launch, adopt on retry, success, workload failure, infrastructure
failure, configuration failure, verified cancel — and secrets filled only at submit time."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from npa_workflow.adapters.secrets import EnvironmentSecrets
from npa_workflow.adapters.skypilot_api import SkyPilotApi
from npa_workflow.adapters.skypilot_executor import SkyPilotExecutor
from npa_workflow.engine.ports import JobRequest, SubmitError, TrackedJob
from npa_workflow.plan.model import PlanStep
from npa_workflow.render.skypilot import launch_job

DOUBLE_PATH = Path(__file__).resolve().parents[1] / "integration" / "skypilot" / "double.py"


def _double_module():
    spec = importlib.util.spec_from_file_location("npa_skypilot_double_exec", DOUBLE_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


double_mod = _double_module()


@pytest.fixture
def double() -> Iterator:
    with double_mod.SkyPilotDouble() as d:
        d.request_polls = 0
        yield d


@pytest.fixture
def executor(double) -> SkyPilotExecutor:
    api = SkyPilotApi(double.endpoint, retry_deadline=3.0, poll_interval=0.05, poll_interval_max=0.1)
    return SkyPilotExecutor(api, EnvironmentSecrets({"HF_TOKEN": "hf-secret-value"}), confirm_poll_seconds=0.05)


def request(name: str = "r1-01-train", secrets: tuple[str, ...] = ()) -> JobRequest:
    step = PlanStep(state="train", iteration=None, loop_label="", argv=["python", "train.py"], shell="",
                    tool_ref="", resources="default", resources_profile={"cpus": 1}, outputs=[], inputs=[],
                    group="")
    doc = launch_job(step, name=name, workflow="w", run_id="r1", loops={}, fence_sequence=1, attempt=1,
                     secret_names=secrets)
    return JobRequest(name=name, step=step, env=doc.envs, document=doc, secret_names=secrets)


def follow(executor: SkyPilotExecutor, submission, rounds: int = 10):
    tracked = TrackedJob("k", submission.job_id, submission.request_id)
    seen = []
    for _ in range(rounds):
        obs = executor.observe([tracked])["k"]
        seen.append(obs.outcome)
        if obs.job_id and not tracked.job_id:
            tracked = TrackedJob("k", obs.job_id, submission.request_id)
        if obs.outcome not in ("pending", "running"):
            return obs, seen
    return obs, seen


def test_launch_then_request_gives_job_id_then_success(executor, double):
    submission = executor.submit(request())
    assert submission.request_id and submission.job_id is None  # asynchronous: a request first
    obs, seen = follow(executor, submission)
    assert obs.outcome == "succeeded" and obs.job_id == "1"
    assert "running" in seen
    assert obs.ended_at and obs.ended_at.endswith("Z")  # the queue's end_at, as ISO-8601 UTC


def test_a_retried_launch_adopts_the_job_with_that_exact_name(executor, double):
    first = executor.submit(request("r1-01-train"))
    follow(executor, first, rounds=1)  # the request finishes: the job now exists
    second = executor.submit(request("r1-01-train"))
    assert second.job_id == "1" and second.request_id is None
    assert len(double.calls_to("/jobs/launch")) == 1
    assert executor.find_by_name("r1-01-train") == ["1"]
    assert executor.find_by_name("r1-01-train-a2") == []


@pytest.mark.parametrize(
    ("status", "outcome"),
    [("FAILED", "failed"), ("FAILED_SETUP", "failed"), ("FAILED_NO_RESOURCE", "infrastructure_failed"),
     ("FAILED_CONTROLLER", "infrastructure_failed"), ("FAILED_PRECHECKS", "configuration_failed")],
)
def test_terminal_statuses_are_classified(executor, double, status, outcome):
    double.job_statuses = ["PENDING", "RUNNING", status]
    obs, _ = follow(executor, executor.submit(request()))
    assert obs.outcome == outcome
    assert obs.message


def test_a_launch_request_that_fails_on_configuration_is_not_retried(executor, double):
    double.launch_error = ("NoCloudAccessError", "Cloud access is not set up.")
    obs, _ = follow(executor, executor.submit(request()))
    assert obs.outcome == "configuration_failed"
    assert "Cloud access is not set up" in obs.message


def test_job_missing_from_queue_is_lost_not_success(executor, double):
    obs = executor.observe([TrackedJob("k", "4242", None)])["k"]
    assert obs.outcome == "lost" and "4242" in obs.message


def test_cancel_is_confirmed_by_the_queue(executor, double):
    double.job_statuses = ["PENDING", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "RUNNING"]
    obs, _ = follow(executor, executor.submit(request()), rounds=2)
    executor.cancel([obs.job_id])
    assert executor.confirm_cancelled([obs.job_id], timeout_seconds=5)
    assert executor.observe([TrackedJob("k", obs.job_id, None)])["k"].outcome == "cancelled"


def test_secrets_are_filled_at_submit_and_never_in_the_rendered_document(executor, double):
    job = request(secrets=("HF_TOKEN",))
    assert "hf-secret-value" not in job.task_yaml
    executor.submit(job)
    [launch] = double.calls_to("/jobs/launch")
    sent = list(yaml.safe_load_all(launch["body"]["task"]))
    assert any(doc.get("secrets", {}).get("HF_TOKEN") == "hf-secret-value" for doc in sent if doc)


def test_a_missing_secret_is_a_configuration_failure_naming_it(executor):
    with pytest.raises(SubmitError) as err:
        executor.submit(request(secrets=("NOT_SET_ANYWHERE",)))
    assert err.value.category == "configuration" and "NOT_SET_ANYWHERE" in str(err.value)


def test_an_unreachable_server_is_an_infrastructure_failure():
    api = SkyPilotApi("http://127.0.0.1:9", retry_deadline=0.5)
    with pytest.raises(SubmitError) as err:
        SkyPilotExecutor(api, EnvironmentSecrets({})).submit(request())
    assert err.value.category == "infrastructure"


def test_a_launch_whose_answer_is_lost_is_reported_unknown_not_resent(double):
    api = SkyPilotApi(double.endpoint, retry_deadline=2.0, read_timeout=0.5, poll_interval=0.05)
    executor = SkyPilotExecutor(api, EnvironmentSecrets({}))
    double.delay_next(2.0, path_prefix="/jobs/launch")
    with pytest.raises(SubmitError) as err:
        executor.submit(request())
    assert err.value.category == "unknown"
    assert len(double.calls_to("/jobs/launch")) == 1  # never resent blindly

"""A SkyPilot launch or job failure whose reason quotes a secret the job was given (the task document holds
the values) reaches the ledger redacted."""

from __future__ import annotations

import base64
import importlib.util
import sys
from pathlib import Path

import pytest

from npa_workflow.adapters.secrets import EnvironmentSecrets, SecretsManagerSecrets
from npa_workflow.adapters.skypilot_api import SkyPilotApi
from npa_workflow.adapters.skypilot_executor import SkyPilotExecutor
from npa_workflow.engine.ports import JobRequest, SubmitError, TrackedJob
from npa_workflow.render.skypilot import launch_job

from .conftest import plan_step

DOUBLE_PATH = Path(__file__).resolve().parents[1] / "integration" / "skypilot" / "double.py"
SECRET = "hf-Canary-value-42/+="


def _double():
    spec = importlib.util.spec_from_file_location("npa_skypilot_double_redaction", DOUBLE_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.SkyPilotDouble


def test_a_launch_failure_quoting_the_secret_is_redacted() -> None:
    with _double()() as double:
        double.request_polls = 0
        encoded = base64.b64encode(SECRET.encode()).decode()
        double.launch_error = ("ValueError", f"bad env HF_TOKEN={SECRET} (base64 {encoded})")
        api = SkyPilotApi(double.endpoint, retry_deadline=2.0, poll_interval=0.05, poll_interval_max=0.1)
        executor = SkyPilotExecutor(api, EnvironmentSecrets({"HF_TOKEN": SECRET}), confirm_poll_seconds=0.05)
        step = plan_step(["python", "train.py"], state="train")
        doc = launch_job(step, name="r1-train", workflow="w", run_id="r1", loops={}, fence_sequence=1, attempt=1,
                         secret_names=("HF_TOKEN",))
        submission = executor.submit(JobRequest(name="r1-train", step=step, document=doc, env={},
                                                secret_names=("HF_TOKEN",)))
        observation = executor.observe([TrackedJob("k", None, submission.request_id)])["k"]
        assert observation.outcome not in ("pending", "running", "succeeded")
        assert SECRET not in observation.message and encoded not in observation.message
        assert "[redacted:HF_TOKEN]" in observation.message


def test_an_unreadable_secrets_object_means_no_redaction_values_not_an_error() -> None:
    class Refusing:
        def get_secret_value(self, **_):
            raise RuntimeError("AccessDenied")

    assert SecretsManagerSecrets("arn:aws:secretsmanager:us-east-1:1:secret:x", Refusing()).values_for_redaction() == {}


def test_an_unavailable_servers_reason_quoting_the_secret_is_redacted() -> None:
    """A 503 (the server shutting down, or a proxy in front of it) answers with a body of its own: the launch's
    error quotes it, and it may echo the document it was sent."""
    with _double()() as double:
        module = sys.modules["npa_skypilot_double_redaction"]
        double._faults.append(module._Fault(status=503, times=50, path_prefix="/jobs/launch",
                                            body={"detail": f"upstream refused env HF_TOKEN={SECRET}"}))
        api = SkyPilotApi(double.endpoint, retry_deadline=0.3, backoff_initial=0.05, backoff_max=0.1)
        executor = SkyPilotExecutor(api, EnvironmentSecrets({"HF_TOKEN": SECRET}), confirm_poll_seconds=0.05)
        step = plan_step(["python", "train.py"], state="train")
        doc = launch_job(step, name="r1-train", workflow="w", run_id="r1", loops={}, fence_sequence=1, attempt=1,
                         secret_names=("HF_TOKEN",))
        with pytest.raises(SubmitError) as caught:
            executor.submit(JobRequest(name="r1-train", step=step, document=doc, env={},
                                       secret_names=("HF_TOKEN",)))
    assert "503" in str(caught.value)
    assert SECRET not in str(caught.value) and "[redacted:HF_TOKEN]" in str(caught.value)

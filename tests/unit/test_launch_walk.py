"""A Task payload's walk to the SkyPilot request, through the launch Lambda's real handler on moto and the SkyPilot
protocol double: the job document is rendered once as data and written as YAML once, with its secret's value,
where it is sent; nothing on the way reads it back. What is sent is what `npa-workflow render` shows, the
secret's value put in."""

from __future__ import annotations

import threading
import time

import boto3
import pytest
import test_skypilot_api as sky
import yaml
from moto import mock_aws

from npa_workflow import wiring
from npa_workflow.engine.runs import RunOptions
from npa_workflow.ledger import RunRecord

double = sky.double

SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: walk}
config: {bucket: data}
resources:
  gpu: {cloud: kubernetes, cpus: 2, memory: 8Gi, accelerators: "H100:1"}
states:
  train:
    run: {argv: [python, train.py, --out, "s3://{{config.bucket}}/{{run.id}}/model.json"]}
    resources: gpu
    outputs: [{uri: "s3://{{config.bucket}}/{{run.id}}/model.json"}]
    terminal: true
"""
SECRET = "hf-walk-secret-value"


class YamlCalls:
    """Documents PyYAML builds (every loader, Python or libyaml, constructs each document through
    `BaseConstructor.construct_document`) and represents (every dumper, through `BaseRepresenter.represent`) on
    this thread: the double's server threads read what they are sent, as the real server does."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loaded: list[object] = []
        self.dumped: list[object] = []
        thread = threading.get_ident()
        construct = yaml.constructor.BaseConstructor.construct_document
        represent = yaml.representer.BaseRepresenter.represent

        def constructing(loader, node):
            data = construct(loader, node)
            if threading.get_ident() == thread:
                self.loaded.append(data)
            return data

        def representing(dumper, data):
            if threading.get_ident() == thread:
                self.dumped.append(data)
            return represent(dumper, data)

        monkeypatch.setattr(yaml.constructor.BaseConstructor, "construct_document", constructing)
        monkeypatch.setattr(yaml.representer.BaseRepresenter, "represent", representing)


@pytest.fixture
def lambda_env(double, monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1",
                       "NPA_WORKFLOW_LEDGER_TABLE": "ledger", "NPA_WORKFLOW_BUCKET": "engine",
                       "NPA_WORKFLOW_EXECUTOR": "skypilot", "SKYPILOT_API_SERVER_ENDPOINT": double.endpoint,
                       "HF_TOKEN": SECRET, "POWERTOOLS_METRICS_DISABLED": "true"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("SKYPILOT_SERVICE_ACCOUNT_TOKEN", raising=False)
    double.request_polls = 0
    with mock_aws():
        wiring.clear_cache()
        engine = wiring.engine_from_environment()  # the one the handler finds: the same environment
        engine.ledger.create_table()
        for name in ("engine", "data"):
            boto3.client("s3").create_bucket(Bucket=name)
        try:
            yield engine
        finally:
            wiring.clear_cache()


def test_a_launch_writes_its_job_document_once_reads_it_never_and_sends_what_render_shows(
        lambda_env, double, monkeypatch):
    from functions.launch.handler import handler
    from npa_workflow.embedded_aws.moto_lambda import LambdaContext
    from npa_workflow.plan.steps import resolve_step
    from npa_workflow.render import launch_document, with_secret_values

    engine = lambda_env
    engine.runs.freeze("walk-1", SPEC, "", {}, RunOptions(secret_names=("HF_TOKEN",), code_uri="s3://engine/c/1/"))
    engine.ledger.put_run(RunRecord(run_id="walk-1", workflow="walk"))
    run = engine.runs.load("walk-1")  # a warm Lambda read the frozen spec before: its YAML is not the job's
    context = LambdaContext(function_name="launch", function_version="$LATEST",
                            invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:launch",
                            memory_limit_in_mb=1024, timeout_seconds=60, log_group_name="/aws/lambda/launch")
    context._deadline = time.monotonic() + 60

    # What `npa-workflow render` previews for this wave.
    step = resolve_step(run.loaded, "train", run.run_ctx, loops={}, state_outputs={})
    name, preview = launch_document(step, workflow="walk", run_id="walk-1", loops={}, attempt=1, fence_sequence=1,
                                    secret_names=("HF_TOKEN",), extra_env=dict(engine.job_env),
                                    code_uri="s3://engine/c/1/")

    calls = YamlCalls(monkeypatch)
    result = handler({"run_id": "walk-1", "state": "train", "token": "t1"}, context)
    assert "error" not in result and "unknown" not in result, result
    assert calls.loaded == []  # nothing on the way read the document back
    header, task = calls.dumped  # one text of two documents: the header that names the job, and the task
    assert header == {"name": name, "execution": "serial"}
    assert task["secrets"] == {"HF_TOKEN": SECRET}

    [launch] = double.calls_to("/jobs/launch")
    assert launch["body"]["name"] == name
    # The preview with the secret's value put in, byte for byte (the preview itself holds no value).
    assert SECRET not in preview
    assert launch["body"]["task"] == with_secret_values(preview, {"HF_TOKEN": SECRET})

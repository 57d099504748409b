"""SkyPilotApi against the protocol double (shapes recorded from a real 0.14.1 server).

The real server is exercised by tests/integration/skypilot; here: the SUCCEEDED path (needs a
cloud for real), failure classification, retries and deadlines, auth, and that the token never
leaks.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from npa_workflow.adapters.skypilot_api import (
    API_VERSION,
    DEFAULT_USER_ID,
    DEFAULT_USER_NAME,
    SKYPILOT_VERSION,
    JobRow,
    SkyPilotApi,
    SkyPilotAuthError,
    SkyPilotError,
    SkyPilotNotFound,
    SkyPilotRequestFailed,
    SkyPilotRequestTimeout,
    SkyPilotUnavailable,
    classify_error,
    classify_job,
    classify_job_status,
    classify_request_error,
    parse_launch_job_ids,
    with_job_name,
)

DOUBLE_PATH = Path(__file__).resolve().parents[1] / "integration" / "skypilot" / "double.py"
TOKEN = "sky_s3cr3t-token-value-0123456789abcdef"
TASK = "name: train\nresources:\n  cpus: 1+\nrun: echo hi\n"


def _load_double() -> ModuleType:
    spec = importlib.util.spec_from_file_location("npa_skypilot_double", DOUBLE_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


double_mod = _load_double()


@pytest.fixture
def double() -> Iterator:
    with double_mod.SkyPilotDouble() as d:
        yield d


@pytest.fixture
def api(double) -> SkyPilotApi:
    return _client(double.endpoint)


def _client(endpoint: str, token: str | None = None, **kwargs) -> SkyPilotApi:
    options = dict(
        connect_timeout=1.0,
        read_timeout=2.0,
        retry_deadline=3.0,
        request_timeout=5.0,
        backoff_initial=0.02,
        backoff_max=0.2,
        poll_interval=0.01,
        poll_interval_max=0.05,
    )
    options.update(kwargs)
    return SkyPilotApi(endpoint, token, **options)


def _wait_job_ids(api: SkyPilotApi, request_id: str) -> list[int]:
    for _ in range(50):
        ids = api.launched_job_ids(request_id)
        if ids is not None:
            return ids
    raise AssertionError("launch request never finished")


# ---------------------------------------------------------------------------------------------
# pure functions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        ("SUCCEEDED", "succeeded"),
        ("FAILED", "failed"),
        ("FAILED_SETUP", "failed"),
        ("FAILED_NO_RESOURCE", "infrastructure_failed"),
        ("FAILED_CONTROLLER", "infrastructure_failed"),
        ("FAILED_PRECHECKS", "configuration_failed"),
        ("CANCELLED", "cancelled"),
        ("PENDING", "running"),
        ("STARTING", "running"),
        ("RUNNING", "running"),
        ("RECOVERING", "running"),
        ("CANCELLING", "running"),
        ("WINDING_DOWN", "running"),
        ("SUBMITTED", "running"),
    ],
)
def test_classify_job_status(status: str, outcome: str) -> None:
    assert classify_job_status(status) == outcome


def test_classify_job_status_rejects_unknown_statuses() -> None:
    with pytest.raises(ValueError, match="FAILED_SOMETHING_NEW"):
        classify_job_status("FAILED_SOMETHING_NEW")


@pytest.mark.parametrize(
    ("type_name", "failure"),
    [
        ("NoCloudAccessError", "configuration_failed"),
        ("sky.exceptions.NoCloudAccessError", "configuration_failed"),
        ("ValueError", "configuration_failed"),
        ("InvalidSkyPilotConfigError", "configuration_failed"),
        ("PermissionDeniedError", "configuration_failed"),
        ("CloudUserIdentityError", "configuration_failed"),
        ("YAMLError", "configuration_failed"),
        ("SomeNewAuthenticationError", "configuration_failed"),
        ("ResourcesUnavailableError", "infrastructure_failed"),
        ("KubeAPIUnreachableError", "infrastructure_failed"),
        ("ClusterNotUpError", "infrastructure_failed"),
        ("RequestInterruptedError", "infrastructure_failed"),
        ("ConnectionError", "infrastructure_failed"),
        ("TimeoutError", "infrastructure_failed"),
        ("SomethingNobodyKnows", "infrastructure_failed"),
        (None, "infrastructure_failed"),
    ],
)
def test_classify_request_error(type_name: str | None, failure: str) -> None:
    assert classify_request_error(type_name) == failure


def test_classify_error_of_client_exceptions() -> None:
    assert classify_error(SkyPilotAuthError("no", status_code=401)) == "configuration_failed"
    assert classify_error(SkyPilotUnavailable("down")) == "infrastructure_failed"
    assert classify_error(ConnectionRefusedError()) == "infrastructure_failed"
    assert classify_error(SkyPilotError("bad body", status_code=422)) == "configuration_failed"
    failed = SkyPilotRequestFailed(
        "x", request_id="r", error_type="ResourcesUnavailableError", error_message="no capacity"
    )
    assert classify_error(failed) == "infrastructure_failed"


def _row(task_id: int, status: str) -> JobRow:
    return JobRow.from_wire({"job_id": 7, "task_id": task_id, "job_name": "p", "status": status})


def test_classify_job_of_a_pipeline() -> None:
    assert classify_job([_row(0, "SUCCEEDED"), _row(1, "RUNNING")]) == "running"
    assert classify_job([_row(0, "SUCCEEDED"), _row(1, "SUCCEEDED")]) == "succeeded"
    # a task failure cancels the remaining tasks: the failure is the outcome
    assert classify_job([_row(1, "CANCELLED"), _row(0, "FAILED_NO_RESOURCE")]) == "infrastructure_failed"
    assert classify_job([_row(0, "SUCCEEDED"), _row(1, "FAILED"), _row(2, "CANCELLED")]) == "failed"
    assert classify_job([_row(0, "CANCELLED"), _row(1, "CANCELLED")]) == "cancelled"
    with pytest.raises(ValueError):
        classify_job([])


def test_job_row_strips_colour_codes() -> None:
    row = JobRow.from_wire(
        {"job_id": 1, "status": "FAILED_PRECHECKS", "failure_reason": "Run: \x1b[1msky check\x1b[0m"}
    )
    assert row.failure_reason == "Run: sky check"
    assert row.terminal and row.outcome == "configuration_failed"


def test_with_job_name() -> None:
    # a single task: a header names the job, the task is untouched
    out = with_job_name(TASK, "run-1-train")
    docs = list(yaml.safe_load_all(out))
    assert docs[0] == {"name": "run-1-train"}
    assert docs[1]["name"] == "train" and docs[1]["run"] == "echo hi"
    # already named right: unchanged
    assert with_job_name("name: j\nrun: x\n", "j") == "name: j\nrun: x\n"
    # a pipeline whose header names the job: unchanged; a different name is a bug
    pipeline = "name: j\nexecution: serial\n---\nname: a\nrun: x\n---\nname: b\nrun: y\n"
    assert with_job_name(pipeline, "j") == pipeline
    with pytest.raises(ValueError, match="header names the job 'j'"):
        with_job_name(pipeline, "other")
    group = "name: g\nexecution: parallel\n---\nname: a\nrun: x\n---\nname: b\nrun: y\n"
    with pytest.raises(ValueError):
        with_job_name(group, "other")
    # a pipeline without a header, starting with a document marker
    out = with_job_name("---\nname: a\nrun: x\n---\nname: b\nrun: y\n", "j2")
    assert [d["name"] for d in yaml.safe_load_all(out) if d] == ["j2", "a", "b"]
    with pytest.raises(ValueError):
        with_job_name("run: [unclosed", "j")
    with pytest.raises(ValueError):
        with_job_name(TASK, "")


def test_parse_launch_job_ids() -> None:
    assert parse_launch_job_ids({"job_id": [5], "handle": "x"}) == [5]
    assert parse_launch_job_ids({"job_id": 6}) == [6]
    with pytest.raises(SkyPilotError):
        parse_launch_job_ids({"job_id": None})
    with pytest.raises(SkyPilotError):
        parse_launch_job_ids(None)


def test_import_is_light() -> None:
    code = (
        "import sys, npa_workflow.adapters.skypilot_api as m; "
        "heavy = [n for n in ('sky', 'boto3', 'botocore', 'yaml', 'requests', 'pydantic') if n in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# against the protocol double
# ---------------------------------------------------------------------------------------------


def test_health(api: SkyPilotApi) -> None:
    health = api.health()
    assert health.healthy and health.api_version == str(API_VERSION) and health.version == SKYPILOT_VERSION


def test_succeeded_path(api: SkyPilotApi, double) -> None:
    rid = api.launch(TASK, "run-1-train")
    assert api.request_status([rid]) == {rid: "RUNNING"}
    job_ids = _wait_job_ids(api, rid)
    assert len(job_ids) == 1
    job_id = job_ids[0]

    seen = []
    for _ in range(10):
        rows = api.queue([job_id])
        assert [r.job_id for r in rows] == [job_id]
        seen.append(rows[0].status)
        if rows[0].terminal:
            break
    assert seen == ["PENDING", "RUNNING", "SUCCEEDED"]
    assert rows[0].outcome == "succeeded" and classify_job(rows) == "succeeded"
    assert rows[0].job_name == "run-1-train"

    # the wire: pinned versions on every call, the constant user in every body
    for call in double.calls:
        assert call["headers"]["x-skypilot-api-version"] == str(API_VERSION)
        assert call["headers"]["x-skypilot-version"] == SKYPILOT_VERSION
        assert "authorization" not in call["headers"]
    posts = [c for c in double.calls if c["method"] == "POST"]
    assert posts
    for call in posts:
        assert call["body"]["env_vars"] == {"SKYPILOT_USER_ID": DEFAULT_USER_ID, "SKYPILOT_USER": DEFAULT_USER_NAME}
    launch = double.calls_to("/jobs/launch")[0]["body"]
    assert launch["name"] == "run-1-train"
    assert launch["task"].startswith('name: "run-1-train"\n---\n')
    queue = double.calls_to("/jobs/queue/v2")[0]["body"]
    assert queue["job_ids"] == [job_id] and queue["all_users"] is True
    # /api/get is only called once the request is terminal
    assert all(c["query"]["request_id"] for c in double.calls_to("/api/get"))


def test_request_result_before_the_request_is_done(api: SkyPilotApi, double) -> None:
    double.request_polls = 3
    rid = api.launch(TASK, "slow")
    result = api.request_result(rid)
    assert not result.done and result.status == "RUNNING"
    assert api.launched_job_ids(rid) is None
    assert double.calls_to("/api/get") == []
    assert api.wait_for_request(rid).status == "SUCCEEDED"


def test_wait_for_request_is_bounded(api: SkyPilotApi, double) -> None:
    double.request_polls = 10_000
    rid = api.launch(TASK, "never")
    started = time.monotonic()
    with pytest.raises(SkyPilotRequestTimeout) as caught:
        api.wait_for_request(rid, timeout=0.3)
    assert caught.value.last_status == "RUNNING"
    assert time.monotonic() - started < 2.0


def test_job_failed_no_resource_is_an_infrastructure_failure(api: SkyPilotApi, double) -> None:
    double.job_statuses = ["PENDING", "STARTING", "FAILED_NO_RESOURCE"]
    (job_id,) = _wait_job_ids(api, api.launch(TASK, "capacity"))
    rows = [api.queue([job_id]) for _ in range(3)][-1]
    assert rows[0].status == "FAILED_NO_RESOURCE"
    assert rows[0].outcome == "infrastructure_failed"
    assert "ResourcesUnavailableError" in (rows[0].failure_reason or "")


def test_launch_request_failure_carries_the_server_error(api: SkyPilotApi, double) -> None:
    double.launch_error = ("ResourcesUnavailableError", "Failed to provision all possible launchable resources.")
    rid = api.launch(TASK, "x")
    with pytest.raises(SkyPilotRequestFailed) as caught:
        api.wait_for_request(rid)
    err = caught.value
    assert err.error_type == "ResourcesUnavailableError"
    assert err.error_message.startswith("Failed to provision")
    assert err.request_name == "sky.jobs.launch" and err.request_id == rid
    assert err.failure_class == "infrastructure_failed"

    double.launch_error = ("NoCloudAccessError", "Cloud access is not set up. Run: \x1b[1msky check\x1b[0m")
    with pytest.raises(SkyPilotRequestFailed) as caught:
        _wait_job_ids(api, api.launch(TASK, "y"))
    assert caught.value.failure_class == "configuration_failed"
    assert caught.value.error_message == "Cloud access is not set up. Run: sky check"


def test_queue_when_no_controller_runs_is_empty(api: SkyPilotApi, double) -> None:
    double.queue_error = ("ClusterNotUpError", "No in-progress managed jobs.")
    assert api.queue([1, 2]) == []
    double.queue_error = ("RuntimeError", "boom")
    with pytest.raises(SkyPilotRequestFailed):
        api.queue([1])


def test_empty_id_lists_make_no_calls(api: SkyPilotApi, double) -> None:
    assert api.queue([]) == []
    api.cancel([])
    assert api.cancel_requests([]) == []
    assert api.request_status([]) == {}
    assert double.calls == []
    with pytest.raises(TypeError):
        api.queue(["1"])  # type: ignore[list-item]


def test_find_jobs_by_name_is_exact(api: SkyPilotApi, double) -> None:
    a = _wait_job_ids(api, api.launch(TASK, "run-7-step"))[0]
    b = _wait_job_ids(api, api.launch(TASK, "run-7-step-retry"))[0]
    _wait_job_ids(api, api.launch(TASK, "RUN-7-STEP"))
    assert [r.job_id for r in api.find_jobs_by_name("run-7-step")] == [a]
    assert [r.job_id for r in api.find_jobs_by_name("run-7-step-retry")] == [b]
    assert api.find_jobs_by_name("run-7") == []
    assert double.calls_to("/jobs/queue/v2")[0]["body"]["name_match"] == "run-7-step"


def test_cancel_by_id(api: SkyPilotApi, double) -> None:
    double.job_statuses = ["PENDING", "RUNNING"]
    (job_id,) = _wait_job_ids(api, api.launch(TASK, "long"))
    api.cancel([job_id, job_id])
    assert double.calls_to("/jobs/cancel")[0]["body"]["job_ids"] == [job_id]
    assert "name" not in double.calls_to("/jobs/cancel")[0]["body"]
    assert api.queue([job_id])[0].status == "CANCELLED"
    rid = api.cancel([job_id], wait=False)
    assert rid is not None and api.request_status([rid]) == {rid: "RUNNING"}, "not waited for"
    assert api.cancel([]) is None


def test_cancel_requests(api: SkyPilotApi, double) -> None:
    double.request_polls = 10_000
    rid = api.launch(TASK, "pending")
    double.request_polls = 0
    assert api.cancel_requests([rid]) == [rid]
    assert api.request_status([rid]) == {rid: "CANCELLED"}
    result = api.request_result(rid)
    assert result.done and result.status == "CANCELLED"
    with pytest.raises(SkyPilotError, match="cancelled"):
        api.launched_job_ids(rid)


def test_unknown_request(api: SkyPilotApi) -> None:
    unknown = "0b5ad7e3-0000-4000-8000-000000000000"
    assert api.request_status([unknown]) == {}
    with pytest.raises(SkyPilotNotFound):
        api.request_result(unknown)
    with pytest.raises(SkyPilotNotFound) as caught:
        api._get_result(unknown)
    assert caught.value.status_code == 404


# -- retries, deadlines, timeouts ------------------------------------------------------------


def test_503_is_retried_with_backoff_then_succeeds(double) -> None:
    api = _client(double.endpoint, backoff_initial=0.1, backoff_max=1.0, retry_deadline=10.0)
    double.fail_next(503, times=2, path_prefix="/api/health")
    started = time.monotonic()
    assert api.health().healthy
    elapsed = time.monotonic() - started
    assert len(double.calls_to("/api/health")) == 3
    # jittered exponential backoff: at least half of 0.1 + 0.2 s
    assert elapsed >= 0.15


def test_503_on_launch_is_retried_once_accepted(api: SkyPilotApi, double) -> None:
    double.fail_next(503, times=1, path_prefix="/jobs/launch")
    rid = api.launch(TASK, "after-503")
    assert len(double.calls_to("/jobs/launch")) == 2
    assert _wait_job_ids(api, rid)


def test_503_until_the_deadline_raises_unavailable(double) -> None:
    api = _client(double.endpoint, retry_deadline=0.5, backoff_initial=0.05, backoff_max=0.1)
    double.fail_next(503, times=10_000)
    started = time.monotonic()
    with pytest.raises(SkyPilotUnavailable) as caught:
        api.health()
    elapsed = time.monotonic() - started
    assert caught.value.attempts >= 3
    assert caught.value.status_code == 503
    assert not caught.value.maybe_received
    assert elapsed < 0.5 + 0.5, "the deadline bounds the retries"
    assert "HTTP 503" in str(caught.value)


def test_connection_refused_is_retried_until_the_deadline() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = _client(f"http://127.0.0.1:{port}", retry_deadline=0.4, backoff_initial=0.05, backoff_max=0.1)
    with pytest.raises(SkyPilotUnavailable) as caught:
        api.launch(TASK, "x")  # nothing was sent: safe to retry even a launch
    assert caught.value.attempts >= 2
    assert not caught.value.maybe_received


def test_read_timeout_on_launch_is_not_retried(double) -> None:
    api = _client(double.endpoint, read_timeout=0.3, retry_deadline=5.0)
    double.delay_next(1.0, path_prefix="/jobs/launch")
    with pytest.raises(SkyPilotUnavailable) as caught:
        api.launch(TASK, "maybe")
    assert caught.value.maybe_received
    assert len(double.calls_to("/jobs/launch")) == 1, "a launch that may have been received is never resent"


def test_read_timeout_on_a_read_is_retried(double) -> None:
    api = _client(double.endpoint, read_timeout=0.3, retry_deadline=5.0)
    double.delay_next(1.0, path_prefix="/api/health")
    assert api.health().healthy
    assert len(double.calls_to("/api/health")) == 2


def test_other_http_errors_are_raised_at_once(api: SkyPilotApi, double) -> None:
    double.fail_next(500, times=5, path_prefix="/api/health")
    with pytest.raises(SkyPilotError) as caught:
        api.health()
    assert type(caught.value) is SkyPilotError and caught.value.status_code == 500
    assert len(double.calls_to("/api/health")) == 1


# -- auth and secrets ------------------------------------------------------------------------


def test_401_raises_auth_error() -> None:
    with double_mod.SkyPilotDouble(token=TOKEN) as d:
        bad = _client(d.endpoint, "sky_wrong")
        with pytest.raises(SkyPilotAuthError) as caught:
            bad.health()
        assert caught.value.status_code == 401
        assert "Invalid or expired service account token" in str(caught.value)
        assert len(d.calls) == 1, "401 is not retried"
        good = _client(d.endpoint, TOKEN)
        assert good.health().healthy
        assert d.calls[-1]["headers"]["authorization"] == f"Bearer {TOKEN}"


def test_needs_auth_health_raises_auth_error(double) -> None:
    double.recordings["get_api_health_200"]["response"]["body"]["status"] = "needs_auth"
    with pytest.raises(SkyPilotAuthError):
        _client(double.endpoint).health()


def test_token_never_leaks(double, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    api = _client(double.endpoint, TOKEN, retry_deadline=0.3, backoff_initial=0.05, backoff_max=0.1)
    assert TOKEN not in repr(api) and TOKEN not in str(api)
    assert "bearer" in repr(api)

    raised: list[BaseException] = []
    double.token = TOKEN
    double.fail_next(401, times=1)
    double.fail_next(503, times=10_000, path_prefix="/api/health")
    with pytest.raises(SkyPilotAuthError) as auth:
        api.launch(TASK, "x")
    raised.append(auth.value)
    with pytest.raises(SkyPilotUnavailable) as unavailable:
        api.health()
    raised.append(unavailable.value)
    # a server that echoes the token in an error message
    double.launch_error = ("ValueError", f"bad token {TOKEN} in request")
    with pytest.raises(SkyPilotRequestFailed) as failed:
        _wait_job_ids(api, api.launch(TASK, "y"))
    raised.append(failed.value)
    assert "***" in failed.value.error_message
    # transport failure after sending
    slow = _client(double.endpoint, TOKEN, read_timeout=0.2)
    double.delay_next(0.6, path_prefix="/jobs/launch")
    with pytest.raises(SkyPilotUnavailable) as maybe:
        slow.launch(TASK, "z")
    raised.append(maybe.value)
    # basic auth in the endpoint URL is a secret too
    basic = SkyPilotApi(f"http://admin:{TOKEN}@127.0.0.1:1/", retry_deadline=0.1)
    assert TOKEN not in repr(basic) and "admin" not in repr(basic)
    with pytest.raises(SkyPilotUnavailable) as refused:
        basic.health()
    raised.append(refused.value)
    with pytest.raises(ValueError) as bad_url:
        SkyPilotApi(f"ftp://admin:{TOKEN}@host/")
    raised.append(bad_url.value)

    for exc in raised:
        for text in (str(exc), repr(exc), repr(exc.args), json.dumps(vars(exc), default=str)):
            assert TOKEN not in text, f"{type(exc).__name__} leaks the token: {text}"
    assert TOKEN not in caplog.text
    assert any("retrying" in r.getMessage() for r in caplog.records), "retries are logged"


# -- construction from the environment ------------------------------------------------------


def test_from_environment_with_a_token() -> None:
    api = SkyPilotApi.from_environment(
        {"SKYPILOT_API_SERVER_ENDPOINT": "https://sky.example.com/", "SKYPILOT_SERVICE_ACCOUNT_TOKEN": TOKEN}
    )
    assert api.endpoint == "https://sky.example.com"
    assert api._auth_header == f"Bearer {TOKEN}"
    assert TOKEN not in repr(api)


def test_from_environment_without_endpoint() -> None:
    with pytest.raises(SkyPilotError, match="SKYPILOT_API_SERVER_ENDPOINT"):
        SkyPilotApi.from_environment({})


def test_from_environment_reads_the_token_from_secrets_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    moto = pytest.importorskip("moto")
    import boto3

    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with moto.mock_aws():
        sm = boto3.client("secretsmanager")
        plain = sm.create_secret(Name="sky-token", SecretString=TOKEN)["ARN"]
        as_json = sm.create_secret(Name="sky-token-json", SecretString=json.dumps({"token": TOKEN}))["ARN"]
        empty = sm.create_secret(Name="sky-token-empty", SecretString="{}")["ARN"]
        env = {
            "SKYPILOT_API_SERVER_ENDPOINT": "http://127.0.0.1:46580",
            "SKYPILOT_SERVICE_ACCOUNT_TOKEN": "sky_ignored",
        }
        for arn in (plain, as_json):
            api = SkyPilotApi.from_environment({**env, "SKYPILOT_TOKEN_SECRET_ARN": arn})
            assert api._auth_header == f"Bearer {TOKEN}"
        with pytest.raises(SkyPilotAuthError, match="holds no SkyPilot token"):
            SkyPilotApi.from_environment({**env, "SKYPILOT_TOKEN_SECRET_ARN": empty})
        missing = plain.replace("sky-token", "nope")
        with pytest.raises(SkyPilotAuthError, match="ResourceNotFoundException"):
            SkyPilotApi.from_environment({**env, "SKYPILOT_TOKEN_SECRET_ARN": missing})



def test_the_double_prints_nothing_for_a_client_that_resets_its_connection(double, capsys) -> None:
    # A killed process or a client's timeout resets a kept-alive socket mid-request: the double's read of the
    # request line failed in socketserver, whose handle_error printed a traceback into whatever output was
    # current (seen as a stray "Exception occurred during processing of request" line in the suite's progress).
    import struct

    host, port = double.endpoint.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n")  # a request cut short
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # SO_LINGER 0: a reset, not a FIN
    deadline = time.monotonic() + 10
    while double.dropped_connections < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert double.dropped_connections == 1, "the double never saw the reset connection"
    assert "Exception occurred" not in capsys.readouterr().err
    assert _client(double.endpoint).health() is not None  # and it still answers

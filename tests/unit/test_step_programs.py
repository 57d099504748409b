"""The example step programs in specs/steps, run as real subprocesses against a moto S3 server.

Each program is started the way the local runtime starts a step: the spec directory as the
working directory, `AWS_ENDPOINT_URL` pointing at the server, dummy credentials, and the
`NPA_WORKFLOW_*` variables. The assertions read back the objects the programs wrote.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

SPECS_DIR = Path(__file__).resolve().parents[2] / "specs"
BUCKET = "npa-workflow-examples"
TOKEN = re.compile(r"\{\{\s*config\.([A-Za-z0-9_.-]+)\s*\}\}")


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="module")
def step_env(endpoint):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("AWS_", "NPA_"))}
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        NPA_WORKFLOW_RUN_ID="unit-run",
        NPA_WORKFLOW_STATE="unit-state",
    )
    return env


@pytest.fixture(scope="module")
def s3(endpoint):
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def base(request, s3) -> str:
    """A fresh s3:// prefix per test."""
    return f"s3://{BUCKET}/{re.sub(r'[^A-Za-z0-9_-]+', '-', request.node.name)}/"


def run_step(env: dict, program: str, *args: str, attempt: int | None = None):
    return run_steps(env, [(program, *args)], attempt=attempt)[0]


def run_steps(env: dict, commands: list[tuple[str, ...]], attempt: int | None = None):
    """Run ``(program, *args)`` commands concurrently (as a fan-out would) and wait for all."""
    if attempt is not None:
        env = {**env, "NPA_WORKFLOW_ATTEMPT": str(attempt)}
    processes = [
        subprocess.Popen(
            [sys.executable, f"steps/{program}", *args],
            cwd=SPECS_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for program, *args in commands
    ]
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=60)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr))
    return results


def ok(result) -> None:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


def failed(result) -> str:
    assert result.returncode != 0, f"expected a failure, got exit 0\nstdout:\n{result.stdout}"
    return result.stderr


def read_body(s3, uri: str) -> bytes:
    bucket, _, key = uri[len("s3://") :].partition("/")
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def read_json(s3, uri: str):
    return json.loads(read_body(s3, uri))


def exists(s3, uri: str) -> bool:
    bucket, _, key = uri[len("s3://") :].partition("/")
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError:
        return False
    return True


def put_json(s3, uri: str, document) -> None:
    bucket, _, key = uri[len("s3://") :].partition("/")
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps(document).encode())


def put_dataset(s3, uri: str, records: int) -> None:
    put_json(
        s3, uri, {"count": records, "seed": 0, "records": [{"id": i, "x": 0.0, "label": i % 2} for i in range(records)]}
    )


# --- prepare / fit ------------------------------------------------------------------------


def test_prepare_writes_a_deterministic_dataset(step_env, s3, base):
    for result in run_steps(
        step_env,
        [
            ("prepare.py", "--out", f"{base}a.json", "--records", "12", "--seed", "7"),
            ("prepare.py", "--out", f"{base}b.json", "--records", "12", "--seed", "7"),
        ],
    ):
        ok(result)
    dataset = read_json(s3, f"{base}a.json")
    assert dataset["count"] == 12 and [r["id"] for r in dataset["records"]] == list(range(12))
    assert {r["label"] for r in dataset["records"]} <= {0, 1}
    assert read_body(s3, f"{base}a.json") == read_body(s3, f"{base}b.json")


def test_fit_scores_the_learning_rate_deterministically(step_env, s3, base):
    put_dataset(s3, f"{base}data.json", 20)
    cases = [("0.01", "3", 0.875), ("0.1", "1", 0.25)]  # peak lr; one decade off, one epoch
    results = run_steps(
        step_env,
        [
            (
                "fit.py",
                "--data",
                f"{base}data.json",
                "--learning-rate",
                lr,
                "--epochs",
                epochs,
                "--out",
                f"{base}{index}.json",
            )
            for index, (lr, epochs, _) in enumerate(cases)
        ],
    )
    for index, ((lr, epochs, expected), result) in enumerate(zip(cases, results, strict=True)):
        ok(result)
        metrics = read_json(s3, f"{base}{index}.json")
        assert metrics["score"] == expected
        assert metrics["records"] == 20 and metrics["learning_rate"] == float(lr)
        assert metrics["epochs"] == int(epochs)


def test_missing_input_and_bad_uris_fail_with_clear_messages(step_env, s3, base):
    missing, bad_bucket, not_s3 = run_steps(
        step_env,
        [
            ("fit.py", "--data", f"{base}nope.json", "--learning-rate", "0.01", "--out", f"{base}m.json"),
            ("prepare.py", "--out", "s3://no-such-bucket/x/data.json"),
            ("prepare.py", "--out", "/tmp/data.json"),
        ],
    )
    assert f"{base}nope.json does not exist" in failed(missing)
    assert not exists(s3, f"{base}m.json")
    assert "cannot write s3://no-such-bucket/x/data.json" in failed(bad_bucket)
    assert "expected an s3://bucket/key URI, got '/tmp/data.json'" in failed(not_s3)


# --- gate / forward_decision ------------------------------------------------------------


def test_gate_writes_the_requested_or_judged_decision(step_env, s3, base):
    put_json(s3, f"{base}metrics.json", {"score": 0.75, "learning_rate": 0.01})
    cases = [  # (--decision, --threshold, written decision)
        ("promote", "0.9", "promote"),
        ("loop_back", "0.1", "loop_back"),
        ("auto", "0.7", "promote_checkpoint"),
        ("auto", "0.8", "loop_back"),
    ]
    results = run_steps(
        step_env,
        [
            (
                "gate.py",
                "--metrics",
                f"{base}metrics.json",
                "--decision",
                decision,
                "--threshold",
                threshold,
                "--out",
                f"{base}decision-{index}.json",
            )
            for index, (decision, threshold, _) in enumerate(cases)
        ],
    )
    for index, ((_, threshold, expected), result) in enumerate(zip(cases, results, strict=True)):
        ok(result)
        assert result.stderr == ""
        assert read_json(s3, f"{base}decision-{index}.json") == {
            "decision": expected,
            "metrics_uri": f"{base}metrics.json",
            "score": 0.75,
            "threshold": float(threshold),
        }


def test_gate_warns_about_unknown_values_and_needs_a_threshold_for_auto(step_env, s3, base):
    put_json(s3, f"{base}metrics.json", {"score": 0.75})
    unknown, no_threshold = run_steps(
        step_env,
        [
            ("gate.py", "--metrics", f"{base}metrics.json", "--decision", "reject", "--out", f"{base}d1.json"),
            ("gate.py", "--metrics", f"{base}metrics.json", "--decision", "auto", "--out", f"{base}d2.json"),
        ],
    )
    ok(unknown)
    assert "no predicate will match" in unknown.stderr
    assert read_json(s3, f"{base}d1.json")["decision"] == "reject"
    assert "--decision auto needs --threshold" in failed(no_threshold)
    assert not exists(s3, f"{base}d2.json")


def test_gate_malformed_writes_broken_but_non_empty_artifacts(step_env, s3, base):
    put_json(s3, f"{base}metrics.json", {"score": 0.75})
    kinds = ["not-json", "not-object", "missing-decision"]
    results = run_steps(
        step_env,
        [
            (
                "gate.py",
                "--metrics",
                f"{base}metrics.json",
                "--decision",
                "promote",
                "--out",
                f"{base}{kind}.json",
                "--malformed",
                kind,
            )
            for kind in kinds
        ],
    )
    for result in results:
        ok(result)
    with pytest.raises(json.JSONDecodeError):
        json.loads(read_body(s3, f"{base}not-json.json"))
    assert read_json(s3, f"{base}not-object.json") == ["promote"]
    missing = read_json(s3, f"{base}missing-decision.json")
    assert isinstance(missing, dict) and missing
    assert not {"decision", "last_decision", "action"} & missing.keys()


def test_forward_decision_copies_valid_decisions_and_rejects_malformed_ones(step_env, s3, base):
    put_json(s3, f"{base}gate.json", {"action": "promote", "score": 1})
    put_json(s3, f"{base}broken.json", {"verdict": "promote"})
    good, broken, missing = run_steps(
        step_env,
        [
            ("forward_decision.py", "--from", f"{base}gate.json", "--to", f"{base}route.json"),
            ("forward_decision.py", "--from", f"{base}broken.json", "--to", f"{base}route-broken.json"),
            ("forward_decision.py", "--from", f"{base}absent.json", "--to", f"{base}route-absent.json"),
        ],
    )
    ok(good)
    assert read_json(s3, f"{base}route.json") == {"decision": "promote", "source_uri": f"{base}gate.json"}
    assert "has none of the keys decision, last_decision, action" in failed(broken)
    assert f"{base}absent.json does not exist" in failed(missing)
    assert not exists(s3, f"{base}route-broken.json") and not exists(s3, f"{base}route-absent.json")


# --- sweep barrier ------------------------------------------------------------------------


def test_select_best_picks_the_highest_score_and_names_every_missing_member(step_env, s3, base):
    for name, score in {"a": 0.4, "b": 0.9, "c": 0.7, "d": 0.9}.items():
        put_json(s3, f"{base}{name}.json", {"score": score, "learning_rate": name})
    best, incomplete = run_steps(
        step_env,
        [
            (
                "select_best.py",
                "--metrics",
                f"{base}a.json",
                "--metrics",
                f"{base}b.json",
                "--metrics",
                f"{base}c.json,{base}d.json",
                "--out",
                f"{base}best.json",
            ),
            (
                "select_best.py",
                "--metrics",
                f"{base}a.json,{base}x.json,{base}y.json",
                "--out",
                f"{base}best-incomplete.json",
            ),
        ],
    )
    ok(best)
    selection = read_json(s3, f"{base}best.json")
    assert selection["best"] == {"uri": f"{base}b.json", "score": 0.9, "learning_rate": "b"}  # first of ties
    assert [item["uri"] for item in selection["candidates"]] == [f"{base}{n}.json" for n in "abcd"]
    stderr = failed(incomplete)
    assert "2 of 3 member metrics are missing or unusable" in stderr
    assert f"{base}x.json does not exist" in stderr and f"{base}y.json does not exist" in stderr
    assert not exists(s3, f"{base}best-incomplete.json")


# --- fan-out shards and join ---------------------------------------------------------------


def test_shards_partition_the_dataset_and_join_adds_them_up(step_env, s3, base):
    put_dataset(s3, f"{base}data.json", 31)
    shard_uris = [f"{base}shards/shard-{index}.json" for index in range(3)]
    for result in run_steps(
        step_env,
        [
            (
                "shard.py",
                "--data",
                f"{base}data.json",
                "--shard-index",
                str(index),
                "--shard-count",
                "3",
                "--out",
                uri,
                "--sleep",
                "0.2",
            )
            for index, uri in enumerate(shard_uris)
        ],
    ):
        ok(result)
    assert sorted(i for uri in shard_uris for i in read_json(s3, uri)["ids"]) == list(range(31))
    ok(run_step(step_env, "join_shards.py", "--shards", ",".join(shard_uris), "--out", f"{base}join.json"))
    marker = read_json(s3, f"{base}join.json")
    assert marker["records"] == 31 and marker["positives"] == 15
    assert [item["uri"] for item in marker["shards"]] == shard_uris


def test_join_fails_clearly_when_a_shard_output_is_missing(step_env, s3, base):
    put_json(s3, f"{base}shard-0.json", {"records": 4, "positives": 2})
    put_json(s3, f"{base}shard-2.json", {"records": 3, "positives": 1})
    joined, bad_index = run_steps(
        step_env,
        [
            (
                "join_shards.py",
                "--shards",
                f"{base}shard-0.json,{base}shard-1.json,{base}shard-2.json",
                "--out",
                f"{base}join.json",
            ),
            (
                "shard.py",
                "--data",
                f"{base}data.json",
                "--shard-index",
                "3",
                "--shard-count",
                "3",
                "--out",
                f"{base}shard-3.json",
            ),
        ],
    )
    stderr = failed(joined)
    assert "1 of 3 shard outputs are missing or unusable, so the join cannot proceed" in stderr
    assert f"{base}shard-1.json does not exist" in stderr
    assert not exists(s3, f"{base}join.json")
    assert "--shard-index must be in 0..2" in failed(bad_index)


# --- trigger processing and reports ----------------------------------------------------------


def test_ingest_writes_a_manifest_of_what_landed(step_env, s3, base):
    bucket, _, key = f"{base}landing/".removeprefix("s3://").partition("/")
    s3.put_object(Bucket=bucket, Key=f"{key}a.csv", Body=b"1,2\n")
    s3.put_object(Bucket=bucket, Key=f"{key}b.csv", Body=b"3,4,5\n")
    landed, empty = run_steps(
        step_env,
        [
            ("ingest.py", "--landing", f"{base}landing/", "--out", f"{base}manifest.json"),
            ("ingest.py", "--landing", f"{base}empty/", "--out", f"{base}manifest-empty.json"),
        ],
    )
    ok(landed)
    manifest = read_json(s3, f"{base}manifest.json")
    assert manifest["count"] == 2 and manifest["total_bytes"] == 10
    assert [item["uri"] for item in manifest["objects"]] == [f"{base}landing/a.csv", f"{base}landing/b.csv"]
    assert f"found 0 object(s) under {base}empty/, need at least 1" in failed(empty)


def test_publish_embeds_the_source_with_the_run_identity(step_env, s3, base):
    put_json(s3, f"{base}best.json", {"best": {"score": 0.875}})
    ok(
        run_step(
            step_env,
            "publish.py",
            "--title",
            "Sweep winner",
            "--source",
            f"{base}best.json",
            "--out",
            f"{base}report.json",
        )
    )
    assert read_json(s3, f"{base}report.json") == {
        "title": "Sweep winner",
        "run_id": "unit-run",
        "state": "unit-state",
        "source_uri": f"{base}best.json",
        "source": {"best": {"score": 0.875}},
    }


# --- fault injection -----------------------------------------------------------------------


def test_fail_if_attempt_below_fails_early_attempts_then_succeeds(step_env, s3, base):
    out = f"{base}marker.json"
    first = run_step(step_env, "step.py", "--out", out, "--fail-if-attempt-below", "2", attempt=1)
    assert "failing attempt 1 on purpose; attempt 2 and later succeed" in failed(first)
    assert not exists(s3, out)
    ok(run_step(step_env, "step.py", "--out", out, "--fail-if-attempt-below", "2", attempt=2))
    assert read_json(s3, out) == {"attempt": 2, "message": "done", "run_id": "unit-run", "state": "unit-state"}


def test_unset_attempt_counts_as_first_and_fail_always_fails(step_env, s3, base):
    unset_attempt, always = run_steps(
        step_env,
        [
            (
                "shard.py",
                "--data",
                f"{base}d.json",
                "--shard-index",
                "0",
                "--shard-count",
                "1",
                "--out",
                f"{base}s.json",
                "--fail-if-attempt-below",
                "2",
            ),
            ("step.py", "--out", f"{base}m.json", "--fail", "simulated outage"),
        ],
    )
    assert "failing attempt 1 on purpose" in failed(unset_attempt)
    assert "failing as requested: simulated outage" in failed(always)
    assert not exists(s3, f"{base}s.json") and not exists(s3, f"{base}m.json")


# --- catalog and specs agree with the programs ----------------------------------------------


def _catalog() -> dict:
    return yaml.safe_load((SPECS_DIR / "tools.yaml").read_text())["tools"]


def _specs() -> dict[str, dict]:
    return {
        path.name: yaml.safe_load(path.read_text())
        for path in sorted(SPECS_DIR.glob("*.yaml"))
        if path.name != "tools.yaml"
    }


def _parser_help(program: str, monkeypatch) -> str:
    """The --help text of a step program, built in-process (importing boto3 once, not per program)."""
    monkeypatch.syspath_prepend(str(SPECS_DIR / "steps"))
    module_spec = importlib.util.spec_from_file_location(f"example_step_{Path(program).stem}", SPECS_DIR / program)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.build_parser().format_help()


def test_every_catalog_entry_runs_an_existing_program_with_known_flags(monkeypatch):
    for name, tool in _catalog().items():
        argv = tool["argv"]
        assert argv[0] == "python" and (SPECS_DIR / argv[1]).is_file(), name
        help_text = _parser_help(argv[1], monkeypatch)
        for flag in (item for item in argv[2:] if item.startswith("--")):
            assert flag in help_text, f"{name}: {argv[1]} has no {flag}"
        for flag in tool.get("omitFlagsWhenEmpty", []):
            assert flag in argv, f"{name}: omitFlagsWhenEmpty names {flag}, which is not in argv"


def test_every_spec_state_supplies_the_config_its_tool_needs():
    catalog = _catalog()
    for spec_name, spec in _specs().items():
        for state_name, state in spec["states"].items():
            if "toolRef" not in state:
                continue
            tool = catalog[state["toolRef"]]
            available = set(spec["config"]) | set(state.get("params", {})) | set(tool.get("configDefaults", {}))
            needed = {key for item in tool["argv"] for key in TOKEN.findall(item)}
            assert needed <= available, f"{spec_name} {state_name}: missing config {sorted(needed - available)}"

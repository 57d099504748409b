"""`npa-workflow serve` as a subprocess, and the stack commands (submit, status, cancel, resume, list) against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deadlines import deadline as scaled
from e2e_support import (
    CLI,
    SPECS,
    aws_client,
    check_shape,
    code_folder,
    free_port,
    job_gone,
    job_record,
    stop_process,
    wait_until,
)

from npa_workflow.adapters.sfn_executions import SfnExecutions
from npa_workflow.engine.start import run_id_for_object

pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("serve")]  # one serve per module


class Stack:
    def __init__(self, endpoint: str, home: Path) -> None:
        self.endpoint = endpoint
        self.home = home

    def cli(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "NPA_WORKFLOW_HOME": str(self.home), "NPA_WORKFLOW_ENDPOINT": self.endpoint}
        env.pop("AWS_ENDPOINT_URL", None)
        return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=scaled(timeout))

    def json(self, *args: str, timeout: float = 90) -> dict[str, Any]:
        done = self.cli(*args, "--json", timeout=timeout)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return json.loads(done.stdout)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("serve-home")
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home)}
    env.pop("AWS_ENDPOINT_URL", None)
    log = open(home / "serve.out", "w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*CLI, "serve", "--port", str(free_port()), "--catalog", str(SPECS / "tools.yaml")],
                            env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
    try:
        def endpoint() -> str | None:
            assert proc.poll() is None, (home / "serve.out").read_text()
            for line in (home / "serve.out").read_text().splitlines():
                if line.startswith("npa-workflow serve: endpoint "):
                    return line.split()[-1]
            return None

        yield Stack(wait_until(endpoint, 60, "serve printed no endpoint"), home)
    finally:
        stop_process(proc)
        log.close()


def spec_file(tmp_path: Path, name: str, body: str) -> Path:
    path = code_folder(tmp_path) / f"{name}.yaml"  # beside the step code submit stages
    path.write_text(f"apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {{name: {name}}}\n"
                    + textwrap.dedent(body))
    return path


def test_submit_wait_runs_a_deployed_spec_and_status_shows_its_waves(stack: Stack) -> None:
    started = time.monotonic()
    done = stack.json("submit", str(SPECS / "fanout.yaml"), "--var", "shard_sleep=0", "--wait")
    assert done["status"] == "SUCCEEDED" and done["key"].startswith("inbox/")
    assert time.monotonic() - started < scaled(60)
    report = stack.json("status", done["run_id"])
    check_shape(report)
    assert report["status"] == "SUCCEEDED" and report["run_id"] == done["run_id"]
    states = [w["state"] for w in report["waves"]]
    assert states[0] == "prepare" and states[-2:] == ["join", "done"]
    assert sorted(states[1:4]) == ["shard-0", "shard-1", "shard-2"]
    assert {w["status"] for w in report["waves"]} == {"SUCCEEDED"}
    assert {w["group"] for w in report["waves"] if w["state"].startswith("shard-")} == {"shards"}
    assert all(w["job_id"] for w in report["waves"])
    table = stack.cli("status", done["run_id"])
    assert table.returncode == 0 and "shard-2" in table.stdout and "SUCCEEDED" in table.stdout
    join = next(w for w in report["waves"] if w["state"] == "join")
    assert f"log of join attempt 1: {stack.home / 'jobs' / (join['job_id'] + '.log')}" in table.stdout
    serve_log = wait_until(lambda: f"run {done['run_id']}: SUCCEEDED" in (stack.home / "serve.out").read_text()
                           or None, 30, "serve logged no SUCCEEDED for the run")
    assert serve_log
    assert (stack.home / "serve.out").read_text().count(f"run {done['run_id']}: ") == 1  # its end, said once
    output = stack.cli("logs", done["run_id"], "join")  # the step's own output, found through the ledger
    assert output.returncode == 0, output.stderr
    assert output.stdout == (stack.home / "jobs" / f"{join['job_id']}.log").read_text() and output.stdout.strip()
    picture = stack.cli("graph", str(SPECS / "fanout.yaml"), "--run", done["run_id"], "--format", "dot")
    assert picture.returncode == 0, picture.stderr
    assert "SUCCEEDED" in picture.stdout and "#" in picture.stdout  # states coloured by the run's status


def test_a_broken_spec_is_rejected_with_path_precise_errors_and_starts_nothing(stack: Stack, tmp_path: Path) -> None:
    broken = spec_file(tmp_path, "broken-spec", """\
        initial: a
        states:
          a:
            toolRef: examples.util.step
            params: {step_out_uri: "s3://npa-workflow-examples/x.json"}
            next: nowhere
        """)
    done = stack.cli("submit", str(broken))  # checked before its code is staged: nothing reaches the bucket
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "refused before staging its code" in done.stderr
    assert "states.a.next: next state 'nowhere' is not defined" in done.stderr
    done = stack.cli("submit", str(broken), "--no-code")  # nothing to stage: the inbox's own check
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "rejected by the inbox" in done.stderr
    assert "states.a.next: next state 'nowhere' is not defined" in done.stderr
    as_json = stack.cli("submit", str(broken), "--json")
    assert as_json.returncode == 1
    doc = json.loads(as_json.stdout)
    assert doc["rejected"] and doc["run_id"] is None
    assert "states.a.next" in [e["path"] for e in doc["errors"]]
    runs = stack.json("list")["runs"]
    assert not [r for r in runs if r["workflow"] == "broken-spec"]
    sfn = aws_client("stepfunctions", stack.endpoint)
    machines = [m["name"] for m in sfn.list_state_machines()["stateMachines"]]
    assert not [m for m in machines if "adhoc" in m and "broken" in m]


def test_the_same_object_event_three_times_starts_one_execution(stack: Stack, tmp_path: Path) -> None:
    from npa_workflow.engine.inbox import InboxSettings, handle_object
    from npa_workflow.wiring import engine_from_environment

    body = spec_file(tmp_path, "dup-event", """\
        config: {bucket: npa-workflow-examples, prefix: "dup/{{run.id}}"}
        initial: only
        states:
          only:
            toolRef: examples.util.step
            terminal: true
            params: {step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/only.json"}
        """).read_bytes()
    s3 = aws_client("s3", stack.endpoint)
    key = "inbox/dup-event-once.yaml"
    put = s3.put_object(Bucket="npa-workflow-local", Key=key, Body=body)
    etag = put["ETag"]
    # the engine bucket is versioned, as deployed: the run is keyed by the upload's version
    run_id = run_id_for_object("npa-workflow-local", key, put["VersionId"], "dup-event")
    serve = json.loads((stack.home / "serve.json").read_text())
    settings = InboxSettings(state_machines=serve["state_machines"], allow_ad_hoc=True,
                             ad_hoc_prefix=serve["ad_hoc_prefix"], ad_hoc_role_arn=serve["ad_hoc_role_arn"],
                             function_arns=serve["function_arns"])
    env = {"NPA_WORKFLOW_LEDGER_TABLE": serve["ledger_table"], "NPA_WORKFLOW_BUCKET": serve["bucket"],
           "NPA_WORKFLOW_EXECUTOR": "local", "NPA_WORKFLOW_LOCAL_STATE_DIR": str(stack.home),
           "AWS_ENDPOINT_URL": stack.endpoint, "AWS_DEFAULT_REGION": "us-east-1"}
    old = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    try:
        engine = engine_from_environment(env)
        sfn = aws_client("stepfunctions", stack.endpoint)
        # serve's S3 emulation delivered it once; deliver the same event three more times.
        wait_until(lambda: engine.ledger.get_run(run_id), 30, "serve's inbox did not take the upload")
        executions = SfnExecutions(sfn)
        results = [handle_object(engine, executions, bucket="npa-workflow-local", key=key,
                                 version_id=put["VersionId"], etag=etag, settings=settings) for _ in range(3)]
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert [r.run_id for r in results] == [run_id] * 3
    assert all(r.already_started and r.status == "already_started" for r in results)
    machine = results[0].machine_arn
    executions = [e for e in sfn.list_executions(stateMachineArn=machine)["executions"]
                  if e["name"].startswith(run_id)]
    assert len(executions) == 1
    done = stack.cli("submit", "--help")  # the CLI still answers while runs go on
    assert done.returncode == 0
    final = wait_until(lambda: (r := engine.ledger.get_run(run_id)) and r.status.value != "RUNNING" and r, 60,
                       "the run did not end")
    assert final.status.value == "SUCCEEDED"


def test_cancel_stops_the_execution_and_kills_the_hanging_job(stack: Stack, tmp_path: Path) -> None:
    hang = spec_file(tmp_path, "hang-serve", """\
        config: {bucket: npa-workflow-examples, prefix: "hang/{{run.id}}"}
        initial: work
        states:
          work:
            toolRef: examples.util.step
            terminal: true
            params: {step_sleep: "600", step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/work.json"}
        """)
    run_id = stack.json("submit", str(hang))["run_id"]

    def running_job() -> str | None:
        waves = stack.json("status", run_id)["waves"]
        return waves[0]["job_id"] if waves and waves[0]["status"] == "RUNNING" and waves[0]["job_id"] else None

    job_id = wait_until(running_job, 60, "the hanging job did not start", interval=0.5)
    started = time.monotonic()
    cancelled = stack.json("cancel", run_id)
    assert cancelled["status"] == "ABORTED" and cancelled["cancelled_jobs"] == [job_id]
    assert time.monotonic() - started < scaled(30)
    assert job_gone(stack.home, job_id), "the job's process outlived the cancel"
    report = stack.json("status", run_id)
    assert report["status"] == "ABORTED" and report["waves"][0]["status"] == "CANCELLED"
    sfn = aws_client("stepfunctions", stack.endpoint)
    # moto 5.2.5 follows the stopped execution's Catch and may then describe it FAILED (local.serve.record_stops);
    # the stack records ABORTED, as AWS reports it.
    assert sfn.describe_execution(executionArn=report["execution_arn"])["status"] in ("ABORTED", "FAILED")


def test_cancel_right_after_start_signals_every_job_at_once_and_reports_no_timeout(stack: Stack,
                                                                                   tmp_path: Path) -> None:
    # issue 12 item 3: the jobs were signalled only when the ABORTED status reached reap (~10-12 s later), ran to
    # exit 0 after the cancel yet were listed CANCELLED, and the run's error read States.Timeout.
    # The members end only when `release` exists (or after 10 min): they are all running when the cancel comes,
    # however slow the machine, and one the cancel missed would exit 0 once the test releases it.
    members = [f"m{i}" for i in range(4)]
    release = tmp_path / "release"
    hold = (f"import os, time; d = time.monotonic() + 600\n"
            f"while not os.path.exists({str(release)!r}) and time.monotonic() < d: time.sleep(0.05)")
    lines = ['config: {bucket: npa-workflow-examples, prefix: "cancel-fanout/{{run.id}}"}', "initial: group",
             "states:", f"  group: {{parallel: [{', '.join(members)}], terminal: true}}"]
    lines += [f"  {m}: {{run: {{argv: [{json.dumps(sys.executable)}, -c, {json.dumps(hold)}]}}}}" for m in members]
    spec = spec_file(tmp_path, "cancel-fanout", "\n".join(lines) + "\n")
    run_id = stack.json("submit", str(spec))["run_id"]

    def all_running() -> list[str] | None:
        waves = stack.json("status", run_id)["waves"]
        running = [w["job_id"] for w in waves if w["status"] == "RUNNING" and w["job_id"]]
        return running if len(running) == len(members) else None

    job_ids = wait_until(all_running, 60, "the four jobs did not all start", interval=0.3)
    started = time.monotonic()
    cancelled = stack.json("cancel", run_id)
    took = time.monotonic() - started
    release.touch()  # a job the cancel did not end now exits 0
    # the cancel returns once the jobs are ended: at once, not when the ABORTED status has gone round moto's
    # interpreter to reap (10-12 s on an idle machine, the time the 10 s jobs of the first version outlived)
    assert took < scaled(6), f"the cancel took {took:.1f} s"
    assert cancelled["status"] == "ABORTED" and sorted(cancelled["cancelled_jobs"]) == sorted(job_ids)
    # what the cancel waited for (the ledger's attempts ended) comes after the signals: nothing is left, or only
    # a process on its way out
    wait_until(lambda: all(job_gone(stack.home, j) for j in job_ids) or None, 2.0,
               "a job's process outlived the cancel")
    records = [job_record(stack.home, j) for j in job_ids]
    assert not [r for r in records if r.get("exit_code") == 0], "a job ran to exit 0 after the cancel"
    assert {r["status"] for r in records} == {"CANCELLED"}
    report = stack.json("status", run_id)
    assert report["status"] == "ABORTED"
    assert {w["status"] for w in report["waves"]} == {"CANCELLED"}
    error = json.dumps(report.get("error"))
    assert "Timeout" not in error and "timed out" not in error, error
    assert "cancel" in error.lower(), error


def test_list_shows_the_runs(stack: Stack) -> None:
    run_id = stack.json("submit", "fanout", "--var", "shard_sleep=0")["run_id"]  # a deployed spec, by name
    other = stack.json("submit", "fanout", "--var", "shard_sleep=0", "--run-id", f"{run_id}-b")["run_id"]
    runs = stack.json("list")["runs"]
    assert all(set(r) == {"run_id", "workflow", "status", "started_at"} for r in runs)
    assert {"run_id": run_id, "workflow": "fanout"}.items() <= next(r for r in runs if r["run_id"] == run_id).items()
    assert {run_id, other} <= {r["run_id"] for r in runs}  # this test's own runs, whatever ran before it
    table = stack.cli("list")
    assert table.returncode == 0 and run_id in table.stdout
    for rid in (run_id, other):
        wait_until(lambda rid=rid: stack.json("status", rid)["status"] == "SUCCEEDED", 60,
                   "the run did not succeed", interval=0.5)


def test_resume_of_a_failed_run_replays_its_succeeded_wave(stack: Stack, tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "resume-serve", """\
        config: {bucket: npa-workflow-examples, prefix: "resume/{{run.id}}", fail_msg: "boom"}
        initial: first
        states:
          first:
            toolRef: examples.util.step
            params: {step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/first.json"}
            next: second
          second:
            toolRef: examples.util.step
            terminal: true
            params: {step_fail: "{{config.fail_msg}}",
                     step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/second.json"}
        """)
    done = stack.cli("submit", str(spec), "--wait", "--json")
    assert done.returncode == 1, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    first = stack.json("status", run_id)
    assert first["status"] == "FAILED" and "boom" in first["error"]["message"]
    said = wait_until(lambda: (text := (stack.home / "serve.out").read_text()).count(f"run {run_id}: FAILED") and text,
                      30, "serve said nothing of the failed run's end")
    assert said.count(f"run {run_id}: ") == 1  # once (twice, or not at all, before)
    resumed = stack.json("resume", run_id)
    assert not resumed["redriven"] and resumed["execution_name"] == f"{run_id}-r2"
    wait_until(lambda: stack.json("status", run_id)["status"] != "RUNNING", 60, "the resumed run did not end",
               interval=0.5)
    report = stack.json("status", run_id)
    assert report["execution_arn"].endswith(f"{run_id}-r2")
    firsts = [w for w in report["waves"] if w["state"] == "first"]
    assert len(firsts) == 1 and firsts[0]["status"] == "SUCCEEDED", firsts  # not run again
    assert len([w for w in report["waves"] if w["state"] == "second"]) >= 2  # the failed wave ran again


def test_fifty_uploads_at_once_start_fifty_runs_none_lost_none_doubled(stack: Stack) -> None:
    from concurrent.futures import ThreadPoolExecutor

    body = (b"apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: burst}\n"
            b"states:\n  only: {terminal: true}\n")  # no job: the run ends as soon as it starts
    s3 = aws_client("s3", stack.endpoint)
    keys = [f"inbox/burst-{i:02d}.yaml" for i in range(50)]
    with ThreadPoolExecutor(max_workers=10) as pool:
        # the engine bucket is versioned, as deployed: each upload's run is keyed by its version
        versions = list(pool.map(lambda k: s3.put_object(Bucket="npa-workflow-local", Key=k, Body=body)["VersionId"],
                                 keys))
    pairs = zip(keys, versions, strict=True)
    expected = {run_id_for_object("npa-workflow-local", k, v, "burst") for k, v in pairs}
    assert len(expected) == 50

    def burst_runs() -> list[dict[str, Any]] | None:
        runs = [r for r in stack.json("list")["runs"] if r["workflow"] == "burst"]
        return runs if len(runs) >= 50 and all(r["status"] == "SUCCEEDED" for r in runs) else None

    runs = wait_until(burst_runs, 90, "50 uploads did not become 50 succeeded runs")
    assert {r["run_id"] for r in runs} == expected  # none lost, none doubled
    sfn = aws_client("stepfunctions", stack.endpoint)
    executions = [e["name"] for m in sfn.list_state_machines()["stateMachines"]
                  for e in sfn.list_executions(stateMachineArn=m["stateMachineArn"])["executions"]]
    assert sorted(n for n in executions if n.startswith("burst-")) == sorted(expected)


def test_a_step_runs_the_code_submit_staged_not_the_folders_later_code(stack: Stack, tmp_path: Path) -> None:
    """issue 21: serve ran the folder's current code; a SkyPilot task starts in the staged copy (file_mounts)."""
    spec = spec_file(tmp_path, "frozen-code", """\
        config: {bucket: npa-workflow-examples, prefix: "frozen/{{run.id}}"}
        initial: wait
        states:
          wait:
            toolRef: examples.util.step
            params: {step_sleep: "3", step_out_uri: "s3://{{config.bucket}}/{{config.prefix}}/wait.json"}
            next: show
          show: {run: {shell: "cat version.txt && pwd"}, terminal: true}
        """)
    version = spec.parent / "version.txt"
    version.write_text("as submitted\n")
    run_id = stack.json("submit", str(spec))["run_id"]  # stages the folder, then returns
    version.write_text("edited after the submit\n")  # while `wait` still runs
    done = wait_until(lambda: (r := stack.json("status", run_id))["status"] != "RUNNING" and r, 60,
                      "the run did not end")
    assert done["status"] == "SUCCEEDED", done
    shown = stack.cli("logs", run_id, "show")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == "as submitted"
    assert shown.stdout.splitlines()[1].startswith(str(stack.home / "code"))  # the checkout of code/<digest>/


def test_a_failed_run_resumed_with_restage_runs_its_fixed_code_and_says_so(stack: Stack, tmp_path: Path) -> None:
    folder = tmp_path / "fix-ws"
    (folder / "steps").mkdir(parents=True)
    (folder / "steps" / "first.sh").write_text("echo first v1\n")
    (folder / "steps" / "check.sh").write_text("echo check v1; exit 3\n")
    spec = folder / "restage-serve.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: restage-serve}\n"
                    "initial: first\nstates:\n  first: {run: {shell: 'bash steps/first.sh'}, next: check}\n"
                    "  check: {run: {shell: 'bash steps/check.sh'}, terminal: true}\n")
    done = stack.cli("submit", str(spec), "--wait", "--json")
    assert done.returncode == 1, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    (folder / "steps" / "check.sh").write_text("echo check v2\n")  # the fix, in the folder
    (folder / "steps" / "first.sh").write_text("echo first v2\n")

    def ended() -> dict[str, Any] | None:
        report = stack.json("status", run_id)
        return report if report["status"] != "RUNNING" else None

    def log_of(report: dict[str, Any], state: str) -> str:
        wave = [w for w in report["waves"] if w["state"] == state][-1]
        return (stack.home / "jobs" / f"{wave['job_id']}.log").read_text()

    # A plain resume re-runs the code the run froze: the folder's fix is not seen.
    assert not stack.json("resume", run_id)["redriven"]
    again = wait_until(ended, 60, "the resumed run did not end", interval=0.5)
    assert again["status"] == "FAILED" and "check v1" in log_of(again, "check") and again["notices"] == []
    resumed = stack.cli("resume", run_id, "--restage", str(spec))
    assert resumed.returncode == 0, resumed.stderr
    assert f"code {folder.resolve()} -> s3://" in resumed.stderr
    assert "3 file(s) uploaded" in resumed.stderr  # the spec and its two steps
    assert f"{run_id}: resumed (new execution {run_id}-r3; step code " in resumed.stdout
    report = wait_until(ended, 60, "the re-staged run did not end", interval=0.5)
    assert report["status"] == "SUCCEEDED", report["error"]
    assert log_of(report, "check").strip() == "check v2"  # the fixed code ran
    firsts = [w for w in report["waves"] if w["state"] == "first"]
    assert len(firsts) == 1 and log_of(report, "first").strip() == "first v1"  # replayed, not run in the new code
    [notice] = report["notices"]
    assert notice.startswith("step code re-staged at ") and "waves launched after it run the new code" in notice
    from npa_workflow.stack_client import StackClient

    [change] = StackClient.local(stack.endpoint).run(run_id).code_changes  # on the RUN item, durably
    assert change["from"] and change["to"] != change["from"] and change["uri"].endswith(f"/code/{change['to']}/")
    assert f"{change['from'][:12]} -> {change['to'][:12]}" in notice
    unchanged = stack.cli("resume", run_id, "--restage", str(spec))  # nothing to resume: it SUCCEEDED
    assert unchanged.returncode == 1 and "SUCCEEDED: nothing to resume" in unchanged.stderr


def test_a_raw_upload_runs_the_code_bundle_uploaded_beside_it(stack: Stack, tmp_path: Path) -> None:
    """issue 21: a raw `aws s3 cp spec.yaml …/inbox/` carried no code; its bundle (`<name>.code.tar.gz`) does."""
    import io
    import tarfile

    s3 = aws_client("s3", stack.endpoint)
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        body = b"echo from the bundle\n"
        info = tarfile.TarInfo("steps/bundled.sh")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    s3.put_object(Bucket="npa-workflow-local", Key="inbox/bundled.code.tar.gz", Body=packed.getvalue())
    spec = (b"apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: bundled}\n"
            b"states:\n  only: {run: {shell: 'bash steps/bundled.sh && pwd'}, terminal: true}\n")
    version = s3.put_object(Bucket="npa-workflow-local", Key="inbox/bundled.yaml", Body=spec)["VersionId"]
    run_id = run_id_for_object("npa-workflow-local", "inbox/bundled.yaml", version, "bundled")  # versioned, as deployed

    def ended() -> dict[str, Any] | None:
        done = stack.cli("status", run_id, "--json")
        report = json.loads(done.stdout) if done.returncode == 0 else None
        return report if report and report["status"] != "RUNNING" else None

    report = wait_until(ended, 60, "the raw upload did not run", interval=0.5)
    assert report["status"] == "SUCCEEDED", report["error"]
    [wave] = report["waves"]
    said, where = (stack.home / "jobs" / f"{wave['job_id']}.log").read_text().splitlines()[-2:]
    assert said == "from the bundle"
    assert Path(where).parent == stack.home / "code"  # a checkout of the staged bundle, not serve's folder

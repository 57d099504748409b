"""A user's mistake gets one line naming where, what and the fix, exit 2 for usage and 1 for failures (README:
exit codes), never a traceback; and `status`/`list` answer for the runs `npa-workflow run` kept on this machine."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from deadlines import deadline as scaled
from typer.testing import CliRunner

from npa_workflow.cli.app import app
from npa_workflow.errors import SpecError
from npa_workflow.spec.loader import Limits, load_yaml_file

SPEC = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: tiny}
initial: hello
states:
  hello: {run: {shell: "echo hello from tiny"}, terminal: true}
"""


def invoke(*args: str, env: dict[str, str] | None = None):
    result = CliRunner().invoke(app, list(args), env=env)
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def closed_port_url() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SPEC)
    return path


def test_render_out_onto_a_file_is_one_line_not_a_traceback(spec: Path, tmp_path: Path) -> None:
    in_the_way = tmp_path / "jobs"
    in_the_way.write_text("not a folder")
    result = invoke("render", str(spec), "--out", str(in_the_way))
    assert result.exit_code == 1
    assert f"--out {in_the_way}: it is a file, not a folder (fix:" in result.output
    assert in_the_way.read_text() == "not a folder"


def test_render_out_where_no_folder_can_be_made(spec: Path, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    result = invoke("render", str(spec), "--out", str(tmp_path / "f" / "jobs"))
    assert result.exit_code == 1
    assert "cannot write there: Not a directory (fix: name a folder you can write to" in result.output


@pytest.mark.parametrize("command", ["plan", "render"])
def test_a_run_id_no_run_could_have_is_a_usage_error(spec: Path, command: str) -> None:
    result = invoke(command, str(spec), "--run-id", "bad id/..")
    assert result.exit_code == 2
    assert "run id 'bad id/..' is not valid" in result.output


def test_a_catalog_folder_is_named_as_a_folder(spec: Path, tmp_path: Path) -> None:
    result = invoke("validate", str(spec), "--catalog", str(tmp_path))
    assert result.exit_code == 1
    assert "is a directory, not a file (fix: name the .yaml file itself, not its folder)" in result.output
    assert "spec's" not in result.output


def test_a_spec_from_a_pipe_is_read_up_to_the_limit_only(tmp_path: Path) -> None:
    """A pipe or device has no size to check before reading (/dev/zero would fill memory): the reader stops just
    past the limit, so a writer offering 8 MiB gets a broken pipe instead of having it all read."""
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    written = []

    def write() -> None:
        with open(fifo, "wb", buffering=0) as fh:
            try:
                for _ in range(1024):
                    written.append(fh.write(b"#" * 8192))
            except BrokenPipeError:
                pass  # the reader stopped at its limit

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with pytest.raises(SpecError) as caught:
        load_yaml_file(fifo, Limits(max_bytes=1024))
    writer.join(10)
    assert "file is larger than 1024 bytes" in str(caught.value.problems[0].message)
    assert sum(written) < 1024 * 1024  # at most the limit plus what the pipe buffered


def test_logs_of_an_unreachable_stack_is_one_line(tmp_path: Path) -> None:
    result = invoke("logs", "some-run", "--endpoint", closed_port_url(),
                    env={"NPA_WORKFLOW_HOME": str(tmp_path), "AWS_MAX_ATTEMPTS": "1"})
    assert result.exit_code == 1
    assert result.output.startswith("npa-workflow logs: error: cannot reach the stack at http://127.0.0.1:")
    assert "(fix: start it with `npa-workflow serve`" in result.output


@pytest.mark.parametrize("name", ["missing.yaml", "specs/fanout", "."])
def test_submit_of_a_path_that_is_no_file_names_it_and_uploads_nothing(name: str) -> None:
    """Before: a typo'd path went to the inbox as the name of a deployed spec (or, here, failed to reach it)."""
    result = invoke("submit", name, "--endpoint", closed_port_url())
    assert result.exit_code == 1
    assert result.output.startswith(f"{name}: $: ")
    assert "file not found" in result.output or "is a directory" in result.output
    assert "cannot reach" not in result.output


@pytest.mark.parametrize("command", [["status", "r1"], ["cancel", "r1"], ["resume", "r1"], ["submit", "x"]])
def test_no_stack_named_is_a_usage_error_with_the_options(command: list[str], tmp_path: Path) -> None:
    env = {"NPA_WORKFLOW_HOME": str(tmp_path), "NPA_WORKFLOW_ENDPOINT": ""}
    result = invoke(*command, env=env)
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line
    assert line.startswith(f"npa-workflow {command[0]}: error: no stack named (fix: --endpoint URL")


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One real `npa-workflow run` of a one-step spec, its home kept for `status` and `list`."""
    root = tmp_path_factory.mktemp("local-run")
    (root / "tiny.yaml").write_text(SPEC)
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(root / "home")}
    done = subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "run",
                           str(root / "tiny.yaml"), "--run-id", "tiny-1", "--json"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return root / "home", json.loads(done.stdout)


def test_status_of_a_local_run_without_a_stack_is_its_report(local_run: tuple[Path, dict]) -> None:
    home, printed = local_run
    env = {"NPA_WORKFLOW_HOME": str(home), "NPA_WORKFLOW_ENDPOINT": ""}
    as_json = invoke("status", "tiny-1", "--json", env=env)
    assert as_json.exit_code == 0, as_json.output
    report = json.loads(as_json.output)
    assert report["status"] == printed["status"] == "SUCCEEDED"
    assert [w["state"] for w in report["waves"]] == [w["state"] for w in printed["waves"]] == ["hello"]
    shown = invoke("status", "tiny-1", env=env)
    assert shown.exit_code == 0
    assert "SUCCEEDED" in shown.output
    assert f"log of hello attempt 1: {home / 'jobs'}" in shown.output


def test_status_of_a_local_run_that_never_ended(local_run: tuple[Path, dict], tmp_path: Path) -> None:
    """A run killed before its execution ended has meta.json but no report: said, with how to continue it."""
    home, _ = local_run
    killed = tmp_path / "runs" / "tiny-2"
    killed.mkdir(parents=True)
    meta = json.loads((home / "runs" / "tiny-1" / "meta.json").read_text())
    meta["executions"] = [{k: v for k, v in meta["executions"][0].items() if k not in ("status", "ended_at")}]
    (killed / "meta.json").write_text(json.dumps(meta))
    env = {"NPA_WORKFLOW_HOME": str(tmp_path), "NPA_WORKFLOW_ENDPOINT": ""}
    result = invoke("status", "tiny-2", env=env)
    assert result.exit_code == 1
    assert "local run 'tiny-2' has no report yet" in result.output
    assert "--run-id tiny-2 --resume" in result.output
    listed = invoke("list", "--json", env=env)
    assert json.loads(listed.output)["runs"] == [
        {"run_id": "tiny-2", "workflow": "tiny", "status": "INTERRUPTED", "started_at": meta["executions"][0]
         ["started_at"]}]


def test_list_without_a_stack_lists_the_local_runs(local_run: tuple[Path, dict]) -> None:
    home, _ = local_run
    result = invoke("list", "--json", env={"NPA_WORKFLOW_HOME": str(home), "NPA_WORKFLOW_ENDPOINT": ""})
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["runs"]
    assert (row["run_id"], row["workflow"], row["status"]) == ("tiny-1", "tiny", "SUCCEEDED")
    assert row["started_at"].startswith("20")


def test_list_without_a_stack_or_local_runs_says_where_it_looked(tmp_path: Path) -> None:
    result = invoke("list", env={"NPA_WORKFLOW_HOME": str(tmp_path), "NPA_WORKFLOW_ENDPOINT": ""})
    assert result.exit_code == 0
    assert result.output.strip() == (f"npa-workflow list: no local run under {tmp_path / 'runs'} (runs of "
                                     "`npa-workflow run` from this folder or $NPA_WORKFLOW_HOME; a serve stack's: "
                                     "--endpoint URL)")


@pytest.mark.parametrize("home", ["a-file", "never-made"])
def test_jobs_cancel_where_no_job_ever_ran_is_one_line(tmp_path: Path, home: str) -> None:
    """A home that is a file, or that does not exist: no such job, and nothing is created."""
    if home == "a-file":
        (tmp_path / home).write_text("")
    result = invoke("jobs", "cancel", "local-0123456789abcdef", env={"NPA_WORKFLOW_HOME": str(tmp_path / home)})
    assert result.exit_code == 1
    assert result.output.startswith("npa-workflow jobs cancel: error: no local job 'local-0123456789abcdef' under ")
    assert not (tmp_path / "never-made").exists()


def test_inbox_errors_are_said_of_the_users_spec_file() -> None:
    """`submit spec.yaml --var x=1` goes up as a run request carrying the spec inline: its errors were printed as
    `s3://…/inbox/….yaml: spec.--var x: …`; they are the file's own, at the file's paths."""
    from npa_workflow.cli.stack import as_spec_file_errors

    inbox = "s3://b/inbox/demo-1.yaml"
    errors = [{"path": "spec.states.a.next", "message": "next state 'nowhere' is not defined", "file": inbox},
              {"path": "spec.--var x", "message": "no token reads config.x", "file": inbox},
              {"path": "spec", "message": "a spec must be a mapping", "file": inbox},
              {"path": "options.retries", "message": "must be <= 20", "file": inbox}]
    assert [(e["file"], e["path"]) for e in as_spec_file_errors(errors, "demo.yaml", inline=True)] == [
        ("demo.yaml", "states.a.next"), ("demo.yaml", "--var x"), ("demo.yaml", "$"), (inbox, "options.retries")]
    plain = [{"path": "apiVersion", "message": "missing", "file": inbox}]
    assert as_spec_file_errors(plain, "demo.yaml", inline=False) == [{**plain[0], "file": "demo.yaml"}]


def test_graph_run_of_a_local_run_id_colours_it_from_its_report(local_run: tuple[Path, dict]) -> None:
    home, _ = local_run
    result = invoke("graph", str(home.parent / "tiny.yaml"), "--run", "tiny-1",
                    env={"NPA_WORKFLOW_HOME": str(home), "NPA_WORKFLOW_ENDPOINT": ""})
    assert result.exit_code == 0, result.output
    assert 's_hello(["hello<br>terminal<br>SUCCEEDED"])' in result.output


def test_graph_run_of_an_id_that_is_neither_a_file_nor_a_local_run(spec: Path, tmp_path: Path) -> None:
    result = invoke("graph", str(spec), "--run", "nope-1",
                    env={"NPA_WORKFLOW_HOME": str(tmp_path), "NPA_WORKFLOW_ENDPOINT": ""})
    assert result.exit_code == 1
    assert result.output.startswith("npa-workflow graph: error: --run nope-1: no such report file, and no local run "
                                    f"'nope-1' under {tmp_path / 'runs'} (fix: a stack's run needs --endpoint URL")


@pytest.mark.parametrize("given", ["s3://engine-bucket", "s3://engine-bucket/", "engine-bucket"])
def test_render_code_bucket_takes_a_bucket_or_its_s3_url(spec: Path, given: str) -> None:
    result = invoke("render", str(spec), "--code-bucket", given)
    assert result.exit_code == 0, result.output
    assert "/npa-workflow/code: s3://engine-bucket/code/" in result.output
    assert "s3://s3://" not in result.output


@pytest.mark.parametrize("given", ["my bucket", "s3://My_Bucket/", "ab", ""])
def test_render_code_bucket_that_is_no_bucket_name_is_a_usage_error(spec: Path, given: str) -> None:
    result = invoke("render", str(spec), "--code-bucket", given)
    assert result.exit_code == 2
    assert "is not an S3 bucket name" in result.output


def test_status_watch_json_prints_the_report_once_the_run_ended(tmp_path: Path) -> None:
    """`status --watch --json` printed the report at once, RUNNING, instead of following the run until it ends."""
    import time

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "tools.yaml").write_text("apiVersion: npa.workflow.tools/v1\ntools: {}\n")
    (specs / "nap.yaml").write_text(SPEC.replace("name: tiny", "name: nap").replace("echo hello from tiny", "sleep 2"))
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(tmp_path / "home")}
    env.pop("NPA_WORKFLOW_ENDPOINT", None)
    cli = [sys.executable, "-c", "from npa_workflow.cli.app import main; main()"]
    port = closed_port_url().rsplit(":", 1)[1]
    log = tmp_path / "serve.out"
    with open(log, "w") as out:
        serve = subprocess.Popen([*cli, "serve", "--port", port, "--catalog", str(specs / "tools.yaml")], env=env,
                                 stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + scaled(60)
        while "endpoint http://" not in log.read_text():
            assert serve.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        endpoint = ["--endpoint", f"http://127.0.0.1:{port}"]
        run_id = subprocess.run([*cli, "submit", str(specs / "nap.yaml"), "--no-code", *endpoint], env=env, text=True,
                                capture_output=True, timeout=60, check=True).stdout.strip()
        done = subprocess.run([*cli, "status", run_id, "--watch", "--json", *endpoint], env=env, text=True,
                              capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["status"] == "SUCCEEDED"
        assert [(w["state"], w["status"]) for w in report["waves"]] == [("hello", "SUCCEEDED")]
    finally:
        serve.terminate()
        serve.wait(timeout=30)


@pytest.mark.parametrize("command", ["plan", "render", "compile", "graph"])
def test_a_catalog_given_as_the_spec_is_one_line(command: str, tmp_path: Path) -> None:
    """It was a line per workflow field the catalog lacks (apiVersion, kind, states, …)."""
    catalog = tmp_path / "tools.yaml"
    catalog.write_text("apiVersion: npa.workflow.tools/v1\ntools: {}\n")
    result = invoke(command, str(catalog))
    assert result.exit_code == 1
    assert result.output == (f"{catalog}: apiVersion: this is a tool catalog (npa.workflow.tools/v1), not a workflow "
                             "spec (fix: name a workflow spec (apiVersion: npa.workflow/v0.0.1); give a catalog with "
                             "--catalog FILE)\n")


def test_status_of_a_local_run_whose_process_was_killed_is_built_from_its_ledger(tmp_path: Path) -> None:
    """No report was written (kill -9 mid-wave): `status` reads the run's ledger, says INTERRUPTED and how to go
    on; it said only "no report yet"."""
    import signal
    import time

    (tmp_path / "nap.yaml").write_text(SPEC.replace("name: tiny", "name: nap")
                                       .replace("echo hello from tiny", "sleep 60"))
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(tmp_path / "home")}
    env.pop("NPA_WORKFLOW_ENDPOINT", None)
    runtime = subprocess.Popen([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "run",
                                str(tmp_path / "nap.yaml"), "--run-id", "nap-1"], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    jobs = tmp_path / "home" / "jobs"
    try:
        deadline = time.monotonic() + scaled(60)
        while not list(jobs.glob("local-*.log")):  # the wave's job has started
            assert runtime.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        runtime.send_signal(signal.SIGKILL)
        runtime.wait(timeout=10)
        status = {"NPA_WORKFLOW_HOME": str(tmp_path / "home"), "NPA_WORKFLOW_ENDPOINT": ""}
        report = json.loads(invoke("status", "nap-1", "--json", env=status).output)
        assert report["status"] == "INTERRUPTED"
        assert [w["state"] for w in report["waves"]] == ["hello"]
        assert "--run-id nap-1 --resume" in report["error"]["message"]
        assert json.loads(invoke("status", "nap-1", "--watch", "--json", env=status).output)["status"] == \
            "INTERRUPTED"  # a run no process holds is not followed forever
    finally:
        if runtime.poll() is None:
            runtime.kill()
        for record in jobs.glob("local-*.json"):  # the job outlived its runtime (kill -9): stop it by exact id
            invoke("jobs", "cancel", record.stem, "--grace", "0", env={"NPA_WORKFLOW_HOME": str(tmp_path / "home")})

"""`serve` follows a running run's execution by being told of its end, not by describing it at every tick.

While a run waits on a long job, each loop pass used to call DescribeExecution for it (4 a second at the default
tick, a round trip through moto each). Now a pass describes a run only when it has news (its execution ended or
was stopped, its RUN item was written) and every run every `FOLLOW_SECONDS` as a safety net. `serve` runs in this
process so that its calls of the Executions port can be counted.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_support import CLI, aws_client, serve_in_this_process, wait_until, workspace, write_spec  # noqa: E402

from npa_workflow.adapters.sfn_executions import SfnExecutions  # noqa: E402
from npa_workflow.embedded_aws import moto_lambda  # noqa: E402
from npa_workflow.ledger import DynamoLedger, RunStatus  # noqa: E402
from npa_workflow.local import serve as serve_module  # noqa: E402
from npa_workflow.protocol import functions as function_table  # noqa: E402
from npa_workflow.protocol.stack import LOCAL_LEDGER_TABLE  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TICK = 0.2
PASSES = 12  # watch passes observed while the job runs: with no news, no describe
LONG = """\
config: {bucket: npa-workflow-examples}
initial: hold
states:
  hold: {run: {argv: ["sleep", "120"]}, terminal: true}
"""


def test_a_waiting_run_is_described_once_a_second_not_every_tick_and_its_stop_is_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    ws = workspace(tmp_path)
    spec = write_spec(ws, "follow-long", LONG)
    described: list[float] = []
    original = SfnExecutions.describe

    def describe(self: SfnExecutions, arn: str):  # type: ignore[no-untyped-def]
        described.append(time.monotonic())
        return original(self, arn)

    monkeypatch.setattr(SfnExecutions, "describe", describe)
    # The once-a-FOLLOW_SECONDS safety net, moved past the test's end: what is seen is the news mechanism alone,
    # whatever this machine's speed (the first pass describes every followed run, before the run exists).
    monkeypatch.setattr(serve_module, "FOLLOW_SECONDS", 3600.0)
    with serve_in_this_process(ws / "tools.yaml", tmp_path / "home", tick_seconds=TICK) as (_, env):
        url = env["NPA_WORKFLOW_ENDPOINT"]
        done = subprocess.run([*CLI, "submit", str(spec)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        ledger = DynamoLedger(LOCAL_LEDGER_TABLE, aws_client("dynamodb", url))

        def launched() -> str | None:
            runs = [r for r in ledger.list_runs(limit=5) if r.workflow == "follow-long"]
            waves = ledger.active_waves() if runs else []
            return runs[0].run_id if runs and any(w.job_id for w in waves if w.run_id == runs[0].run_id) else None

        run_id = wait_until(launched, 60, "the run's job never launched")

        def watch_passes() -> int:
            return moto_lambda.invocations.get(function_table.WATCH.handler, 0)

        # The window: PASSES watch passes (one a tick while a run is RUNNING) of nothing but a job running.
        passes, count, start = watch_passes(), len(described), time.monotonic()
        wait_until(lambda: watch_passes() - passes >= PASSES, 60, "serve's loop made no watch passes",
                   interval=0.05)
        seen, elapsed = len(described) - count, time.monotonic() - start
        assert ledger.get_run(run_id).status == RunStatus.RUNNING  # the window saw a waiting run only
        # Each tick used to describe it (>= PASSES); now only news does, and the safety net is out of the window:
        # at most the window's edges (a pass under way when it opened, the RUN item's write seen late).
        assert seen <= 2, f"{seen} DescribeExecution calls in {elapsed:.1f} s ({watch_passes() - passes} passes)"

        # A stop is news (record_stops tells it): its run's end is recorded and said, with no safety net to
        # fall back on.
        done = subprocess.run([*CLI, "cancel", run_id], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        said: list[str] = []
        wait_until(lambda: said.append(capsys.readouterr().out) or f"run {run_id}: ABORTED" in "".join(said), 60,
                   "serve never said the stopped run's end")
        assert ledger.get_run(run_id).status == RunStatus.ABORTED

"""The durable state's lock after its holder is killed mid-fork (`--resume` right after kill -9).

A runtime starts processes on threads (the executor starts the next job's wrapper ahead, right after each
launch). Killed while one is between fork and exec, it leaves that child holding a copy of the lock's file
descriptor, and so the flock, until the child's exec closes it (close-on-exec). The suite once saw `--resume`
refused as "in use" that way, under load, right after a kill -9. These tests make the moment deterministic: the
killed holder's forked child waits for the test before it execs; taking the state over waits for the handoff
(`durable_aws.HANDOFF_WAIT_S`) instead of refusing, and a live holder is still refused.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from e2e_support import run, workspace, write_spec  # noqa: E402
from test_e2e_cli import TWO_STEPS  # noqa: E402

from npa_workflow.embedded_aws.durable_aws import RUN_STATE_DIR, DurableAws, StateInUse, held_elsewhere  # noqa: E402

pytestmark = pytest.mark.e2e

# The holder: takes the state, forks a child that keeps the descriptor until the test says exec, prints the
# child's pid, then waits to be killed.
HOLDER = """
import os, sys, time
from pathlib import Path
from npa_workflow.embedded_aws.durable_aws import DurableAws
state = DurableAws(Path(sys.argv[1]))
child = os.fork()
if child == 0:
    os.read(0, 1)  # the moment between fork and exec, held open by the test
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)"])
print(child, flush=True)
time.sleep(60)
"""


@contextlib.contextmanager
def killed_mid_fork(root: Path) -> Iterator[tuple[int, Callable[[float], None]]]:
    """A holder of `root`'s state killed (SIGKILL, reaped) while its forked child has not exec'd yet. Yields the
    child's pid and `release(after_s)`: the child execs that many seconds later, on a thread."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdin is not None and holder.stdout is not None
    go = holder.stdin
    child = int(holder.stdout.readline())
    try:
        holder.send_signal(signal.SIGKILL)
        assert holder.wait(timeout=30) == -signal.SIGKILL

        def release(after_s: float) -> None:
            def go_on() -> None:
                time.sleep(after_s)
                with contextlib.suppress(OSError):  # the test already ended (it failed): nobody to release
                    go.write("x")
                    go.flush()

            threading.Thread(target=go_on, daemon=True).start()

        yield child, release
    finally:
        holder.kill()
        holder.wait()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


@pytest.mark.timeout(60)
def test_a_holder_killed_mid_fork_hands_its_state_over_once_the_child_execs(tmp_path: Path) -> None:
    root = tmp_path / "aws"
    with killed_mid_fork(root) as (child, release):
        # The holder is gone, yet its forked child still holds the lock: what the refused resume met.
        assert held_elsewhere(root)
        with pytest.raises(StateInUse):
            DurableAws(root, wait_s=0)
        release(0.5)
        state = DurableAws(root)  # waits for the handoff (up to HANDOFF_WAIT_S) instead of refusing
        try:
            assert held_elsewhere(root)  # taken: a third process is refused again
            os.kill(child, 0)  # the child is alive: its exec let go of the lock, not its exit
        finally:
            state.close()


@pytest.mark.timeout(60)
def test_a_live_holder_is_still_refused_once_the_handoff_wait_is_over(tmp_path: Path) -> None:
    root = tmp_path / "aws"
    held = DurableAws(root)
    try:
        began = time.monotonic()
        with pytest.raises(StateInUse, match="is in use by another npa-workflow process"):
            DurableAws(root, wait_s=0.3)
        assert time.monotonic() - began >= 0.3  # it waited, then refused
        assert held_elsewhere(root, wait_s=0.1)
    finally:
        held.close()
    assert not held_elsewhere(root)


@pytest.mark.timeout(120)
def test_a_resume_right_after_a_kill_mid_fork_runs_instead_of_saying_in_use(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    spec = write_spec(ws, "twostep", TWO_STEPS)
    home, run_id = tmp_path / "home", "handoff-1"
    assert run(spec, home, run_id=run_id, variables={"b_sleep": "0"})["status"] == "SUCCEEDED"
    with killed_mid_fork(home / "runs" / run_id / RUN_STATE_DIR) as (_, release):
        release(0.5)
        # Both the runtime's pre-check (refused before anything starts) and the state's own lock wait.
        resumed = run(spec, home, run_id=run_id, resume=True, variables={"b_sleep": "0"})
    assert resumed["status"] == "SUCCEEDED", resumed["error"]
    assert resumed["execution_arn"].endswith(f":{run_id}-r2")

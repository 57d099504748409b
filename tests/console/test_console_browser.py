"""The console in a real browser: Debian's headless Chromium driven by Playwright (never `playwright install`),
against a real `npa-workflow serve` (its own console, told of every ledger write) and a local run's folder.

One browser and one serve for the module. Screenshots are kept under tests/console/artifacts/ (or
$NPA_CONSOLE_ARTIFACTS) and checked by structure — elements present, colours by status — not by pixels.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_support import ARTIFACTS, CHROMIUM_ARGS, SPECS, LocalRunWriter, chromium_path, stop_process, wait_until

from npa_workflow.ledger import DecisionRecord, RunRecord, RunStatus, WaveStatus

pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("console-browser")]
CLI = [sys.executable, "-c", "from npa_workflow.cli.app import main; main()"]
FILLS = {"st-SUCCEEDED": "rgb(183, 225, 161)", "st-RUNNING": "rgb(169, 200, 245)",
         "st-FAILED": "rgb(244, 163, 163)", "st-CANCELLED": "rgb(207, 207, 207)", "st-none": "rgb(255, 255, 255)"}


class Stack:
    def __init__(self, endpoint: str, console: str, home: Path, ws: Path) -> None:
        self.endpoint, self.console, self.home, self.ws = endpoint, console.rstrip("/"), home, ws

    def submit(self, name: str, body: str) -> str:
        path = self.ws / "adhoc" / f"{name}.yaml"
        path.write_text(f"apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {{name: {name}}}\n"
                        + textwrap.dedent(body))
        env = {**os.environ, "NPA_WORKFLOW_HOME": str(self.home)}
        env.pop("AWS_ENDPOINT_URL", None)
        done = subprocess.run([*CLI, "submit", str(path), "--endpoint", self.endpoint, "--no-code"], env=env,
                              capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("console-home")
    ws = tmp_path_factory.mktemp("console-ws")
    (ws / "tools.yaml").write_text((SPECS / "tools.yaml").read_text())  # no other spec: nothing else deployed
    (ws / "adhoc").mkdir()
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(home)}
    env.pop("AWS_ENDPOINT_URL", None)
    out = open(home / "serve.out", "w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*CLI, "serve", "--console-port", "0", "--catalog", str(ws / "tools.yaml")],
                            env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        def urls() -> tuple[str, str] | None:
            assert proc.poll() is None, (home / "serve.out").read_text()
            found = {}
            for line in (home / "serve.out").read_text().splitlines():
                for what in ("endpoint", "console"):
                    if line.startswith(f"npa-workflow serve: {what} "):
                        found[what] = line.split()[-1]
            return (found["endpoint"], found["console"]) if len(found) == 2 else None

        endpoint, console = wait_until(urls, 90, "serve printed its endpoint and console", interval=0.2)
        yield Stack(endpoint, console, home, ws)
    finally:
        stop_process(proc)
        out.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # A fresh profile each launch (Playwright's own temporary user-data-dir); nothing fetched from outside.
        chromium = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


def node_class(page: Any, state: str) -> str:
    return page.get_attribute(f'svg.graph g.node[data-state="{state}"]', "class") or ""


def wait_class(page: Any, state: str, cls: str, timeout_ms: float) -> None:
    page.wait_for_function(
        "([s, c]) => { const g = document.querySelector(`svg.graph g.node[data-state=\"${s}\"]`);"
        " return g && g.classList.contains(c); }", arg=[state, cls], timeout=timeout_ms, polling=20)


def shot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 10_000  # a rendered page, not an empty one
    return path


def rect_fill(page: Any, state: str) -> str:
    return page.evaluate("(s) => getComputedStyle(document.querySelector("
                         "`svg.graph g.node[data-state=\"${s}\"] > rect`)).fill", state)


def test_a_state_turns_from_running_to_succeeded_live_and_its_log_reads(stack: Stack, page: Any) -> None:
    release = stack.ws / "release-hold"
    script = f"echo step-says-hello; while [ ! -e {release} ]; do sleep 0.02; done; echo released"
    run_id = stack.submit("hold", f"""\
        initial: hold
        states:
          hold:
            run: {{argv: ["sh", "-c", "{script}"]}}
            next: after
          after: {{run: {{argv: ["sh", "-c", "echo after-ran"]}}, terminal: true}}
        """)
    page.goto(stack.console + "/")
    row = page.locator(f'tr.run-row[data-run="{run_id}"]')
    assert row.count() == 1
    row.locator("a").click()
    page.wait_for_url(f"**/runs/{run_id}")
    wait_class(page, "hold", "st-RUNNING", 30_000)
    assert "st-none" in node_class(page, "after")
    page.wait_for_selector("body[data-live=yes]", timeout=10_000)
    shot(page, "run-running.png")
    assert rect_fill(page, "hold") == FILLS["st-RUNNING"]
    log_page = page.context.new_page()  # the running step's log, followed
    log_page.goto(f"{stack.console}/runs/{run_id}/logs?state=hold")
    log_page.wait_for_function("document.getElementById('log').textContent.includes('step-says-hello')",
                               timeout=10_000)
    assert log_page.get_attribute("#log", "data-follow")
    released = time.monotonic()
    release.touch()  # the job ends within its 20 ms poll
    wait_class(page, "hold", "st-SUCCEEDED", 10_000)
    seen_after = time.monotonic() - released
    assert seen_after <= 2.0, f"SUCCEEDED shown {seen_after:.2f}s after the job's end"
    page.wait_for_function("document.getElementById('run-status').textContent.trim() === 'SUCCEEDED'",
                           timeout=30_000)
    assert rect_fill(page, "hold") == FILLS["st-SUCCEEDED"] and "st-SUCCEEDED" in node_class(page, "after")
    assert page.locator("#timeline tr.wave.st-SUCCEEDED").count() == 2
    shot(page, "run-succeeded.png")
    log_page.wait_for_selector("body[data-log-ended=yes]", timeout=15_000)  # the stream ends with the step
    assert log_page.inner_text("#log").split() == ["step-says-hello", "released"]
    page.locator('#timeline tr.wave[data-state="hold"] a.log-link').click()
    page.wait_for_selector("#log")
    assert "step-says-hello" in page.inner_text("#log")


def test_cancel_from_the_console_ends_the_run_aborted(stack: Stack, page: Any) -> None:
    run_id = stack.submit("long", """\
        initial: long
        states:
          long: {run: {argv: ["sleep", "300"]}, terminal: true}
        """)
    page.goto(f"{stack.console}/runs/{run_id}")
    wait_class(page, "long", "st-RUNNING", 30_000)
    page.click("#cancel-link")
    page.wait_for_selector("#confirm")
    assert "Cancel run" in page.inner_text("h1")
    page.click("#confirm")
    page.wait_for_url(f"**/runs/{run_id}")
    page.wait_for_function("document.getElementById('run-status').textContent.trim() === 'ABORTED'",
                           timeout=60_000)
    wait_class(page, "long", "st-CANCELLED", 10_000)
    assert "run-status" in (page.get_attribute("#run-status", "class") or "")
    assert "st-CANCELLED" in (page.get_attribute("#run-status", "class") or "")
    shot(page, "run-aborted.png")


def test_a_loops_rounds_are_followed(stack: Stack, page: Any) -> None:
    run_id = stack.submit("spin", """\
        initial: spin
        states:
          spin:
            run: {argv: ["sh", "-c", "echo spinning; sleep 2"]}
            loop: {max: 3}
            next: done
          done: {run: {argv: ["true"]}, terminal: true}
        """)
    page.goto(f"{stack.console}/runs/{run_id}")
    page.evaluate("""() => {
        window.seenRounds = [];
        const el = document.querySelector('[data-round-of="spin"]');
        const note = () => { const t = el.textContent.trim();
                             if (window.seenRounds[window.seenRounds.length - 1] !== t) window.seenRounds.push(t); };
        note();
        new MutationObserver(note).observe(el, {childList: true, characterData: true, subtree: true});
    }""")
    page.wait_for_function("document.getElementById('run-status').textContent.trim() === 'SUCCEEDED'",
                           timeout=90_000)
    seen = page.evaluate("window.seenRounds")
    later = [r for r in seen if r != "round 0 / 3"]
    assert later[-1] == "round 3 / 3", seen
    assert "round 2 / 3" in later and later.index("round 2 / 3") < later.index("round 3 / 3"), seen
    rows = page.locator('#timeline tr.wave[data-state="spin"]')
    assert [rows.nth(i).get_attribute("data-iteration") for i in range(rows.count())] == ["1", "2", "3"]


def test_the_console_command_against_a_serve_endpoint(stack: Stack) -> None:
    """`npa-workflow console --endpoint URL` in its own process: it reads the stack by polling (no signal crosses
    processes) and acts on it."""
    import urllib.request

    run_id = stack.submit("quick", """\
        initial: one
        states:
          one: {run: {argv: ["true"]}, terminal: true}
        """)
    env = {**os.environ, "NPA_WORKFLOW_HOME": str(stack.home)}
    env.pop("AWS_ENDPOINT_URL", None)
    proc = subprocess.Popen([*CLI, "console", "--endpoint", stack.endpoint, "--port", "0", "--poll", "0.5"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("npa-workflow console: http://127.0.0.1:"), line
        url = line.split()[2].rstrip("/")

        def get(path: str) -> str:
            with urllib.request.urlopen(url + path, timeout=30) as response:
                return response.read().decode()

        assert f'data-run="{run_id}"' in get("/")
        page = wait_until(lambda: (p := get(f"/runs/{run_id}")) and 'id="run-status">SUCCEEDED' in p and p, 60,
                          "the run page shows the run SUCCEEDED", interval=0.5)
        assert 'data-state="one"' in page and 'id="cancel-link"' in page  # a stack: its actions are offered
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_gate_loop_run_page_structure_and_colours(tmp_path: Path, page: Any) -> None:
    """A local run (its folder as `npa-workflow run` keeps it): the page the README shows."""
    from npa_workflow.console.app import Console
    from npa_workflow.console.server import ConsoleServer
    from npa_workflow.console.sources import LocalSource

    writer = LocalRunWriter(tmp_path / "home", "gate-loop-demo", SPECS / "gate-loop.yaml", "gate-loop")
    t = "2026-01-01T00:00:{:02d}.000Z"
    second = 1
    for n in (1, 2):
        for state in ("prepare", "train", "gate"):
            writer.wave(f"{state}|refine={n}", WaveStatus.SUCCEEDED, started_at=t.format(second),
                        ended_at=t.format(second + 3))
            second += 4
        writer.put(DecisionRecord(run_id=writer.run_id, state="gate", loops_key=f"refine={n}",
                                  uri=f"s3://npa-workflow-local/gate-loop/demo/refine/round-{n}/decision.json",
                                  decision="loop_back_to_inner_loop" if n == 1 else "promote_checkpoint",
                                  read_at=t.format(second)).to_item())
    writer.wave("route", WaveStatus.FAILED, started_at=t.format(second), ended_at=t.format(second + 2),
                error="exit code 3")
    writer.put(RunRecord(run_id=writer.run_id, workflow="gate-loop", status=RunStatus.FAILED,
                         error={"state": "route", "message": "step route failed: exit code 3\nlast lines: no input"}
                         ).to_item())
    writer.end("FAILED")
    server = ConsoleServer(Console(LocalSource(tmp_path / "home"), assume_minutes=1.0), 0).start()
    try:
        page.goto(f"{server.url}runs/{writer.run_id}")
        for state, cls in (("prepare", "st-SUCCEEDED"), ("gate", "st-SUCCEEDED"), ("route", "st-FAILED"),
                           ("publish", "st-none"), ("escalate", "st-none")):
            assert cls in node_class(page, state), (state, node_class(page, state))
            assert rect_fill(page, state) == FILLS[cls], state
        assert page.text_content('[data-round-of="refine"]') == "round 2 / 3"
        assert "State 'route' failed: step route failed: exit code 3" in page.inner_text("#failure")
        assert "fix:" in page.inner_text("#failure")
        effects = page.locator("#decisions tr.decision td:nth-child(4)").all_inner_texts()
        assert effects == ["another round of refine (until promote_checkpoint not met)", "exit of loop refine"]
        assert page.locator("#timeline tr.wave").count() == 7
        assert page.locator("#cost").count() == 1
        shot(page, "console.png")
    finally:
        server.stop()
        writer.close()

"""The console's pages, actions and live updates over HTTP (no browser): Starlette's TestClient for the pages, a
real uvicorn server for the event streams. A local run's folder is written through the real durable layer."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from console_support import SPECS, LocalRunWriter, Viewer, wait_until
from starlette.testclient import TestClient

from npa_workflow.console import svg, views
from npa_workflow.console.app import SESSION_COOKIE, Console
from npa_workflow.console.server import ConsoleServer
from npa_workflow.console.sources import LocalSource
from npa_workflow.ledger import DecisionRecord, WaveStatus

pytestmark = pytest.mark.timeout(60)
GATE_LOOP = SPECS / "gate-loop.yaml"


@pytest.fixture
def gate_run(tmp_path: Path) -> Iterator[LocalRunWriter]:
    writer = LocalRunWriter(tmp_path / "home", "gate-loop-1", GATE_LOOP, "gate-loop")
    writer.wave("prepare|refine=1", WaveStatus.SUCCEEDED, ended_at="2026-01-01T00:00:05.000Z")
    writer.wave("train|refine=1", WaveStatus.RUNNING)
    try:
        yield writer
    finally:
        writer.close()


def client_for(home: Path) -> tuple[TestClient, Console]:
    console = Console(LocalSource(home))
    return TestClient(console.app(), base_url="http://127.0.0.1:8765"), console


def node_classes(html: str) -> dict[str, str]:
    start = html.index("<svg")
    root = ET.fromstring(html[start:html.index("</svg>") + 6])
    return {g.get("data-state"): g.get("class", "") for g in root.iter("{http://www.w3.org/2000/svg}g")}


def test_run_page_shows_the_graph_coloured_by_the_ledger_and_the_loop_round(gate_run: LocalRunWriter) -> None:
    client, _ = client_for(gate_run.run_dir.parents[1])
    page = client.get(f"/runs/{gate_run.run_id}")
    assert page.status_code == 200, page.text
    classes = node_classes(page.text)
    assert set(classes) == {"refine", "prepare", "train", "gate", "route", "publish", "escalate"}
    assert "st-SUCCEEDED" in classes["prepare"] and "st-RUNNING" in classes["train"]
    assert "st-RUNNING" in classes["refine"]  # a loop takes its members' statuses
    assert "st-none" in classes["publish"] and "kind-loop" in classes["refine"]
    assert "round 1 / 3" in page.text
    assert page.text.count('<tr class="wave ') == 2
    assert 'id="run-status">RUNNING' in page.text
    assert "Ctrl-C" in page.text  # a local run: no action buttons, how to stop it instead
    assert 'id="cancel-link"' not in page.text


def test_a_url_whose_run_id_breaks_the_run_id_rule_reaches_no_path(gate_run: LocalRunWriter) -> None:
    """The run id names a folder of the home: `..`-shaped, spaced or over-long ids match no route."""
    home = gate_run.run_dir.parents[1]
    (home / "runs" / ".hidden").mkdir()
    client, console = client_for(home)
    for bad in (".hidden", "..x", "a%20b", "x" * 73):
        for suffix in ("", "/events", "/logs"):
            assert client.get(f"/runs/{bad}{suffix}").status_code == 404, (bad, suffix)
    assert client.get(f"/runs/{gate_run.run_id}").status_code == 200


def test_runs_page_filters_by_workflow_and_status_and_pages(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for i in range(120):
        run_dir = home / "runs" / f"r{i:03d}"
        run_dir.mkdir(parents=True)
        status = "SUCCEEDED" if i % 3 else "FAILED"
        (run_dir / "meta.json").write_text(json.dumps({
            "workflow": "alpha" if i % 2 else "beta", "spec": "x.yaml",
            "executions": [{"started_at": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}.000Z", "status": status,
                            "ended_at": f"2026-01-01T01:{i // 60:02d}:{i % 60:02d}.000Z"}]}))
    client, _ = client_for(home)
    first = client.get("/")
    assert first.status_code == 200
    assert first.text.count('class="run-row"') == 50 and "page 1 of 3" in first.text
    assert first.text.index("r119") < first.text.index("r118")  # newest first
    chosen = client.get("/?workflow=alpha&status=FAILED")  # odd i, i % 3 == 0: 20 runs
    assert chosen.text.count('class="run-row"') == 20 and "page 1 of 1" in chosen.text
    assert 'class="badge st-FAILED">FAILED' in chosen.text and "st-SUCCEEDED\">SUCCEEDED" not in chosen.text
    last = client.get("/?page=3")
    assert last.text.count('class="run-row"') == 20 and 'rel="prev"' in last.text and 'rel="next"' not in last.text


def test_actions_need_the_session_token_and_the_consoles_own_origin(gate_run: LocalRunWriter) -> None:
    client, _ = client_for(gate_run.run_dir.parents[1])
    form = client.get(f"/runs/{gate_run.run_id}/cancel")  # a GET only shows the confirmation
    assert form.status_code == 200 and 'name="csrf"' in form.text
    token = form.text.split('name="csrf" value="')[1].split('"')[0]
    assert client.cookies.get(SESSION_COOKIE)
    own = {"Origin": "http://127.0.0.1:8765"}
    form_type = {"Content-Type": "application/x-www-form-urlencoded"}
    url = f"/runs/{gate_run.run_id}/cancel"
    assert client.post(url, content="csrf=", headers={**own, "Content-Type": "application/x-www-form-urlencoded"}
                       ).status_code == 403
    evil = client.post(url, content=f"csrf={token}", headers={"Origin": "http://evil.example",
                                                              "Content-Type": "application/x-www-form-urlencoded"})
    assert evil.status_code == 403 and "another site" in evil.text
    no_origin = client.post(url, content=f"csrf={token}", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert no_origin.status_code == 403
    other_session = TestClient(client.app, base_url="http://127.0.0.1:8765")
    other_session.get("/")  # a session of its own: the first one's token is not its token
    assert other_session.post(url, content=f"csrf={token}", headers={
        **own, "Content-Type": "application/x-www-form-urlencoded"}).status_code == 403
    done = client.post(url, content=f"csrf={token}", headers={**own, **form_type})
    assert done.status_code == 409 and "Ctrl-C" in done.text  # token and origin good: a local run says how
    # A page that named the console by another host name (DNS rebinding) is not answered.
    assert client.get("/", headers={"Host": "attacker.example:8765"}).status_code == 400


def test_a_log_page_shows_the_tail_redacted(gate_run: LocalRunWriter, monkeypatch: pytest.MonkeyPatch) -> None:
    home = gate_run.run_dir.parents[1]
    monkeypatch.setenv("NPA_WORKFLOW_HOME", str(home))
    monkeypatch.setenv("MY_TOKEN", "s3cret-value-42")  # what the job was given, as the console's environment has it
    (home / "jobs").mkdir()
    job = "local-trainrefine1a1"  # the train wave's job (LocalRunWriter.wave)
    (home / "jobs" / f"{job}.log").write_text("epoch 1 loss 0.5\ntoken=s3cret-value-42\n")
    (home / "jobs" / f"{job}.json").write_text(json.dumps({"job_id": job, "secret_names": ["MY_TOKEN"]}))
    client, _ = client_for(home)
    page = client.get(f"/runs/{gate_run.run_id}/logs?state=train&iteration=1")
    assert page.status_code == 200, page.text
    assert "epoch 1 loss 0.5" in page.text
    assert "s3cret-value-42" not in page.text and "[redacted:MY_TOKEN]" in page.text
    assert client.get(f"/runs/{gate_run.run_id}/logs?state=nope").status_code == 404


@pytest.mark.parametrize("viewers", [1, 20])
def test_one_ledger_read_per_change_whatever_the_number_of_viewers(tmp_path: Path, viewers: int) -> None:
    writer = LocalRunWriter(tmp_path / "home", "gate-loop-2", GATE_LOOP, "gate-loop")
    source = LocalSource(tmp_path / "home")
    server = ConsoleServer(Console(source), 0).start()
    clients: list[Viewer] = []
    try:
        clients = [Viewer(server.port, writer.run_id) for _ in range(viewers)]
        for c in clients:
            c.start()
        wait_until(lambda: all(c.events for c in clients), 20, "every viewer gets the run's state on connecting")
        before = source.reads[writer.run_id]
        assert before == 1  # the first viewer's read; the other 19 got the update already rendered
        changes = 5
        for n in range(1, changes + 1):
            writer.wave(f"prepare|refine={n}", WaveStatus.SUCCEEDED, ended_at="2026-01-01T00:00:05.000Z")
            time.sleep(0.3)  # longer than the watcher's poll (0.1 s): each write is its own change

        def all_saw_last() -> bool:
            return all(c.events and c.events[-1]["rounds"].get("refine") == f"round {changes} / 3" for c in clients)

        wait_until(all_saw_last, 10, "every viewer sees the last write")
        assert source.reads[writer.run_id] - before == changes
    finally:
        for c in clients:
            c.close()
        server.stop()
        writer.close()


def test_decisions_say_what_they_caused() -> None:
    from npa_workflow.spec.load import load_spec

    loaded = load_spec(GATE_LOOP)
    view = views.spec_view(loaded)
    report = {"decisions": [
        {"state": "gate", "decision": "loop_back_to_inner_loop", "uri": "s3://b/r1.json", "source": "artifact"},
        {"state": "gate", "decision": "promote_checkpoint", "uri": "s3://b/r2.json", "source": "artifact"},
        {"state": "route", "decision": "promote_checkpoint", "uri": "s3://b/route.json", "source": "artifact"},
        {"state": "route", "decision": "surprise", "uri": "s3://b/route2.json", "source": "assume_decision_fallback"},
    ]}
    rows = views.decision_rows(view, report)
    assert [r["effect"] for r in rows] == [
        "another round of refine (until promote_checkpoint not met)", "exit of loop refine", "branch to publish",
        "no transition matched: otherwise to escalate"]
    assert rows[2]["word"] == "promote_checkpoint" and rows[3]["fallback"]
    assert DecisionRecord  # the ledger's own record is what the report's decisions come from


@pytest.mark.parametrize("spec", sorted(p.name for p in SPECS.glob("*.yaml") if p.name != "tools.yaml"))
def test_every_example_spec_draws_with_members_inside_their_container(spec: str) -> None:
    from npa_workflow.compile.asl import compile_spec
    from npa_workflow.graph.model import build_graph
    from npa_workflow.spec.load import load_spec

    loaded = load_spec(SPECS / spec)
    graph = build_graph(loaded, compile_spec(loaded))
    root = ET.fromstring(svg.render_svg(graph, {graph.initial: "RUNNING"}))
    ns = "{http://www.w3.org/2000/svg}"
    boxes = {}
    for g in root.iter(f"{ns}g"):
        rect = g.find(f"{ns}rect")
        boxes[g.get("data-state")] = tuple(float(rect.get(k)) for k in ("x", "y", "width", "height"))
    assert set(boxes) == set(graph.nodes)
    assert "st-RUNNING" in next(g.get("class") for g in root.iter(f"{ns}g") if g.get("data-state") == graph.initial)
    for name, node in graph.nodes.items():
        if node.container:
            x, y, w, h = boxes[name]
            cx, cy, cw, ch = boxes[node.container]
            assert cx <= x and cy <= y and x + w <= cx + cw and y + h <= cy + ch, (name, node.container)
    tops = [boxes[n] for n in graph.top_level()]
    for i, a in enumerate(tops):  # top-level boxes never overlap
        for b in tops[i + 1:]:
            assert a[0] + a[2] <= b[0] or b[0] + b[2] <= a[0] or a[1] + a[3] <= b[1] or b[1] + b[3] <= a[1]


def test_a_deployed_stacks_run_links_to_its_execution_in_the_step_functions_console() -> None:
    import boto3

    from npa_workflow.console.sources import StackSource
    from npa_workflow.stack_client import StackClient

    session = boto3.session.Session(region_name="eu-west-1", aws_access_key_id="testing",
                                    aws_secret_access_key="testing")
    source = StackSource(StackClient(session, bucket="b", ledger_table="t"), kind="stack")
    arn = "arn:aws:states:eu-west-1:123456789012:execution:npa-workflow-gate-loop:run-1"
    link = source._console_link(arn)
    assert link.startswith("https://eu-west-1.console.aws.amazon.com/states/home?region=eu-west-1#/v2/executions/")
    assert link.endswith(arn)
    local = StackSource(StackClient(session, bucket="b", ledger_table="t", endpoint_url="http://127.0.0.1:1"),
                        kind="endpoint")
    assert local._console_link(arn) == ""  # a serve stack has no AWS console


def test_a_port_in_use_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        env = {**os.environ, "NPA_WORKFLOW_HOME": str(tmp_path)}
        done = subprocess.run([sys.executable, "-c", "from npa_workflow.cli.app import main; main()", "console",
                               "--port", str(port)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "fix:" in done.stderr


@pytest.mark.parametrize("notified", [True, False], ids=["serve-own-console", "another-process-polls"])
def test_a_stacks_run_is_read_once_per_write_or_poll_for_20_viewers(tmp_path: Path, notified: bool) -> None:
    """`serve`'s own console: the durable layer tells of each write to the run's partition (no polling), so 20
    viewers cost one read per write. From another process (`console --endpoint`): one read per poll interval,
    shared by the 20. moto in server mode in this process, as serve runs it."""
    from npa_workflow.console.sources import StackSource
    from npa_workflow.embedded_aws.durable_aws import durable_aws
    from npa_workflow.embedded_aws.moto_server import start_moto_server
    from npa_workflow.ledger import RunRecord, RunStatus, WaveAttempt
    from npa_workflow.stack_client import StackClient

    moto = start_moto_server()
    clients: list[Viewer] = []
    try:
        with durable_aws(tmp_path / "aws") as durable:
            client = StackClient.local(moto.endpoint_url)
            client.ledger.create_table()
            client.ledger.put_run(RunRecord(run_id="r1", workflow="w"))
            source = StackSource(client, kind="serve", notified=notified, poll_seconds=0.5)
            with durable.item_written(source.item_listener):
                server = ConsoleServer(Console(source), 0).start()
                try:
                    clients = [Viewer(server.port, "r1") for _ in range(20)]
                    for c in clients:
                        c.start()
                    wait_until(lambda: all(c.events for c in clients), 20, "every viewer gets the run's state")
                    before = source.reads["r1"]
                    assert before <= 2  # the first viewer's read (a poll may have come before the 20th joined)
                    started = time.monotonic()
                    for n in range(1, 5):  # four wave writes, then the run's end: five changes
                        item = WaveAttempt(run_id="r1", wave_key=f"s{n}", state=f"s{n}", status=WaveStatus.RUNNING)
                        client.ledger.client.put_item(TableName=client.ledger.table_name, Item=item.to_item())
                        time.sleep(0.3)
                    client.ledger.update_run_status("r1", RunStatus.SUCCEEDED)
                    wait_until(lambda: all(c.events[-1]["status"] == "SUCCEEDED" for c in clients), 10,
                               "every viewer sees the run end")
                    time.sleep(0.3)
                    if notified:
                        assert source.reads["r1"] - before == 5
                    else:  # once per 0.5 s, whatever the 20 viewers and the writes
                        assert source.reads["r1"] - before <= (time.monotonic() - started) / 0.5 + 1
                finally:
                    for c in clients:
                        c.close()
                    server.stop()
    finally:
        moto.reset()
        moto.stop()

"""`npa-workflow graph`: the graph model of every example, valid Mermaid and DOT, PNG through Graphviz,
deterministic ids for awkward names, and colouring from a run report."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npa_workflow.cli.app import app
from npa_workflow.compile.asl import compile_spec
from npa_workflow.graph import (
    GraphvizError,
    build_graph,
    render_dot,
    render_mermaid,
    render_png,
    statuses_from_report,
)
from npa_workflow.graph import png as png_module
from npa_workflow.graph.mermaid import escape
from npa_workflow.graph.presentation import FILL, NOT_REACHED_FILL, node_ids
from npa_workflow.spec.load import load_spec, load_spec_text

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
EXAMPLES = ("gate-loop", "fanout", "sweep", "trigger")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# Per example: state → kind, and the edges (src, dst, kind, label) the graph must hold.
EXPECTED = {
    "gate-loop": (
        {"refine": "loop", "prepare": "leaf", "train": "leaf", "gate": "leaf", "route": "leaf",
         "publish": "terminal", "escalate": "terminal"},
        [("refine", "prepare", "sequence", ""), ("prepare", "train", "sequence", ""),
         ("train", "gate", "sequence", ""), ("gate", "refine", "loop", "until promote_checkpoint, max 3"),
         ("refine", "route", "next", "next"), ("route", "publish", "transition", "when promote_checkpoint"),
         ("route", "escalate", "transition", "when loop_back"), ("route", "escalate", "next", "otherwise")],
    ),
    "fanout": (
        {"prepare": "leaf", "shards": "group", "shard-0": "leaf", "shard-1": "leaf", "shard-2": "leaf",
         "join": "leaf", "done": "terminal"},
        [("prepare", "shards", "next", "next"), ("shards", "shard-0", "member", ""),
         ("shards", "shard-1", "member", ""), ("shards", "shard-2", "member", ""),
         ("shards", "join", "next", "next"), ("join", "done", "next", "next")],
    ),
    "sweep": (
        {"prepare": "leaf", "sweep": "group", "lr-1e-1": "leaf", "lr-3e-2": "leaf", "lr-1e-2": "leaf",
         "lr-3e-3": "leaf", "select-best": "leaf", "publish": "terminal"},
        [("prepare", "sweep", "next", "next"), ("sweep", "lr-3e-3", "member", ""),
         ("sweep", "select-best", "next", "next"), ("select-best", "publish", "next", "next")],
    ),
    "trigger": (
        {"ingest": "leaf", "publish": "terminal"},
        [("ingest", "publish", "next", "next")],
    ),
}
# Text each rendering must show (Mermaid shows it escaped).
LABELS = {
    "gate-loop": ["loop: until promote_checkpoint, max 3", "until promote_checkpoint, max 3", "writes decision",
                  "when promote_checkpoint", "when loop_back", "branches on its decision"],
    "fanout": ["parallel group, maxConcurrency 2", "shards: members"],
    "sweep": ["parallel group, maxConcurrency 2"],
    "trigger": ["trigger: waits for 2 objects"],
}

# Mermaid flowchart lines as this renderer writes them (a strict subset of the grammar).
_ID = r"[A-Za-z0-9_]+"
_Q = r'"[^"]*"'
_MERMAID_LINE = re.compile(
    "|".join([
        r"flowchart TB",
        rf"\s+{_ID}(\[{_Q}\]|\(\[{_Q}\]\)|\{{{_Q}\}}|\[\[{_Q}\]\]|\[/{_Q}/\]|\{{\{{{_Q}\}}\}}|\(\({_Q}\)\))",
        rf"\s+subgraph {_ID}\[{_Q}\]",
        r"\s+direction TB",
        r"\s+end",
        rf"\s+{_ID} (-->|==>|-\.->)(\|{_Q}\|)? {_ID}",
        rf"\s+classDef {_ID} fill:#[0-9a-f]{{6}},stroke:#[0-9a-f]{{6}},color:#000",
        rf"\s+class {_ID}(,{_ID})* {_ID}",
    ])
)


def check_mermaid(text: str) -> None:
    lines = text.rstrip("\n").split("\n")
    assert lines[0] == "flowchart TB"
    depth = 0
    for line in lines:
        assert _MERMAID_LINE.fullmatch(line), f"not a flowchart line: {line!r}"
        depth += line.strip().startswith("subgraph ") - (line.strip() == "end")
        assert depth >= 0
    assert depth == 0, "unbalanced subgraph/end"
    ids = re.findall(r"^\s+(" + _ID + r")[\[\(\{]", text, re.M)
    assert len(ids) == len(set(ids)), "a node id is defined twice"
    assert not {"end", "graph", "subgraph", "flowchart"} & set(ids)


@pytest.fixture(scope="module")
def dot_exe() -> str:
    exe = shutil.which("dot")
    if exe is None:
        pytest.fail("Graphviz `dot` is missing: run scripts/install-system-deps.sh")
    return exe


def svg_of(dot_exe: str, source: str) -> str:
    result = subprocess.run([dot_exe, "-Tsvg"], input=source, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr and "Error" not in result.stderr, result.stderr
    return result.stdout


def graph_of(name: str):
    loaded = load_spec(SPECS / f"{name}.yaml")
    return build_graph(loaded, compile_spec(loaded))


# -- the model ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLES)
def test_model_of_every_example(name: str) -> None:
    graph = graph_of(name)
    kinds, edges = EXPECTED[name]
    assert {n: node.kind for n, node in graph.nodes.items()} == kinds
    held = {(e.src, e.dst, e.kind, e.label) for e in graph.edges}
    for edge in edges:
        assert edge in held
    assert not any(e.ignored for e in graph.edges)


def test_model_numbers_come_from_the_compiled_machine() -> None:
    gate = graph_of("gate-loop")
    refine = gate.nodes["refine"]
    assert (refine.loop_max, refine.loop_until) == (3, "promote_checkpoint")
    assert refine.members == ("prepare", "train", "gate")
    assert {gate.nodes[m].container for m in refine.members} == {"refine"}
    assert gate.nodes["gate"].writes_decision and gate.nodes["route"].branches
    fanout = graph_of("fanout")
    assert (fanout.nodes["shards"].max_concurrency, fanout.nodes["shards"].distributed) == (2, False)
    sweep_spec = load_spec(SPECS / "sweep.yaml", overrides={"max_concurrency": "3"})
    sweep = build_graph(sweep_spec, compile_spec(sweep_spec))
    assert sweep.nodes["sweep"].max_concurrency == 3  # maxConcurrency reads config
    assert graph_of("trigger").nodes["ingest"].trigger == "waits for 2 objects"
    doc = gate.to_json()
    assert doc["nodes"][0]["loop"] == {"max": 3, "until": "promote_checkpoint"}
    assert doc["statuses"] is None


# -- renderings of the examples ------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLES)
def test_mermaid_of_every_example(name: str) -> None:
    graph = graph_of(name)
    text = render_mermaid(graph)
    check_mermaid(text)
    ids = node_ids(graph)
    for state in graph.nodes:
        assert re.search(rf"^\s+{ids[state]}[\[\(\{{]\S*{re.escape(escape(state))}", text, re.M), state
    for label in LABELS[name]:
        assert escape(label) in text, label
    assert f"x_start --> {ids[graph.initial]}" in text
    for src, dst, kind, label in EXPECTED[name][1]:
        if kind in ("transition", "loop"):
            assert re.search(rf'{ids[src]} (==>|-\.->)\|"{re.escape(escape(label))}"\| {ids[dst]}', text), label


@pytest.mark.parametrize("name", EXAMPLES)
def test_dot_of_every_example_passes_graphviz(name: str, dot_exe: str) -> None:
    graph = graph_of(name)
    text = render_dot(graph)
    assert text.startswith(f'digraph "{name}" {{') and "compound=true" in text
    ids = node_ids(graph)
    for label in LABELS[name]:
        assert label in text, label
    svg = svg_of(dot_exe, text)
    for state in graph.nodes:
        assert f"<title>{ids[state]}</title>" in svg  # every state is a node of the drawing
    for src, dst, kind, label in EXPECTED[name][1]:
        tail = re.escape(ids[src])
        if kind == "next" and graph.nodes[src].is_composite:
            tail = r"\w+"  # drawn from the composite's cluster border (ltail) from one of its members
        assert re.search(rf"{tail} -> {re.escape(ids[dst])}", text), (src, dst)
        if label:
            assert f">{label}</text>" in svg, label


def test_loop_back_edge_is_dashed_and_does_not_constrain_ranks() -> None:
    text = render_dot(graph_of("gate-loop"))
    line = next(ln for ln in text.splitlines() if "s_gate -> s_refine" in ln)
    assert 'label="until promote_checkpoint, max 3"' in line and "style=dashed" in line and "constraint=false" in line
    assert "s_gate -> s_route [ltail=cluster_refine" in text  # the loop's exit leaves its cluster


def test_png_starts_with_the_png_magic(dot_exe: str, tmp_path: Path) -> None:
    data = render_png(render_dot(graph_of("gate-loop")))
    assert data.startswith(PNG_MAGIC)
    out = tmp_path / "g" / "gate-loop.png"
    result = CliRunner().invoke(app, ["graph", str(SPECS / "gate-loop.yaml"), "--format", "png", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(PNG_MAGIC)
    assert f"wrote {out}" in result.output


def test_png_without_dot_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(png_module.shutil, "which", lambda _name: None)
    with pytest.raises(GraphvizError, match="Graphviz `dot` is not on PATH: install Graphviz"):
        render_png("digraph {}")
    result = CliRunner().invoke(app, ["graph", str(SPECS / "fanout.yaml"), "--format", "png",
                                      "--out", str(tmp_path / "x.png")])
    assert result.exit_code == 1
    assert "npa-workflow graph: error: Graphviz `dot` is not on PATH" in result.output
    assert "--format dot" in result.output
    assert not (tmp_path / "x.png").exists()


def test_dot_failure_is_reported(dot_exe: str) -> None:
    with pytest.raises(GraphvizError, match="`dot -Tpng` failed: .*syntax error"):
        render_png("digraph { a -> }")


# -- awkward names -------------------------------------------------------------------------------------

AWKWARD = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: 'odd "names"'}
config: {mc: "2"}
initial: "end"
states:
  "end": {run: {shell: x}, next: "a b"}
  "a b":
    trigger: {uri: "s3://bk/land/", pollSeconds: 1, maxPolls: 3}
    run: {shell: x}
    loop: {max: 4, until: loop_back}
    next: 'x"y#<z>|{w}'
  'x"y#<z>|{w}':
    run: {shell: x}
    transitions:
      - {when: promote_checkpoint, goto: "a-b"}
      - {when: loop_back, goto: "a_b"}
    next: "route me"
  "route me":
    transitions:
      - {when: promote_checkpoint, goto: outer}
    next: fin
  "a-b": {next: outer}  # a router: a command here would share the job name of "a b" (validation refuses it)
  "a_b": {run: {shell: x}, next: outer}
  outer: {sequence: [inner, 'back\\slash'], loop: {max: 2}, next: grp}
  inner: {sequence: [s1, s2]}
  s1: {run: {shell: x}}
  s2: {run: {shell: x}}
  'back\\slash': {run: {shell: x}}
  grp: {parallel: [m1, m2], maxConcurrency: config.mc, next: fin, transitions: [{goto: s1}]}
  m1: {run: {shell: x}}
  m2: {run: {shell: x}}
  fin: {terminal: true}
"""


def awkward_graph():
    loaded = load_spec_text(AWKWARD, file="odd.yaml")
    return build_graph(loaded, compile_spec(loaded))


def test_awkward_names_get_deterministic_distinct_ids() -> None:
    graph = awkward_graph()
    ids = node_ids(graph)
    assert ids == node_ids(awkward_graph())
    assert len(set(ids.values())) == len(ids)
    assert all(re.fullmatch(r"s_[A-Za-z0-9_]+", i) for i in ids.values())
    assert ids["a_b"] == "s_a_b" and ids["a-b"].startswith("s_a_b_") and ids["end"] == "s_end"
    assert render_mermaid(graph) == render_mermaid(awkward_graph())
    assert render_dot(graph) == render_dot(awkward_graph())


def test_awkward_names_render_valid_mermaid() -> None:
    graph = awkward_graph()
    text = render_mermaid(graph)
    check_mermaid(text)
    assert "x#quot;y#35;#lt;z#gt;#124;#123;w#125;" in text
    nodes = graph.nodes
    assert nodes["route me"].kind == "router" and nodes["a b"].kind == "loop" and nodes["inner"].kind == "sequence"
    assert nodes["fin"].kind == "terminal" and not nodes["fin"].has_command
    ids = node_ids(graph)
    slash = ids["back\\slash"]
    # A leaf loop's back edge is a self-loop; a looped sequence's starts after its last member.
    assert f'{ids["a b"]} -.->|"until loop_back, max 4"| {ids["a b"]}' in text
    assert f'{slash} -.->|"repeat, max 2"| s_outer' in text
    # Leaving a composite starts at its subgraph: the nested sequence, the loop, the group.
    assert f"cluster_inner --> {slash}" in text
    assert 'cluster_outer -->|"next"| s_grp' in text
    # A group's transitions are never followed: drawn, marked ignored.
    assert 'cluster_grp -.->|"always (ignored)"| s_s1' in text


def test_awkward_names_render_valid_dot(dot_exe: str) -> None:
    text = render_dot(awkward_graph())
    assert 'label="back\\\\slash' in text and 'x\\"y#<z>|{w}' in text
    svg = svg_of(dot_exe, text)
    assert "x&quot;y#&lt;z&gt;|{w}" in svg and "back\\slash" in svg
    assert ">odd &quot;names&quot;</text>" in svg


# -- colouring from a run report ----------------------------------------------------------------------

GATE_REPORT = {
    "run_id": "gate-loop-1", "workflow": "gate-loop", "status": "FAILED",
    "error": {"state": "route", "message": "decision artifact s3://b/route/decision.json is not valid JSON"},
    "waves": [
        {"state": "prepare", "group": None, "iteration": 1, "attempt": 1, "status": "SUCCEEDED"},
        {"state": "train", "group": None, "iteration": 1, "attempt": 1, "status": "FAILED"},
        {"state": "train", "group": None, "iteration": 1, "attempt": 2, "status": "SUCCEEDED"},
        {"state": "gate", "group": None, "iteration": 1, "attempt": 1, "status": "SUCCEEDED"},
        {"state": "route", "group": None, "iteration": None, "attempt": 1, "status": "SUCCEEDED"},
    ],
    "decisions": [{"state": "gate", "uri": "s3://b/d.json", "decision": "promote_checkpoint", "source": "artifact"}],
}

FANOUT_REPORT = {
    "status": "RUNNING", "error": None,
    "waves": [
        {"state": "prepare", "status": "SUCCEEDED"},
        {"state": "shard-0", "group": "shards", "status": "RUNNING"},
        {"state": "shard-1", "group": "shards", "status": "CANCELLED"},
    ],
}


def test_statuses_from_a_report() -> None:
    gate = graph_of("gate-loop")
    statuses = statuses_from_report(gate, GATE_REPORT)
    assert statuses == {"prepare": "SUCCEEDED", "train": "SUCCEEDED", "gate": "SUCCEEDED", "route": "FAILED",
                        "refine": "SUCCEEDED"}  # the retried train succeeded; the error names route
    fanout = graph_of("fanout")
    assert statuses_from_report(fanout, FANOUT_REPORT) == {
        "prepare": "SUCCEEDED", "shard-0": "RUNNING", "shard-1": "CANCELLED", "shards": "RUNNING"}
    aborted = {**FANOUT_REPORT, "status": "ABORTED",
               "waves": [{"state": "prepare", "status": "SUCCEEDED"}, {"state": "shard-0", "status": "SUCCEEDED"}]}
    assert statuses_from_report(fanout, aborted)["shards"] == "CANCELLED"  # partly done, run stopped


def _fill_of(dot_text: str, node_id: str) -> str:
    line = next(ln for ln in dot_text.splitlines() if ln.strip().startswith(f"{node_id} ["))
    return re.search(r'fillcolor="(#[0-9a-f]{6})"', line).group(1)


def test_colours_in_dot_and_mermaid(dot_exe: str) -> None:
    gate = graph_of("gate-loop")
    coloured = gate.with_statuses(statuses_from_report(gate, GATE_REPORT), "FAILED")
    text = render_dot(coloured)
    svg_of(dot_exe, text)
    assert _fill_of(text, "s_prepare") == FILL["SUCCEEDED"] == "#b7e1a1"
    assert _fill_of(text, "s_route") == FILL["FAILED"]
    assert _fill_of(text, "s_publish") == _fill_of(text, "s_escalate") == NOT_REACHED_FILL == "#ffffff"
    assert 'label="gate-loop (run FAILED)"' in text and "not reached" in text
    mermaid = render_mermaid(coloured)
    check_mermaid(mermaid)
    assert "class s_refine,s_prepare,s_train,s_gate succeeded" in mermaid
    assert "class s_route failed" in mermaid and "class s_publish,s_escalate notreached" in mermaid
    fanout = graph_of("fanout")
    running = render_dot(fanout.with_statuses(statuses_from_report(fanout, FANOUT_REPORT)))
    assert _fill_of(running, "s_shards") == FILL["RUNNING"] == "#a9c8f5"
    assert _fill_of(running, node_ids(fanout)["shard-1"]) == FILL["CANCELLED"] == "#cfcfcf"
    plain = [ln for ln in render_dot(fanout).splitlines() if ln.strip().startswith("s_") and "->" not in ln]
    assert plain and not any("fillcolor=" in ln for ln in plain)  # no status colours without a run


def test_cli_graph_with_a_run_report(tmp_path: Path) -> None:
    report = tmp_path / "run.json"
    report.write_text(json.dumps(GATE_REPORT))
    runner = CliRunner()
    result = runner.invoke(app, ["graph", str(SPECS / "gate-loop.yaml"), "--run", str(report)])
    assert result.exit_code == 0, result.output
    check_mermaid(result.stdout)
    assert "class s_route failed" in result.stdout
    out = tmp_path / "gate.dot"
    result = runner.invoke(app, ["graph", str(SPECS / "gate-loop.yaml"), "--format", "dot", "--run", str(report),
                                 "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert _fill_of(out.read_text(), "s_route") == FILL["FAILED"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read it"),
        ("{not json", "not JSON"),
        ('{"status": "SUCCEEDED"}', 'expected a run report with a "waves" list'),
        ('{"waves": [{"status": "SUCCEEDED"}]}', 'needs a "state" name'),
    ],
)
def test_cli_graph_rejects_a_bad_report(tmp_path: Path, content: str | None, message: str) -> None:
    report = tmp_path / "run.json"
    if content is not None:
        report.write_text(content)
    result = CliRunner().invoke(app, ["graph", str(SPECS / "fanout.yaml"), "--run", str(report)])
    assert result.exit_code == 1
    assert f"npa-workflow graph: error: --run {report}: " in result.output and message in result.output


def test_cli_graph_defaults_to_mermaid_on_stdout() -> None:
    result = CliRunner().invoke(app, ["graph", str(SPECS / "sweep.yaml"), "--var", "max_concurrency=4"])
    assert result.exit_code == 0, result.output
    check_mermaid(result.stdout)
    assert "parallel group, maxConcurrency 4" in result.stdout

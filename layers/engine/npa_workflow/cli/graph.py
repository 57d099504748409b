"""`npa-workflow graph`: draw a spec's states, groups, loops and branches (Mermaid, DOT or PNG),
optionally coloured by the statuses of a run."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from npa_workflow.cli.common import AllowUnknownKeysOpt, CatalogOpt, VarOpt, load_or_exit
from npa_workflow.cli.output import print_problems, stdout
from npa_workflow.cli.stack import BucketOpt, EndpointOpt, RegionOpt, StackOpt
from npa_workflow.errors import SpecError


class GraphFormat(StrEnum):
    mermaid = "mermaid"
    dot = "dot"
    png = "png"


def _fail(message: str) -> typer.Exit:
    sys.stderr.write(f"npa-workflow graph: error: {message}\n")
    return typer.Exit(1)


def read_run_report(path: Path) -> dict[str, Any]:
    """A `npa-workflow run --json` report: {"waves": [{"state", "status", ...}], "error": {...} | null, ...}."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _fail(f"--run {path}: cannot read it: {exc.strerror or exc}") from None
    try:
        report = json.loads(text)
    except ValueError as exc:
        raise _fail(f"--run {path}: not JSON ({exc}); pass the output of `npa-workflow run --json`") from None
    if not isinstance(report, dict) or not isinstance(report.get("waves"), list):
        raise _fail(f"--run {path}: expected a run report with a \"waves\" list "
                    "(the output of `npa-workflow run --json`)")
    if any(not isinstance(w, dict) or not isinstance(w.get("state"), str) for w in report["waves"]):
        raise _fail(f"--run {path}: every entry of \"waves\" needs a \"state\" name and a \"status\"")
    if report.get("error") is not None and not isinstance(report["error"], dict):
        raise _fail(f"--run {path}: \"error\" must be an object {{\"state\", \"message\"}} or null")
    return report


def _local_run_report(run: str) -> dict[str, Any]:
    """`--run ID` with no stack and no such file: the report a local `run` of that id kept."""
    from npa_workflow.cli.local_runs import local_run_dir, no_report_yet
    from npa_workflow.cli.logs import logs_home

    home = logs_home()
    run_dir = local_run_dir(home, run)
    if run_dir is None:
        raise _fail(f"--run {run}: no such report file, and no local run {run!r} under {home / 'runs'} (fix: a "
                    "stack's run needs --endpoint URL or --stack NAME; a file: what `npa-workflow run --json` "
                    "printed)")
    if not (run_dir / "report.json").is_file():
        raise _fail(f"--run {run}: {no_report_yet(run)}")
    return read_run_report(run_dir / "report.json")


def _stack_report(run_id: str, endpoint: str | None, stack: str | None, bucket: str | None,
                  region: str | None) -> dict[str, Any]:
    from npa_workflow.cli.stack import stack_client
    from npa_workflow.stack_client import StackError

    try:
        return stack_client(endpoint, stack, bucket, region).report(run_id)
    except StackError as exc:
        raise _fail(f"--run {run_id}: {exc}") from None


def graph_command(
    spec: Annotated[Path, typer.Argument(help="Spec file", show_default=False)],
    catalog: CatalogOpt = None,
    var: VarOpt = None,
    fmt: Annotated[
        GraphFormat, typer.Option("--format", help="mermaid (Markdown), dot (Graphviz) or png (runs Graphviz `dot`)")
    ] = GraphFormat.mermaid,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write to this file (png: required unless stdout is redirected)")
    ] = None,
    run: Annotated[
        str | None,
        typer.Option("--run", help="Colour states by their status in a run (green succeeded, red failed, blue "
                     "running, grey cancelled, white not reached): a run id of the stack named by --endpoint or "
                     "--stack, else of a local `run`, or a JSON file holding a run report (`npa-workflow run "
                     "--json`)"),
    ] = None,
    endpoint: EndpointOpt = None,
    stack: StackOpt = None,
    bucket: BucketOpt = None,
    region: RegionOpt = None,
    allow_unknown_keys: AllowUnknownKeysOpt = False,
) -> None:
    """Draw the spec: states, groups with their bound, loops with their back edge, branches with their `when`."""
    from npa_workflow.compile.asl import compile_spec
    from npa_workflow.graph import (
        GraphvizError,
        build_graph,
        render_dot,
        render_mermaid,
        render_png,
        statuses_from_report,
    )

    if fmt is GraphFormat.png and out is None and sys.stdout.isatty():
        # A usage error (exit 2), found before any work: binary data must not reach a terminal.
        raise typer.BadParameter("png is binary data: pass --out FILE.png (or redirect stdout)", param_hint="--format")
    loaded = load_or_exit(spec, catalog, var, allow_unknown_keys=allow_unknown_keys)
    try:
        graph = build_graph(loaded, compile_spec(loaded))
    except SpecError as exc:
        print_problems(exc.problems)
        raise typer.Exit(1) from None
    if run is not None:
        from npa_workflow.protocol.run_ids import run_id_problem

        if Path(run).is_file() or run_id_problem(run):  # a path (a run id has no '/' or '.'): its read says why
            report = read_run_report(Path(run))
        elif endpoint or stack or bucket:
            report = _stack_report(run, endpoint, stack, bucket, region)
        else:
            report = _local_run_report(run)
        graph = graph.with_statuses(statuses_from_report(graph, report), str(report.get("status") or ""))
    if fmt is GraphFormat.mermaid:
        text = render_mermaid(graph)
    else:
        text = render_dot(graph)
    if fmt is GraphFormat.png:
        try:
            data = render_png(text)
        except GraphvizError as exc:
            raise _fail(str(exc)) from None
        if out is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return
        _write(out, data)
        return
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    _write(out, text.encode("utf-8"))


def _write(out: Path, data: bytes) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
    except OSError as exc:
        raise _fail(f"--out {out}: cannot write it: {exc.strerror or exc}") from None
    stdout.print(f"wrote {out} ({len(data):,} bytes)", highlight=False)

"""`npa-workflow run`'s live view says once what a waiting trigger needs: where objects must land, how many
have, and the command that lands one in the run's local S3 (tests/e2e/test_run_usage.py runs it for real)."""

from __future__ import annotations

import io

from rich.console import Console

from npa_workflow.cli.run import LiveProgress, trigger_waiting_line
from npa_workflow.ledger import Watermark


def mark(**fields) -> Watermark:
    return Watermark(**{"run_id": "r1", "state": "ingest", "uri": "s3://b/landing/", "objects": 1,
                        "min_objects": 2, "task_token": "tok", **fields})


def test_the_line_names_the_prefix_the_count_and_how_to_land_one() -> None:
    line = trigger_waiting_line(mark(), "http://127.0.0.1:5000")
    assert line.startswith("ingest waits for objects under s3://b/landing/: 1 of 2 landed; ")
    assert "aws --endpoint-url http://127.0.0.1:5000 s3 cp FILE s3://b/landing/" in line
    # a prefix that is no folder: the object's key goes on after it
    assert line.endswith("s3 cp FILE s3://b/landing/") and trigger_waiting_line(
        mark(uri="s3://b/in-", loops_key="l1=2"), "http://e").startswith("ingest (l1=2) waits for objects under")
    assert trigger_waiting_line(mark(uri="s3://b/in-"), "http://e").endswith("s3 cp FILE s3://b/in-NAME")


def test_the_terminal_view_prints_it_above_its_table() -> None:
    out = io.StringIO()
    progress = LiveProgress(Console(file=out, force_terminal=True, width=400))
    progress.started("r1", "r1", "http://127.0.0.1:5000")
    try:
        progress.trigger_waiting(mark(uri="s3://b/[x]/"))  # no rich markup read into a URI
    finally:
        progress.finished()
    assert "ingest waits for objects under s3://b/[x]/: 1 of 2 landed" in out.getvalue()

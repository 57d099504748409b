"""How runs are shown (`cli.progress`): the summary's honesty, 80-column tables, the live view of every state."""

from __future__ import annotations

import io

from rich.console import Console

from npa_workflow.cli.progress import duration, error_sentence, live_table, print_summary, run_duration

JOB = "local-0123456789abcdef"


def wave(state: str, status: str, **kw) -> dict:
    return {"state": state, "iteration": None, "group": "", "attempt": 1, "status": status, "job_id": JOB,
            "replayed": False, "submitted_at": "2026-01-01T00:00:00.000Z", "started_at": "2026-01-01T00:00:00.500Z",
            "ended_at": "2026-01-01T00:00:03.700Z", **kw}


def report(**kw) -> dict:
    return {"run_id": "r1", "workflow": "w", "status": "SUCCEEDED", "waves": [wave("train-long-state-name", "SUCCEEDED",
            iteration=2, group="shards")], "decisions": [], "watermarks": [], "state_transitions": 3,
            "history_events": 9, "error": None, **kw}


def shown(doc: dict, width: int = 80) -> str:
    out = io.StringIO()
    print_summary(doc, Console(file=out, width=width, soft_wrap=True))
    return out.getvalue()


def test_an_80_column_table_keeps_job_ids_whole_and_drops_columns():
    text = shown(report(), 60)
    assert JOB in text  # whole, on one line
    assert "duration" not in text  # the first column given up
    assert "state" in text and "status" in text


def test_the_header_says_the_real_duration_and_a_running_run_shows_no_error():
    assert run_duration(report()) == "3.7s"
    assert "SUCCEEDED in 3.7s" in shown(report())
    running = shown(report(status="RUNNING", error={"state": "a", "message": "execution ended RUNNING"}))
    assert "error" not in running


def test_a_report_without_an_execution_counts_no_history():
    """A local run read from its ledger as it goes has no execution to count: not "0 state transitions"."""
    assert "— 3 state transitions, 9 history events" in shown(report(status="RUNNING", execution_arn="arn:x"))
    text = shown(report(status="RUNNING", execution_arn="", state_transitions=0, history_events=0))
    assert "\nRUNNING in " in text and "state transitions" not in text


def test_one_sentence_per_failure():
    error = {"state": "shard-0", "message": f"state 'shard-0': state 'shard-0' (job {JOB}): job {JOB} failed"}
    assert error_sentence(error) == f"state 'shard-0': job {JOB} failed"
    assert error_sentence({"state": None, "message": "interrupted"}) == "interrupted"


def test_decisions_show_the_specs_word_and_the_normalized_value():
    doc = report(decisions=[{"state": "gate", "decision": "loop_back_to_inner_loop", "source": "artifact",
                             "uri": "s3://b/d.json"}])
    assert "decision of gate: loop_back (loop_back_to_inner_loop)" in shown(doc, 200)


def test_a_decision_that_could_not_be_read_is_said_in_words_not_as_none():
    """A malformed artifact (`--var gate_malformed=not-json`) leaves the decision null in the report."""
    doc = report(status="FAILED", decisions=[{"state": "gate", "decision": None, "source": "artifact",
                                              "uri": "s3://b/d.json"}])
    text = shown(doc, 200)
    assert "decision of gate: none read (artifact, s3://b/d.json)" in text
    assert "None" not in text


def test_the_live_view_lists_every_state_of_the_plan_with_k_of_n_done():
    out = io.StringIO()
    view = live_table("run r1", ["prepare", "train", "publish"], [wave("prepare", "SUCCEEDED"),
                      wave("train", "RUNNING", ended_at=None)], "RUNNING", 12.0, 100)
    Console(file=out, width=100).print(view)
    text = out.getvalue()
    assert "1/3 done" in text
    assert "publish" in text and "PENDING" in text


def test_a_running_runs_report_has_no_error_even_if_an_earlier_execution_failed():
    from npa_workflow.ledger import RunError, RunRecord
    from npa_workflow.local.report import build_report
    from npa_workflow.spec.load import load_spec_text

    loaded = load_spec_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: w}\n"
                            "states:\n  a: {run: {shell: x}, terminal: true}\n")
    earlier = RunRecord(run_id="r1", workflow="w", error=RunError(state="a", message="attempt 1 failed"))
    item = earlier.to_item() | {"kind": {"S": "RUN"}}
    running = build_report(run_id="r1", workflow="w", loaded=loaded, status="RUNNING", items=[item], execution_arn="")
    assert running["error"] is None
    failed = build_report(run_id="r1", workflow="w", loaded=loaded, status="FAILED", items=[item], execution_arn="")
    assert failed["error"] == {"state": "a", "message": "attempt 1 failed"}


def test_members_of_a_group_inside_a_loop_keep_their_round():
    from npa_workflow.local.report import enclosing_loops
    from npa_workflow.spec.load import load_spec_text

    loaded = load_spec_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: w}\n"
                            "states:\n  refine: {sequence: [fan, gate], loop: {max: 2}, terminal: true}\n"
                            "  fan: {parallel: [a, b]}\n  a: {run: {shell: a}}\n  b: {run: {shell: b}}\n"
                            "  gate: {run: {shell: g}}\n")
    loops = enclosing_loops(loaded)
    assert loops["a"] == loops["b"] == loops["gate"] == ["refine"]


def test_a_local_runs_duration_is_its_monotonic_measure_not_the_wall_clocks():
    """A wall clock set back (or forward) 2 h during a run printed `SUCCEEDED in 7200.0s`."""
    doc = report(elapsed_seconds=3.2)
    doc["waves"] = [{**doc["waves"][0], "started_at": "2026-01-01T10:00:00Z", "ended_at": "2026-01-01T12:00:00Z"}]
    assert "SUCCEEDED in 3.2s" in shown(doc)


def test_a_wave_whose_end_stamp_is_before_its_start_shows_no_duration():
    assert duration("2026-01-01T12:00:00Z", "2026-01-01T10:00:00Z") == ""
    assert duration("2026-01-01T10:00:00Z", "2026-01-01T10:00:02Z") == "2.0s"

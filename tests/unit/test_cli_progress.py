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
    from npa_workflow.run_report import build_report
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
    from npa_workflow.run_report import enclosing_loops
    from npa_workflow.spec.load import load_spec_text

    loaded = load_spec_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: w}\n"
                            "states:\n  refine: {sequence: [fan, gate], loop: {max: 2}, terminal: true}\n"
                            "  fan: {parallel: [a, b]}\n  a: {run: {shell: a}}\n  b: {run: {shell: b}}\n"
                            "  gate: {run: {shell: g}}\n")
    loops = enclosing_loops(loaded)
    assert loops["a"] == loops["b"] == loops["gate"] == ["refine"]


def _loaded_loop():
    from npa_workflow.spec.load import load_spec_text

    return load_spec_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: w}\nstates:\n"
                          "  refine: {sequence: [gate], loop: {max: 2, until: promote_checkpoint}, next: route}\n"
                          "  gate: {run: {shell: g}, writesDecision: true, outputs: [{uri: 's3://b/g', "
                          "schema: decision}]}\n  route: {run: {shell: r}, terminal: true}\n")


def _decision(seq: int, value: str, loops_key: str = "refine=1", at: str = "2026-01-01T00:00:01.000Z") -> dict:
    from npa_workflow.ledger import DecisionRecord

    record = DecisionRecord(run_id="r1", state="gate", loops_key=loops_key, seq=seq, uri="s3://b/g", decision=value,
                            read_at=at)
    return record.to_item() | {"kind": {"S": "DECISION"}}


def test_a_decision_no_predicate_matches_is_said_once_in_the_report_and_the_summary():
    from npa_workflow.run_report import build_report

    items = [_decision(1, "PROMOTE"), _decision(1, "PROMOTE", "refine=2", "2026-01-01T00:00:02.000Z")]
    doc = build_report(run_id="r1", workflow="w", loaded=_loaded_loop(), status="SUCCEEDED", items=items,
                       execution_arn="")
    [notice] = doc["notices"]
    assert "'PROMOTE' matches no predicate" in notice and "case-sensitive" in notice
    text = shown({**report(), "notices": doc["notices"]}, 200)
    assert text.count("matches no predicate") == 1
    matched = build_report(run_id="r1", workflow="w", loaded=_loaded_loop(), status="SUCCEEDED",
                           items=[_decision(1, "promote_checkpoint")], execution_arn="")
    assert matched["notices"] == []


def test_a_resumed_runs_decisions_are_each_said_once():
    from npa_workflow.run_report import build_report

    # the first execution read round 1; the resumed one read it again (its replayed gate), then round 2
    items = [_decision(1, "loop_back_to_inner_loop"),
             _decision(2, "loop_back_to_inner_loop", at="2026-01-01T00:01:00.000Z"),
             _decision(1, "promote_checkpoint", "refine=2", "2026-01-01T00:01:05.000Z")]
    doc = build_report(run_id="r1", workflow="w", loaded=_loaded_loop(), status="SUCCEEDED", items=items,
                       execution_arn="")
    assert [d["decision"] for d in doc["decisions"]] == ["loop_back_to_inner_loop", "promote_checkpoint"]
    assert shown({**report(), "decisions": doc["decisions"]}, 200).count("decision of gate") == 2


def test_a_resumed_runs_duration_is_its_last_executions():
    first = wave("a", "SUCCEEDED", replayed=True, submitted_at="2026-01-01T00:00:00.000Z",
                 started_at="2026-01-01T00:00:00.100Z", ended_at="2026-01-01T00:00:05.000Z")
    failed = wave("b", "FAILED", submitted_at="2026-01-01T00:00:05.000Z", started_at="2026-01-01T00:00:05.100Z",
                  ended_at="2026-01-01T00:00:06.000Z")
    again = wave("b", "SUCCEEDED", attempt=2, submitted_at="2026-01-01T00:01:30.000Z",
                 started_at="2026-01-01T00:01:30.500Z", ended_at="2026-01-01T00:01:38.600Z")
    resumed = report(waves=[first, failed, again], execution_started_at="2026-01-01T00:01:29.000Z")
    assert run_duration(resumed) == "8.6s"
    assert "SUCCEEDED in 8.6s" in shown(resumed, 200)
    # a report without the start: every wave but the replayed ones (which ran before any resume)
    assert run_duration({**resumed, "execution_started_at": None}) == "93.6s"


def test_a_groups_members_are_listed_in_member_order_in_the_final_table():
    from npa_workflow.ledger import WaveAttempt, WaveStatus
    from npa_workflow.run_report import build_report
    from npa_workflow.spec.load import load_spec_text

    loaded = load_spec_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: w}\nstates:\n"
                            "  prep: {run: {shell: p}, next: fan}\n"
                            "  fan: {parallel: [m0, m1, m2], maxConcurrency: 3, next: done}\n"
                            "  m0: {run: {shell: a}}\n  m1: {run: {shell: b}}\n  m2: {run: {shell: c}}\n"
                            "  done: {run: {shell: d}, terminal: true}\n")

    def item(state: str, second: int, group: str = "") -> dict:
        at = f"2026-01-01T00:00:{second:02d}.000Z"
        attempt = WaveAttempt(run_id="r1", wave_key=state, state=state, attempt=1, group=group,
                              status=WaveStatus.SUCCEEDED, started_at=at, ended_at=at)
        return attempt.to_item() | {"kind": {"S": "WAVE"}}

    # the members started (and ended) in the order m2, m0, m1
    items = [item("prep", 1), item("m2", 2, "fan"), item("m0", 3, "fan"), item("m1", 4, "fan"), item("done", 9)]
    doc = build_report(run_id="r1", workflow="w", loaded=loaded, status="SUCCEEDED", items=items, execution_arn="")
    assert [w["state"] for w in doc["waves"]] == ["prep", "m0", "m1", "m2", "done"]


def test_line_progress_labels_a_state_after_a_loop_without_the_loops_counter(capsys):
    from npa_workflow.cli.run import LineProgress
    from npa_workflow.ledger import WaveAttempt, WaveStatus

    progress = LineProgress()
    progress.spec_loaded(_loaded_loop())
    waves = [WaveAttempt(run_id="r1", wave_key="gate|refine=2", state="gate", attempt=1, status=WaveStatus.SUCCEEDED),
             WaveAttempt(run_id="r1", wave_key="route|refine=2", state="route", attempt=1, status=WaveStatus.RUNNING)]
    progress.update(waves, "RUNNING")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("gate [refine=2] attempt 1: SUCCEEDED")
    assert lines[1].endswith("] route attempt 1: RUNNING")


def test_watching_a_run_on_a_stack_says_once_what_a_waiting_trigger_needs(capsys):
    from npa_workflow.cli.progress import watch_report

    waiting = report(status="RUNNING", waves=[], watermarks=[
        {"state": "ingest", "uri": "s3://b/landing/", "objects": 1, "min_objects": 2, "waiting": True}])
    done = {**waiting, "status": "SUCCEEDED", "watermarks": [{**waiting["watermarks"][0], "objects": 2,
                                                              "waiting": False}]}
    answers = iter([waiting, waiting, done])
    watch_report(lambda: next(answers), [], Console(file=io.StringIO(), force_terminal=False), poll_seconds=0)
    out = capsys.readouterr().out
    assert out.count("ingest waits for objects under s3://b/landing/: 1 of 2 landed "
                     "(land one: aws s3 cp FILE s3://b/landing/)") == 1


def test_a_local_runs_duration_is_its_monotonic_measure_not_the_wall_clocks():
    """A wall clock set back (or forward) 2 h during a run printed `SUCCEEDED in 7200.0s`."""
    doc = report(elapsed_seconds=3.2)
    doc["waves"] = [{**doc["waves"][0], "started_at": "2026-01-01T10:00:00Z", "ended_at": "2026-01-01T12:00:00Z"}]
    assert "SUCCEEDED in 3.2s" in shown(doc)


def test_a_wave_whose_end_stamp_is_before_its_start_shows_no_duration():
    assert duration("2026-01-01T12:00:00Z", "2026-01-01T10:00:00Z") == ""
    assert duration("2026-01-01T10:00:00Z", "2026-01-01T10:00:02Z") == "2.0s"

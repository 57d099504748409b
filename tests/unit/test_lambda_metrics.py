"""Handlers' metrics: nothing reaches stdout while POWERTOOLS_METRICS_DISABLED is on, however many values.

Powertools 3.x prints a batch on a metric's 100th value even when disabled; the local stack's handlers run
in-process, where stdout is the user's (`run --json`). The helper is what keeps that stdout clean."""

from __future__ import annotations

import json
import pathlib

import pytest
from aws_lambda_powertools import Metrics

from npa_workflow.adapters.lambda_metrics import count

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.filterwarnings("ignore::UserWarning")  # "no application metrics": nothing was kept, as meant
def test_disabled_metrics_print_nothing_after_many_values(monkeypatch, capsys):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    metrics = Metrics(namespace="npa-workflow-test", service="t")
    for _ in range(250):  # past Powertools' 100-value batch
        count(metrics, "ActiveWaves", 1)
    metrics.flush_metrics(raise_on_empty_metrics=False)
    assert capsys.readouterr().out == ""


def test_the_powertools_behaviour_the_helper_guards_against(monkeypatch, capsys):
    # If Powertools stops printing disabled metrics this fails, and the helper can go.
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    metrics = Metrics(namespace="npa-workflow-test", service="t2")
    for _ in range(100):
        metrics.add_metric(name="ActiveWaves", unit="Count", value=1)
    assert '"_aws"' in capsys.readouterr().out
    metrics.clear_metrics()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_enabled_metrics_are_flushed_as_emf(monkeypatch, capsys):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    metrics = Metrics(namespace="npa-workflow-test", service="t3")
    count(metrics, "RunsStarted", 1)
    metrics.flush_metrics()
    line = json.loads(capsys.readouterr().out)
    assert line["RunsStarted"] == [1.0]
    assert line["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "npa-workflow-test"


def test_handlers_add_metrics_only_through_the_helper():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "functions").rglob("*.py")
                 if "add_metric(" in p.read_text()]
    assert offenders == []

"""A launch never outlives its Lambda: SkyPilot client calls stop retrying when the invocation's budget
(npa_workflow/budget.py, opened by the launch handler from `context.get_remaining_time_in_millis()`) runs out,
against the protocol double of the SkyPilot API server."""

from __future__ import annotations

import time

import pytest
import test_skypilot_api as sky

from npa_workflow import budget
from npa_workflow.adapters.skypilot_api import SkyPilotUnavailable

double = sky.double


def test_a_503_storm_ends_at_the_invocations_budget_not_the_clients_retry_window(double) -> None:
    api = sky._client(double.endpoint, retry_deadline=30.0)  # the client alone would retry for 30 s
    double.fail_next(503, times=10_000)
    started = time.monotonic()
    with budget.within(0.5), pytest.raises(SkyPilotUnavailable) as caught:
        api.health()
    assert time.monotonic() - started < 1.5
    assert not caught.value.maybe_received  # nothing was taken: the launch records an infrastructure failure


def test_a_spent_budget_sends_nothing(double) -> None:
    api = sky._client(double.endpoint)
    with budget.within(0), pytest.raises(SkyPilotUnavailable) as caught:
        api.launch(sky.TASK, "too-late")
    assert caught.value.attempts == 0 and "budget is spent" in str(caught.value)
    assert api.find_jobs_by_name("too-late") == []  # the server never saw it


def test_budgets_nest_and_never_extend():
    assert budget.remaining() is None
    with budget.within(10):
        with budget.within(100):
            assert budget.remaining() <= 10
    assert budget.remaining() is None

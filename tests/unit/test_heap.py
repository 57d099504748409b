"""`embedded_aws.heap.settled_heap`: collection paused while the stack starts, the start-up heap frozen, all undone."""

from __future__ import annotations

import gc

from npa_workflow.embedded_aws.heap import settled_heap


def test_paused_then_frozen_then_restored() -> None:
    assert gc.isenabled()
    frozen_before = gc.get_freeze_count()
    with settled_heap() as settle:
        assert not gc.isenabled()  # start-up: no automatic collection
        kept = [[i] for i in range(1000)]  # long-lived objects made while starting
        settle()
        assert gc.isenabled() and gc.get_freeze_count() >= frozen_before + len(kept)
        settle()  # idempotent
        cycle: list = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1  # garbage made after settling is still collected
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with settled_heap() as settle:
            settle()
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()

"""A trigger's waiting half: re-count a watched prefix and, once it holds enough objects, record the
watermark satisfied (once) and complete the waiting task token.

Both wake-ups land here: an S3 Object Created event (`on_object_created`) and the watch pass's poll
(`recount_watches`). Neither reads the run's spec — the watermark carries the prefix and the minimum —
so the watch function never loads the spec stack.
"""

from __future__ import annotations

from npa_workflow.engine.context import Engine
from npa_workflow.ledger import Watermark
from npa_workflow.ledger.items import SAMPLE_MAX


def recount(engine: Engine, mark: Watermark) -> bool:
    """Count again; when satisfied, record it (once) and complete the waiting token. True if this call did."""
    listing = engine.store.count(mark.uri, mark.min_objects)
    satisfied = listing.count >= mark.min_objects
    updated = mark.model_copy(update={
        "objects": listing.count, "sample": listing.sample[:SAMPLE_MAX], "polls": mark.polls + 1,
        "satisfied": satisfied,
    })
    changed = engine.ledger.put_watermark(updated)
    if satisfied and changed and mark.task_token:
        engine.callbacks.succeed(mark.task_token, {"state": mark.state, "objects": listing.count})
    return satisfied and changed


def recount_watches(engine: Engine) -> int:
    """The watch pass's polling half: re-count every waiting prefix. Returns how many completed."""
    return sum(1 for mark in engine.ledger.active_watches() if recount(engine, mark))


def on_object_created(engine: Engine, bucket: str, key: str) -> int:
    """An S3 event: complete the watches whose prefix holds the new object."""
    uri = f"s3://{bucket}/{key}"
    return sum(1 for mark in engine.ledger.active_watches() if uri.startswith(mark.uri) and recount(engine, mark))

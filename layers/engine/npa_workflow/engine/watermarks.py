"""A trigger's waiting half: re-count a watched prefix and, once it holds enough objects, record the
watermark satisfied (once) and complete the waiting task token.

Both wake-ups land here: an S3 Object Created event (`on_object_created`) and the watch pass's poll
(`recount_watches`). Neither reads the run's spec — the watermark carries the prefix and the minimum —
so the watch function never loads the spec stack.
"""

from __future__ import annotations

import logging

from npa_workflow.engine.context import Engine
from npa_workflow.engine.errors import TRIGGER_FAILED
from npa_workflow.engine.ports import StoreAccessDenied
from npa_workflow.ledger import Watermark
from npa_workflow.ledger.items import SAMPLE_MAX
from npa_workflow.protocol.events import event_key_forms


def recount(engine: Engine, mark: Watermark) -> bool:
    """Count again; when satisfied, complete the waiting token and record it (once). True if this call did."""
    listing = engine.store.count(mark.uri, mark.min_objects)
    satisfied = listing.count >= mark.min_objects
    updated = mark.model_copy(update={
        "objects": listing.count, "sample": listing.sample[:SAMPLE_MAX], "polls": mark.polls + 1,
        "satisfied": satisfied,
    })
    if satisfied and mark.task_token:
        # The token first, then the record: a SendTaskSuccess that fails leaves the watch waiting, and the next
        # wake-up delivers it again. Two wake-ups at once may both send; Step Functions takes the first and
        # answers the second "gone" (TaskTimedOut / InvalidToken), which the callbacks adapter absorbs.
        engine.callbacks.succeed(mark.task_token, {"state": mark.state, "objects": listing.count})
    changed = engine.ledger.put_watermark(updated)
    return satisfied and changed


LOG = logging.getLogger(__name__)


def _recount_alone(engine: Engine, mark: Watermark) -> bool:
    """One watch's re-count, isolated: a prefix the role may not list fails that trigger (the wait could
    never end), any other error waits for the next tick; the other watches go on."""
    try:
        return recount(engine, mark)
    except StoreAccessDenied as exc:
        message = f"state '{mark.state}': trigger prefix cannot be listed: {exc}"
        if engine.ledger.put_watermark(mark.model_copy(update={"task_token": None})) and mark.task_token:
            engine.callbacks.fail(mark.task_token, TRIGGER_FAILED, message)
        return False
    except Exception as exc:  # noqa: BLE001 - one watch's trouble must not stop the others
        LOG.warning("watch: trigger of run %s state '%s': %s", mark.run_id, mark.state, exc)
        return False


def recount_watches(engine: Engine) -> int:
    """The watch pass's polling half: re-count every waiting prefix. Returns how many completed."""
    return sum(1 for mark in engine.ledger.active_watches() if _recount_alone(engine, mark))


def on_object_created(engine: Engine, bucket: str, key: str) -> int:
    """An S3 event: complete the watches whose prefix holds the new object. The event's key may be URL-encoded
    (AWS) or raw (moto): a watch matches either form; the re-count lists the real keys anyway."""
    uris = [f"s3://{bucket}/{form}" for form in event_key_forms(key)]
    return sum(1 for mark in engine.ledger.active_watches()
               if any(uri.startswith(mark.uri) for uri in uris) and recount(engine, mark))

"""The run ledger: runs, wave attempts, decision reads and trigger watermarks in one DynamoDB table.

Item shapes: `npa_workflow.ledger.items`. Store: `npa_workflow.ledger.dynamodb.DynamoLedger`.
A failed conditional write surfaces as one of the small exceptions below, never as a raw botocore error.
"""

from __future__ import annotations

from typing import Any


class LedgerError(Exception):
    """Base of every ledger error."""


class LedgerConflict(LedgerError):
    """A conditional write lost: the item is not in the state the write required.

    `current` is the item as it is now (a model, or None when it does not exist).
    """

    def __init__(self, message: str, current: Any = None) -> None:
        super().__init__(message)
        self.current = current


class AttemptExists(LedgerConflict):
    """`begin_attempt` lost the launch lock: that attempt was already taken. `existing` is its item."""

    @property
    def existing(self) -> Any:
        return self.current


class LedgerNotFound(LedgerError):
    """The item to update does not exist."""


from npa_workflow.ledger.dynamodb import DynamoLedger  # noqa: E402
from npa_workflow.ledger.items import (  # noqa: E402
    DecisionRecord,
    ErrorCategory,
    RunError,
    RunRecord,
    RunStatus,
    TimelineEntry,
    Watermark,
    WaveAttempt,
    WaveStatus,
)

__all__ = [
    "AttemptExists",
    "DecisionRecord",
    "DynamoLedger",
    "ErrorCategory",
    "LedgerConflict",
    "LedgerError",
    "LedgerNotFound",
    "RunError",
    "RunRecord",
    "RunStatus",
    "TimelineEntry",
    "Watermark",
    "WaveAttempt",
    "WaveStatus",
]

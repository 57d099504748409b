"""The run ledger: runs, wave attempts, decision reads and trigger watermarks in one DynamoDB table.

Item shapes: `npa_workflow.ledger.items`. Store: `npa_workflow.ledger.dynamodb.DynamoLedger`.
A failed conditional write surfaces as one of the small exceptions of `ledger.errors`, never as a raw botocore
error. `DynamoLedger` loads on first use (it needs botocore; the items and errors do not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from npa_workflow.ledger.errors import AttemptExists, LedgerConflict, LedgerError, LedgerNotFound
from npa_workflow.ledger.items import (
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

if TYPE_CHECKING:
    from npa_workflow.ledger.dynamodb import DynamoLedger


def __getattr__(name: str) -> Any:
    """`DynamoLedger` on first use: importing the package (its items and errors, as the engine's ports do) loads
    no botocore; the store loads it when it is asked for."""
    if name == "DynamoLedger":
        from npa_workflow.ledger.dynamodb import DynamoLedger

        return DynamoLedger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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

"""The ledger's errors: a failed conditional write surfaces as one of these, never as a raw botocore error.
A module of their own so that the store (`ledger.dynamodb`) and its users import them without importing each
other."""

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

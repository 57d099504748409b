"""The waves of one local run for the live display, read from the stack's durable record, not from moto.

The display refreshes every half second while a run goes. Asking the ledger (a DynamoDB `Query` of every attempt
of the run, through moto) costs a request, moto's serialization of every item and botocore's parsing of it, and
grows with the run. The durable record (`embedded_aws.durable_aws`) holds every item moto holds: each write is recorded
before its request is answered. So the display reads it there, only when an item was written since its last
look, and parses only the items that changed. The engine and its handlers still read the ledger through DynamoDB.
The run's trigger watermarks come with them: the display says what a trigger waits for.
"""

from __future__ import annotations

import json

from npa_workflow.embedded_aws.durable_aws import DurableAws
from npa_workflow.ledger import Watermark, WaveAttempt
from npa_workflow.ledger.items import WATERMARK_SK_PREFIX, WAVE_SK_PREFIX, run_pk

__all__ = ["RunWaves"]


class RunWaves:
    def __init__(self, durable: DurableAws, table: str, run_id: str) -> None:
        self.durable = durable
        self.table = table
        self.pk = run_pk(run_id)
        self._seen_writes = -1
        self._parsed: dict[str, tuple[str, WaveAttempt | Watermark]] = {}  # sort key -> (item JSON, its model)
        self._waves: list[WaveAttempt] = []
        self._watermarks: list[Watermark] = []

    def changed(self) -> bool:
        """An item was written since the last `waves()`."""
        return self.durable.item_writes != self._seen_writes

    def waves(self) -> list[WaveAttempt]:
        """Every attempt of the run in sort-key order (by wave key, then attempt), as `DynamoLedger.attempts`."""
        self._refresh()
        return list(self._waves)

    def watermarks(self) -> list[Watermark]:
        """Every trigger watermark of the run (its latest observation), as `DynamoLedger.watermarks`."""
        self._refresh()
        return list(self._watermarks)

    def _refresh(self) -> None:
        if not self.changed():
            return
        self._seen_writes = self.durable.item_writes
        parsed: dict[str, tuple[str, WaveAttempt | Watermark]] = {}
        for key_text, item_text in self.durable.items(self.table):
            key = json.loads(key_text)
            sk = key.get("sk", {}).get("S", "")
            if key.get("pk", {}).get("S") != self.pk:
                continue
            model = (WaveAttempt if sk.startswith(WAVE_SK_PREFIX) else
                     Watermark if sk.startswith(WATERMARK_SK_PREFIX) else None)
            if model is None:
                continue
            known = self._parsed.get(sk)
            parsed[sk] = known if known and known[0] == item_text else (
                item_text, model.from_item(json.loads(item_text)))
        self._parsed = parsed
        ordered = [parsed[sk][1] for sk in sorted(parsed)]
        self._waves = [m for m in ordered if isinstance(m, WaveAttempt)]
        self._watermarks = [m for m in ordered if isinstance(m, Watermark)]

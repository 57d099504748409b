"""One watcher per watched run, shared by every viewer of it: it reads the run when the run changed and pushes the
same rendered update to all of them (server-sent events, `console.app`).

When a run changed, by the source:
- local runs: the run's ledger file and JSON files changed size or time (stat'ed every `poll_seconds`, 0.1 s);
- `serve`'s own console: the durable layer told of a write to the run's partition (no polling at all);
- a stack in another process: no signal reaches us, so the run is read once per `poll_seconds` (1 s), and an
  update is pushed only when what it shows changed.

Either way a change costs one read of the run, whether 1 or 20 browsers watch it; a viewer that connects gets
the latest update already rendered (no read). The watcher stops when its last viewer leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Hashable
from typing import Any

LOG = logging.getLogger(__name__)
_UNSET: Any = object()


class Update:
    """One rendered state of a run, serialized once for every viewer."""

    def __init__(self, payload: dict[str, Any], data: Any) -> None:
        self.payload = payload
        self.data = data  # the RunData it was rendered from (the page's first render reuses it)
        self.text = json.dumps(payload, separators=(",", ":"))


class RunWatcher:
    def __init__(self, hub: Hub, run_id: str) -> None:
        self.hub = hub
        self.run_id = run_id
        self.queues: set[asyncio.Queue[Update]] = set()
        self.latest: Update | None = None
        self.changes = 0  # changes seen (each cost one read)
        self.task: asyncio.Task[None] | None = None
        self._first = asyncio.Event()

    async def _read(self) -> Update:
        source = self.hub.source
        data = await asyncio.to_thread(source.read, self.run_id)
        return await asyncio.to_thread(self.hub.render, self.run_id, data)

    def _publish(self, update: Update) -> None:
        previous = self.latest
        self.latest = update
        self._first.set()
        if previous is not None and previous.payload == update.payload:
            return  # nothing a viewer sees changed (a polled stack)
        for queue in list(self.queues):
            if queue.full():  # a viewer that stopped reading: it gets the newest state, not a backlog
                with contextlib.suppress(asyncio.QueueEmpty):
                    queue.get_nowait()
            queue.put_nowait(update)

    async def run(self) -> None:
        source = self.hub.source
        token: Hashable = _UNSET
        try:
            while self.queues:
                if getattr(source, "notified", False):
                    seen = source.change_token(self.run_id)
                    if token is not _UNSET and seen == token:
                        await asyncio.to_thread(source.wait_change, self.run_id, token, 1.0)
                        seen = source.change_token(self.run_id)
                    if seen == token:
                        continue
                    token = seen
                else:
                    now = source.change_token(self.run_id)
                    if token is not _UNSET and now is not None and now == token:
                        await asyncio.sleep(source.poll_seconds)
                        continue
                    if token is not _UNSET and now is None:
                        await asyncio.sleep(source.poll_seconds)
                    token = now
                self.changes += 1
                try:
                    update = await self._read()
                except Exception as exc:  # noqa: BLE001 - a failed read (the run's files mid-write): try again
                    LOG.warning("console: reading run %s failed: %s", self.run_id, type(exc).__name__)
                    token = _UNSET
                    await asyncio.sleep(source.poll_seconds)
                    continue
                self._publish(update)
        finally:
            self.hub._watchers.pop(self.run_id, None)


class Hub:
    """The watchers of one console: `render(run_id, data) -> Update` turns a read into what viewers get."""

    def __init__(self, source: Any, render: Callable[[str, Any], Update]) -> None:
        self.source = source
        self.render = render
        self._watchers: dict[str, RunWatcher] = {}

    def watcher(self, run_id: str) -> RunWatcher | None:
        return self._watchers.get(run_id)

    async def subscribe(self, run_id: str) -> tuple[RunWatcher, asyncio.Queue[Update]]:
        watcher = self._watchers.get(run_id)
        if watcher is None:
            watcher = self._watchers[run_id] = RunWatcher(self, run_id)
        queue: asyncio.Queue[Update] = asyncio.Queue(maxsize=4)
        watcher.queues.add(queue)
        if watcher.task is None or watcher.task.done():
            watcher.task = asyncio.create_task(watcher.run())
        if watcher.latest is not None:
            queue.put_nowait(watcher.latest)  # what is known now: no read for a viewer who joins
        else:
            await watcher._first.wait()
            if watcher.latest is not None and queue.empty():
                queue.put_nowait(watcher.latest)
        return watcher, queue

    def unsubscribe(self, watcher: RunWatcher, queue: asyncio.Queue[Update]) -> None:
        watcher.queues.discard(queue)

    async def current(self, run_id: str) -> Update:
        """The run now: a watched run's latest update, else one read."""
        watcher = self._watchers.get(run_id)
        if watcher is not None and watcher.latest is not None:
            return watcher.latest
        data = await asyncio.to_thread(self.source.read, run_id)
        return await asyncio.to_thread(self.render, run_id, data)

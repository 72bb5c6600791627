"""Share-group state of a worker other than 0, kept in worker 0's table.

A worker leads the share-partitions of the topic partitions it owns, but
only worker 0 writes the store's state tables: the others' writes were
refused ("only worker 0 ... changes ... state tables"), so their members'
acknowledgements were never answered and a share group whose partitions
were another worker's delivered nothing. As Kafka's share-partition leaders
write their state to the share coordinator, a worker sends each write to
worker 0 (the WorkerState request, kafkacompat/handlers/worker_state.py)
and reads the table from there before it restores a share-partition, so a
restarted worker goes on from what was acknowledged.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kafkacompat import storage
from kafkacompat.protocol.admin_api import WORKER_STATE_KEY, AdminMessageError, decode_response, encode_request

from .forward import CLIENT_ID, exchange
from .view import WorkerView

TIMEOUT_S = 10.0


class WorkerShareState:
    """The shares.manager.StateTable of a worker other than 0: worker 0's `share_state` table."""

    local = False  # rows() is what the last reload() read

    def __init__(self, view: WorkerView) -> None:
        self.view = view
        self._rows: dict[str, dict] = {}

    def rows(self) -> dict[str, dict]:
        return self._rows

    async def reload(self) -> None:
        rows = await self._ask({"op": "share_state.read"})
        if not isinstance(rows, dict):
            raise storage.StorageError("worker 0 answered the share-group state with something else than a table")
        self._rows = rows

    async def put(self, records: dict[str, dict | None], fence: storage.StateFence | None) -> None:
        """Written by worker 0 (the fence, this worker's own epoch, holds while it runs: its partitions
        are no other worker's); StorageError, and the caller keeps the records to write again, when worker
        0 cannot be reached or refuses."""
        await self._ask({"op": "share_state.write", "records": records})
        for key, record in records.items():
            if record is None:
                self._rows.pop(key, None)
            else:
                self._rows[key] = record

    async def _ask(self, body: dict[str, Any]) -> Any:
        view = self.view
        try:
            reply = await asyncio.wait_for(self._exchange(body), TIMEOUT_S)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, AdminMessageError) as exc:
            raise storage.StorageError(f"worker {view.role.index}: cannot reach worker 0 for the share-group "
                                       f"state: {exc or type(exc).__name__}") from None
        if reply.error_code != 0:
            raise storage.StorageError(f"worker 0 refused the share-group state: {reply.error}")
        return reply.result

    async def _exchange(self, body: dict[str, Any]) -> Any:
        view = self.view
        request = encode_request(1, body, CLIENT_ID.decode(), key=WORKER_STATE_KEY)
        return decode_response(await exchange(view.controller_host, view.role.ports[0], request, view.security,
                                              TIMEOUT_S))[1]

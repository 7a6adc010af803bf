"""A Python client of the WebSocket door: the same ops as `BridgeClient`, msgpack in binary frames or JSON
in text frames (`json=True`). Synchronous (the `websockets` library's sync client), one request at a time;
a dropped connection is reopened and the same request (same id, same bytes) sent again, up to `retries`
times, so a retried `session.step` is answered from the server's replay cache, never applied twice.

    with WsBridgeClient("ws://127.0.0.1:8765", token=None) as bridge:
        info = bridge.hello()
        actions, _ = bridge.act(obs, mask)
"""

from __future__ import annotations

import json as _json
from typing import Any

from bridge import protocol as P
from bridge.client import BridgeClient, BridgeError, BridgeTimeout, result_of


class WsBridgeClient(BridgeClient):
    def __init__(self, url: str, *, token: str | None = None, json: bool = False, timeout: float = 5.0,
                 retries: int = 3, origin: str | None = None, limits: P.Limits | None = None):
        self._settings(url, timeout, retries, limits)
        self.token = token
        self.json = json
        self.origin = origin
        self.ws: Any = None
        self._connect()

    def _connect(self) -> None:
        from websockets.sync.client import connect

        headers = {"Authorization": f"Bearer {self.token}"} if self.token else None
        conn = connect(self.endpoint, additional_headers=headers, origin=self.origin,  # type: ignore[arg-type]
                       max_size=self.limits.hard_message_bytes, compression=None, open_timeout=self.timeout)
        self.ws = conn.__enter__()  # held open across calls; close() ends it

    def _reconnect(self) -> None:
        if self.ws is not None:
            self.ws.close()
        self.reconnects += 1
        self._connect()

    def send_raw(self, body: bytes | str, request_id: Any = None) -> dict[str, Any]:
        """Send one frame (bytes: msgpack, str: JSON) with the retry policy; returns the decoded reply map."""
        from websockets.exceptions import ConnectionClosed

        for attempt in range(self.retries + 1):
            try:
                if attempt:
                    self._reconnect()
                self.ws.send(body)
                frame = self.ws.recv(timeout=self.timeout)
            except (ConnectionClosed, TimeoutError, OSError):
                continue
            reply = _json.loads(frame) if isinstance(frame, str) else P.unpack(frame, self.limits)
            if isinstance(reply, dict) and request_id is not None and reply.get("id") not in (request_id, None):
                raise BridgeError("bad_reply", f"reply for id {reply.get('id')!r}, expected {request_id!r}",
                                  request_id)
            return reply
        raise BridgeTimeout(f"no reply from {self.endpoint} after {self.retries + 1} attempts of {self.timeout} s",
                            request_id)

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        request_id = self.next_id()
        message = P.request(op, request_id, **fields)
        if not self.json:
            return result_of(self.send_raw(P.pack(message), request_id), request_id)
        from bridge.ws import _json_from_reply

        result = result_of(self.send_raw(_json.dumps(_json_from_reply(message)), request_id), request_id)
        from bridge.ws import _arrays_from_json

        return _arrays_from_json(result)

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
            self.ws = None

    def __enter__(self) -> WsBridgeClient:
        return self

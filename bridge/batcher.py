"""The dynamic batcher: requests that need the policy wait here to share one forward.

A batch is sent when it reaches `max_rows`, when its oldest request has waited `delay_s`, or as soon as no
other recently active client is missing from it (so a lone client never waits for company that is not
coming). Transport-free: a client is any hashable key the door gives; the batcher never sees a socket.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from bridge.sessions import Session
from npc_brains.policy_api import Policy


@dataclass(slots=True)
class Item:
    """A request waiting in the batch."""

    peer: Any  # the door's address of the requester (opaque here)
    client: Any  # hashable: who sent it, for the "everyone is in" rule
    op: str
    rid: Any  # the request id
    t0: int  # perf_counter_ns at receipt
    obs: np.ndarray
    mask: np.ndarray
    deterministic: bool
    with_probs: bool = False
    session: Session | None = None
    cache_key: str | None = None
    temperature: float | None = None  # the request's or its session's sampling temperature; None: the policy's
    personality_strength: float | None = None  # the request's or its session's; None: the policy's


class Batcher:
    """Collects Items; `take()` empties it; `forward()` runs the policy over a taken batch."""

    def __init__(self, delay_s: float, max_rows: int):
        self.delay_s = delay_s
        self.max_rows = max_rows
        self.items: list[Item] = []
        self.rows = 0
        self.sessions: set[str] = set()
        self.clients: set[Any] = set()
        self.deadline = 0.0
        self.active: dict[Any, float] = {}  # client -> last batched request (monotonic s)
        self.active_window = max(0.05, 20 * delay_s)
        self.stats = {"count": 0, "rows": 0, "requests": 0, "max_rows": 0}

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, item: Item) -> bool:
        """Queue one item; True when the batch must be flushed before this one joins (it would overflow)."""
        rows = item.obs.shape[0]
        if not self.items:
            self.deadline = time.perf_counter() + self.delay_s
        self.items.append(item)
        self.rows += rows
        self.clients.add(item.client)
        self.active[item.client] = time.monotonic()
        if item.session is not None:
            self.sessions.add(item.session.id)
        return self.rows >= self.max_rows

    def would_overflow(self, rows: int) -> bool:
        return bool(self.items) and self.rows + rows > self.max_rows

    def should_flush(self) -> bool:
        if len(self.active) <= len(self.clients):  # everyone recently active is in (a lone client)
            return True
        if self.rows >= self.max_rows or time.perf_counter() >= self.deadline:
            return True
        horizon = time.monotonic() - self.active_window
        return not any(t >= horizon and c not in self.clients for c, t in self.active.items())

    def take(self) -> list[Item]:
        items, self.items = self.items, []
        rows, self.rows = self.rows, 0
        self.sessions.clear()
        self.clients.clear()
        if items:
            s = self.stats
            s["count"] += 1
            s["rows"] += rows
            s["requests"] += len(items)
            s["max_rows"] = max(s["max_rows"], rows)
        return items

    def forget_idle(self, now: float) -> None:
        horizon = now - self.active_window
        self.active = {c: t for c, t in self.active.items() if t >= horizon}

    def summary(self) -> dict[str, Any]:
        s = self.stats
        return {"count": s["count"], "rows_mean": round(s["rows"] / max(s["count"], 1), 2),
                "requests_mean": round(s["requests"] / max(s["count"], 1), 2), "max_rows": s["max_rows"]}

    @staticmethod
    def forward(policy: Policy, items: list[Item], log: Any) -> dict[int, Any]:
        """One policy forward per group of the same play (deterministic or sampled at one temperature, at one
        personality strength); position in items -> (actions, probs) or an exception."""
        results: dict[int, Any] = {}
        if len(items) == 1:
            it = items[0]
            _forward_at(policy, items, [0], it.deterministic, it.temperature, it.personality_strength, results, log)
            return results
        groups: dict[tuple[bool, float | None, float | None], list[int]] = {}
        for k, it in enumerate(items):
            groups.setdefault((it.deterministic, it.temperature, it.personality_strength), []).append(k)
        for (det, temperature, strength), group in groups.items():
            _forward_at(policy, items, group, det, temperature, strength, results, log)
        return results


def _forward_at(policy: Policy, items: list[Item], group: list[int], det: bool, temperature: float | None,
                strength: float | None, results: dict[int, Any], log: Any) -> None:
    """_forward with the policy at `temperature` and personality `strength` for this group (None, or a policy
    without them: as it is), and at its own again after."""
    if temperature is None and strength is None:  # the usual request: the policy as it is, nothing to build
        _forward(policy, items, group, det, results, log)
        return
    changes = {name: value for name, value in (("temperature", temperature), ("strength", strength))
               if value is not None and getattr(policy, name, None) not in (None, value)}
    if not changes:
        _forward(policy, items, group, det, results, log)
        return
    own = {name: getattr(policy, name) for name in changes}
    for name, value in changes.items():
        setattr(policy, name, value)
    try:
        _forward(policy, items, group, det, results, log)
    finally:
        for name, value in own.items():
            setattr(policy, name, value)


def _forward(policy: Policy, items: list[Item], group: list[int], det: bool, results: dict[int, Any],
             log: Any) -> None:
    """One policy forward for the group; if it fails, each request alone (so one bad apple fails alone)."""
    with_probs = any(items[k].with_probs for k in group)
    try:
        if len(group) == 1:
            obs, mask = items[group[0]].obs, items[group[0]].mask
        else:
            obs = np.concatenate([items[k].obs for k in group])
            mask = np.concatenate([items[k].mask for k in group])
        out = policy.act(obs, mask, deterministic=det, with_probs=with_probs)
        actions = np.asarray(out.actions)
        if actions.shape != (obs.shape[0],):
            raise ValueError(f"policy returned actions of shape {actions.shape} for {obs.shape[0]} rows")
    except Exception:
        if len(group) > 1:
            for k in group:
                _forward(policy, items, [k], det, results, log)
            return
        results[group[0]] = RuntimeError("the policy failed on this request")
        log.exception("policy_error", extra={"id": items[group[0]].rid})
        return
    start = 0
    for k in group:
        n = items[k].obs.shape[0]
        probs = out.probs[start:start + n] if out.probs is not None else None
        results[k] = (actions[start:start + n], probs)
        start += n

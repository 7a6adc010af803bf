"""Stateful sessions: the NPC minds of an external world, run by the engine's own code.

A session is a one-village `engine.sim.VillageSim` built from the game's world (a world file's TOML, or
a list of NPCs with traits and relationships). The game owns the bodies; the bridge owns the minds:

- `session.step` first overwrites the simulation's body state (positions, health, alive, actors present)
  with the game's values, recomputes the observations, lets the policy choose (in the server's batch),
  then runs one engine tick, so perception, news spreading, OCC appraisal, emotion decay and the
  reaction labels are exactly the engine's.
- `session.event` queues what happened in the game (death, attack, gift, talk); it is injected into the
  next tick at the point where the engine resolves its own combat and news (see `engine.external.ExternalSim`), so a
  death sets the victim's health to 0 through the tick's combat resolution and witnesses, culprits,
  grief, anger and fear follow as they would in the engine.
- The simulation's own combat does no damage (`engine.external.mind_tuning`): an NPC that chooses to attack is reported
  to the game, which resolves the blow and reports the outcome (health, or an attack/death event).

Sessions are bounded (NPCs, actors, queued events, replay cache, id maps), expire when idle, and can be
saved to a state directory as numpy .npz snapshots (state arrays + a JSON metadata blob; never pickle).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import logging
import os
import secrets
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from bridge.barks import bark
from bridge.protocol import Limits, ProtocolError, decode_array, describe
from engine.constants import ACTION_NAMES, REACTION_NAMES, EventType, Reaction, Tuning
from engine.external import ExternalSim, InjectedHit, InjectedSighting
from engine.mind import losses_from_grief
from engine.reactions import ReactionRuns
from engine.sim import Command
from engine.state import VillageState
from npc_brains.personality import check_personality
from npc_brains.runtime import check_temperature
from worlds import TRAIT_NAMES, WorldError, WorldSpec, world_from_dict
from worlds.atomic import write_atomically

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

log = logging.getLogger("bridge.sessions")

SNAPSHOT_FORMAT = 1
# VillageState fields added after format 1 was fixed: a snapshot saved before them restores with their fresh
# value (threat_victim: no earlier violence remembered; loss_grief: each villager's grief shared out over the deaths
# it knows of, engine.mind.losses_from_grief, where the world holds grief per loss), so an upgraded server keeps its
# sessions
LATER_STATE_FIELDS = frozenset({"threat_victim", "loss_grief"})
REPLAY_CACHE = 8  # replies remembered per session for retried requests
ID_MAP_LIMIT = 4096  # engine event id -> session event number, most recent kept
QUARANTINE = "quarantine"  # sessions/ subfolder that unreadable snapshots are moved to
NPC_KEYS = ("name", "role", "traits", "health", "x", "y")


# ---------------------------------------------------------------------------------------------- worlds


def build_world(req: dict[str, Any], limits: Limits) -> WorldSpec:
    """The WorldSpec of a session.create request (TOML text or an NPC list); errors name the field."""
    has_world, has_npcs = "world" in req, "npcs" in req
    if has_world == has_npcs:
        raise ProtocolError("bad_request", "world, npcs: give exactly one of world (TOML text) or npcs (a list)")
    if has_world:
        for key in ("relationships", "actors", "width", "height", "sight_radius"):
            if key in req:
                raise ProtocolError("bad_request", f"{key}: only allowed with npcs; with world it belongs in "
                                    "the TOML text")
        text = req["world"]
        if len(text.encode("utf-8", "surrogatepass")) > limits.max_world_bytes:
            raise ProtocolError("limit_exceeded", f"world: TOML text longer than {limits.max_world_bytes} bytes")
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, ValueError, RecursionError) as exc:
            raise WorldError(f"TOML syntax error: {exc}", source="session.create.world") from None
        spec = world_from_dict(data, source="session.create.world")
    else:
        spec = world_from_npcs(req, limits)
    if len(spec.npcs) > limits.max_npcs:
        raise ProtocolError("limit_exceeded", f"npcs: {len(spec.npcs)} NPCs exceed the limit of {limits.max_npcs}")
    if len(spec.actors) > limits.max_actors:
        raise ProtocolError("limit_exceeded", f"actors: {len(spec.actors)} actors exceed the limit of "
                            f"{limits.max_actors}")
    return spec


def world_from_npcs(req: dict[str, Any], limits: Limits) -> WorldSpec:
    """A world around a list of NPCs: one home per NPC at its position, a square in the middle."""
    npcs = req["npcs"]
    if not npcs:
        raise ProtocolError("bad_request", "npcs: expected at least one NPC, got an empty list")
    if len(npcs) > limits.max_npcs:
        raise ProtocolError("limit_exceeded", f"npcs: {len(npcs)} NPCs exceed the limit of {limits.max_npcs}")
    names: list[str] = []
    for i, npc in enumerate(npcs):
        for key in npc:
            if key not in NPC_KEYS:
                raise ProtocolError("bad_request", f"npcs[{i}].{key}: unknown key; allowed keys: "
                                    f"{', '.join(NPC_KEYS)}")
        name = npc.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ProtocolError("bad_request", f"npcs[{i}].name: expected a non-empty string, got {describe(name)}")
        if name in names:
            raise ProtocolError("bad_request", f"npcs[{i}].name: {name!r} is used twice; NPC names must be unique")
        names.append(name)
        for key in ("x", "y"):
            if key in npc and (isinstance(npc[key], bool) or not isinstance(npc[key], (int, float))
                               or not np.isfinite(npc[key]) or npc[key] < 0):
                raise ProtocolError("bad_request", f"npcs[{i}].{key}: expected a number >= 0, got "
                                    f"{describe(npc[key])}")
    # homes: given positions, or a circle around the middle
    n = len(npcs)
    angle = 2 * np.pi * np.arange(n) / n
    given = [(npc.get("x"), npc.get("y")) for npc in npcs]
    placed = [(float(x), float(y)) if x is not None and y is not None else None for x, y in given]
    extent = max([max(p) for p in placed if p is not None] + [0.0])
    width = req.get("width")
    height = req.get("height")
    side = max(extent + 5.0, 20.0)
    width = float(width) if width is not None else side
    height = float(height) if height is not None else side
    homes = []
    for i, p in enumerate(placed):
        if p is None:
            r = 0.35 * min(width, height)
            p = (width / 2 + r * float(np.cos(angle[i])), height / 2 + r * float(np.sin(angle[i])))
        homes.append(p)
    settings: dict[str, Any] = {"raid_probability": 0.0}
    if "sight_radius" in req:
        settings["sight_radius"] = req["sight_radius"]
    data: dict[str, Any] = {
        "world": {"id": "bridge-session", "name": "bridge session", "width": width, "height": height},
        "settings": settings,
        "locations": [{"name": f"home of {name}", "kind": "home", "x": x, "y": y}
                      for name, (x, y) in zip(names, homes, strict=True)]
        + [{"name": "square", "kind": "square", "x": width / 2, "y": height / 2}],
        "npcs": [
            {"name": name, "role": npc.get("role", "farmer"), "home": f"home of {name}",
             **{k: npc[k] for k in ("traits", "health") if k in npc}}
            for name, npc in zip(names, npcs, strict=True)
        ],
        "relationships": req.get("relationships", []),
        "actors": req.get("actors", []),
    }
    return world_from_dict(data, source="session.create")


# ---------------------------------------------------------------------------------------------- sessions


def _to_jsonable(value: Any) -> Any:
    """Session creation fields as JSON (they are plain msgpack values: maps, lists, str, numbers)."""
    return json.loads(json.dumps(value))


class Session:
    """One external world's minds. Not thread-safe: the server's loop is the only caller."""

    def __init__(self, sid: str, create: dict[str, Any], spec: WorldSpec, sim: ExternalSim, *,
                 deterministic: bool, limits: Limits, temperature: float | None = None,
                 personality_strength: float | None = None):
        self.id = sid
        self.create = create
        self.spec = spec
        self.sim = sim
        self.deterministic = deterministic
        self.temperature = temperature  # its NPCs' sampling temperature; None: the server's
        self.personality_strength = personality_strength  # how strongly its NPCs play their personalities
        self.limits = limits
        self.names: list[str] = sim.entity_names[0]
        self.index = {name: k for k, name in enumerate(self.names)}
        self.N, self.E = sim.N, sim.E
        self.event_seq = 0
        self.pending: list[dict[str, Any]] = []
        self.engine_ids: OrderedDict[int, int] = OrderedDict()
        self.react_cause = np.full(self.N, -1, np.int64)
        self.runs = ReactionRuns(1, self.N)
        self.replies: OrderedDict[str, bytes] = OrderedDict()
        self.last_used = time.time()
        self.steps = 0

    # -------------------------------------------------------------------------------- references
    def entity(self, ref: Any, where: str, *, npc_only: bool = False) -> int:
        if isinstance(ref, str):
            k = self.index.get(ref)
            if k is None:
                raise ProtocolError("bad_request", f"{where}: {ref!r} is not an NPC or actor of this session")
        else:
            k = int(ref)
            if not 0 <= k < self.E:
                raise ProtocolError("bad_request", f"{where}: entity index {k} is out of range 0..{self.E - 1}")
        if npc_only and k >= self.N:
            raise ProtocolError("bad_request", f"{where}: {self.names[k]!r} is an actor; expected an NPC")
        return k

    def name(self, k: int) -> str | None:
        return self.names[k] if 0 <= k < self.E else None

    # -------------------------------------------------------------------------------- replay cache
    @staticmethod
    def replay_key(op: str, request_id: Any, body: bytes) -> str:
        return f"{op}:{request_id!r}:{hashlib.sha1(body).hexdigest()}"

    def cached(self, key: str) -> bytes | None:
        return self.replies.get(key)

    def remember(self, key: str, reply: bytes) -> None:
        self.replies[key] = reply
        while len(self.replies) > REPLAY_CACHE:
            self.replies.popitem(last=False)

    # -------------------------------------------------------------------------------- events
    def queue_event(self, req: dict[str, Any]) -> dict[str, Any]:
        if len(self.pending) >= self.limits.max_queued_events:
            raise ProtocolError("limit_exceeded", f"{len(self.pending)} events are already queued for the next "
                                "session.step (limits.max_queued_events)")
        kind = req["type"]
        s = self.sim.state
        target = self.entity(req["target"], "target")
        actor = self.entity(req["actor"], "actor") if req.get("actor") is not None else -1
        if kind in ("gift", "talk", "attack") and actor < 0:
            raise ProtocolError("bad_request", f"actor: a {kind} event needs an actor")
        if actor == target:
            raise ProtocolError("bad_request", "target: expected someone other than the actor")
        if kind in ("gift", "talk") and target >= self.N:
            raise ProtocolError("bad_request", f"target: a {kind} event needs an NPC target")
        if not s.alive[0, target] or any(p["type"] == "death" and p["target"] == target for p in self.pending):
            raise ProtocolError("bad_request", f"target: {self.names[target]!r} is already dead in this session")
        pos = None
        if "position" in req:
            size = self.sim.w.size[0]
            pos = [float(np.clip(req["position"][0], 0, size[0])), float(np.clip(req["position"][1], 0, size[1]))]
        witnesses = None
        if "witnesses" in req:
            if kind not in ("death", "attack"):
                raise ProtocolError("bad_request", f"witnesses: only for death and attack events, not {kind}")
            if len(req["witnesses"]) > self.N:
                raise ProtocolError("limit_exceeded", f"witnesses: more than the {self.N} NPCs of the session")
            witnesses = sorted({self.entity(w, f"witnesses[{i}]", npc_only=True)
                                for i, w in enumerate(req["witnesses"])})
        self.event_seq += 1
        self.pending.append({"event": self.event_seq, "type": kind, "actor": actor, "target": target,
                             "pos": pos, "witnesses": witnesses})
        return {"event": self.event_seq, "queued": len(self.pending)}

    # -------------------------------------------------------------------------------- the step
    def prepare(self, req: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Overwrite the bodies with the game's, inject the queued events; returns (obs, mask) (N, ...)."""
        sim, s, N, E = self.sim, self.sim.state, self.N, self.E
        M = E - N
        arrays = {}
        for key, shape in (("pos", (E, 2)), ("health", (E,)), ("alive", (E,)), ("present", (M,))):
            if key in req:
                a = decode_array(req[key], key, max_elements=2 * E)
                if a.shape != shape:
                    raise ProtocolError("invalid_array", f"{key}: expected shape {list(shape)} "
                                        f"(entities: {N} NPCs then {M} actors), got {list(a.shape)}")
                if a.dtype.kind == "f" and not np.isfinite(a).all():
                    raise ProtocolError("invalid_array", f"{key}: contains NaN or infinity")
                arrays[key] = a
        changed = bool(arrays) or bool(self.pending)
        dying: dict[int, dict[str, Any]] = {p["target"]: p for p in self.pending if p["type"] == "death"}
        if "pos" in arrays:
            s.pos[0] = np.clip(arrays["pos"], 0, sim.w.size[0]).astype(np.float32)
        if "present" in arrays:
            s.present[0, N:] = arrays["present"].astype(bool)
        implicit: list[int] = []
        if "health" in arrays:
            health = np.maximum(arrays["health"].astype(np.float32), 0.0)
            zero = s.alive[0] & (health <= 0)
            implicit += [int(k) for k in np.flatnonzero(zero) if int(k) not in dying]
            health = np.where(s.alive[0], np.maximum(health, 1e-3), 0.0)
            s.health[0] = health
        if "alive" in arrays:
            gone = s.alive[0] & ~arrays["alive"].astype(bool)
            implicit += [int(k) for k in np.flatnonzero(gone) if int(k) not in dying and int(k) not in implicit]
        for k in implicit:  # died in the game without a death event: a death of unknown cause
            self.event_seq += 1
            self.pending.append({"event": self.event_seq, "type": "death", "actor": -1, "target": k,
                                 "pos": None, "witnesses": None, "implicit": True})
        self._inject()
        if changed:
            sim.obs, sim.mask = sim.observer.observe()
        return sim.obs[0], sim.mask[0]

    def _inject(self) -> None:
        sim, s, N = self.sim, self.sim.state, self.N
        for p in self.pending:
            kind, actor, target = p["type"], p["actor"], p["target"]
            if kind in ("death", "attack"):
                pos = np.array(p["pos"], np.float32) if p["pos"] is not None else s.pos[0, target].copy()
                if kind == "attack" and p["pos"] is not None:
                    s.pos[0, target] = pos
                sim.injected_hits.append(InjectedHit(actor, target, kind == "death", pos))
                if p["witnesses"] is not None:
                    mask = np.zeros(N, bool)
                    mask[p["witnesses"]] = True
                    subject = target if kind == "death" else actor
                    sim.injected_sightings.append(InjectedSighting(kind, subject, actor, target, mask))
            elif kind == "gift":
                sim.commands.append(Command(0, actor, "gift", target))
            elif kind == "talk" and actor < N:
                sim.injected_talks.append((actor, target))
            # a talk by an actor (the player) carries no news: actors have no knowledge arrays

    def abort(self) -> None:
        """Undo `prepare`'s injections when the step cannot run (the queued events stay queued)."""
        self.sim.injected_hits.clear()
        self.sim.injected_sightings.clear()
        self.sim.injected_talks.clear()
        self.sim.commands.clear()
        self.pending = [p for p in self.pending if not p.get("implicit")]

    def finish(self, action: np.ndarray) -> dict[str, Any]:
        """Run the tick with the policy's actions; the reply fields of session.step."""
        sim, s, N = self.sim, self.sim.state, self.N
        applied = self.pending
        self.pending = []
        sim.tick(action)
        self.steps += 1
        tick = int(s.tick[0])
        events_out: list[dict[str, Any]] = []
        reported: set[int] = set()
        labelled: dict[tuple[int, int], Any] = {}  # (npc, reaction) -> this tick's reaction event
        used: set[tuple[int, int]] = set()
        for ev in sim.log.events:
            if ev.type == EventType.REACTION:
                labelled[(ev.actor, ev.reaction)] = ev
                continue
            number = self._number_for(ev, applied, used)
            entry = {"event": number, "type": ev.type.name.lower(), "actor": self.name(ev.actor),
                     "target": self.name(ev.target), "x": round(ev.x, 3), "y": round(ev.y, 3),
                     "external": any(p["event"] == number for p in applied)}
            if number in reported:  # an injected death logs its killing blow and the death: report the death
                if ev.type == EventType.DEATH:
                    events_out = [entry if e["event"] == number else e for e in events_out]
                continue
            reported.add(number)
            events_out.append(entry)
        for p in applied:  # talks and no-op events leave no engine event; report them as applied
            if p["event"] not in reported and p["type"] in ("talk",):
                events_out.append({"event": p["event"], "type": p["type"], "actor": self.name(p["actor"]),
                                   "target": self.name(p["target"]), "x": None, "y": None, "external": True})
        sim.log.clear()
        reactions = []
        # a reaction keeps its label for as long as the behaviour continues; a bark when it starts
        began = self.runs.update(sim.reaction, s.activity, s.target, s.alive[:, :N], s.tick)[0]
        since, duration = self.runs.since[0], self.runs.duration(s.tick)[0]
        for i in range(N):
            alive = bool(s.alive[0, i])
            label = int(self.runs.label[0, i])
            target = int(s.target[0, i])
            first, shown_since, shown_for = bool(began[i]), int(since[i]), int(duration[i])
            gloat = labelled.get((i, int(Reaction.GLOATING)))
            if label == Reaction.NONE and gloat is not None:  # gloating is a moment, not a behaviour
                label, target, first, shown_since, shown_for = int(Reaction.GLOATING), int(gloat.target), True, tick, 1
            ev = labelled.get((i, label)) if first else None
            if first:
                self.react_cause[i] = self.engine_ids.get(int(ev.cause), -1) if ev is not None and ev.cause >= 0 else -1
            elif label == Reaction.NONE:
                self.react_cause[i] = -1
            entry: dict[str, Any] = {
                "npc": self.names[i],
                "alive": alive,
                "action": ACTION_NAMES[int(s.activity[0, i])] if alive else "none",
                "target": self.name(target) if alive else None,
                "busy": bool(s.busy[0, i]),
                "reaction": REACTION_NAMES[label],
                "intensity": round(self._intensity(label, i, target, ev), 4),
                "cause": int(self.react_cause[i]) if self.react_cause[i] >= 0 else None,
                "since": shown_since if label != Reaction.NONE else None,
                "duration": shown_for if label != Reaction.NONE else 0,
                "dest": [round(float(s.dest[0, i, 0]), 3), round(float(s.dest[0, i, 1]), 3)],
            }
            if first and label != Reaction.NONE:
                line = bark(REACTION_NAMES[label], self.names[i], self.name(target), session=self.id, tick=tick)
                if line:
                    entry["bark"] = line
            reactions.append(entry)
        return {"tick": tick, "reactions": reactions, "events": events_out}

    def _number_for(self, ev: Any, applied: list[dict[str, Any]], used: set[tuple[int, int]]) -> int:
        """The session event number of an engine event: an injected one's, else a new number."""
        if ev.id in self.engine_ids:
            return self.engine_ids[ev.id]
        number = None
        kind = {EventType.DEATH: ("death",), EventType.ATTACK: ("attack", "death"),
                EventType.GIFT: ("gift",)}.get(ev.type, ())
        for p in applied:
            key = (p["event"], int(ev.type))
            if p["type"] in kind and p["target"] == ev.target and p["actor"] == ev.actor and key not in used:
                used.add(key)
                number = p["event"]
                break
        if number is None:
            self.event_seq += 1
            number = self.event_seq
        self.engine_ids[int(ev.id)] = number
        while len(self.engine_ids) > ID_MAP_LIMIT:
            self.engine_ids.popitem(last=False)
        return number

    def _intensity(self, label: int, i: int, target: int, ev: Any) -> float:
        """The engine's intensity of a reaction (the emotion behind it), current value."""
        s = self.sim.state
        t = max(target, 0)
        if label == Reaction.MOURNING:
            return float(s.grief[0, i])
        if label == Reaction.REVENGE:
            return float(s.anger[0, i, t])
        if label == Reaction.FEAR:
            return float(s.fear[0, i, t])
        if label == Reaction.GLOATING:
            return float(s.joy[0, i])
        if label == Reaction.NONE:
            return 0.0
        return float(s.fear[0, i].max())

    # -------------------------------------------------------------------------------- inspection
    def state_view(self, npc: Any = None) -> dict[str, Any]:
        s, N = self.sim.state, self.N
        which = [self.entity(npc, "npc", npc_only=True)] if npc is not None else range(N)

        def named(row: np.ndarray, threshold: float = 0.01) -> dict[str, float]:
            return {self.names[e]: round(float(v), 4) for e, v in enumerate(row) if v > threshold}

        npcs = []
        for i in which:
            known = []
            for e in np.flatnonzero(s.knows_death[0, i]):
                src = int(s.learned_from[0, i, e])
                known.append({"subject": self.names[e], "culprit": self.name(int(s.known_culprit[0, i, e])),
                              "learned_tick": int(s.learned_tick[0, i, e]),
                              "from": self.name(src) if src >= 0 else None,
                              "how": "saw" if src == -1 else "told"})
            npcs.append({
                "npc": self.names[i], "alive": bool(s.alive[0, i]), "health": round(float(s.health[0, i]), 4),
                "pos": [round(float(v), 3) for v in s.pos[0, i]],
                "hunger": round(float(s.hunger[0, i]), 4), "energy": round(float(s.energy[0, i]), 4),
                "social": round(float(s.social[0, i]), 4), "grief": round(float(s.grief[0, i]), 4),
                "joy": round(float(s.joy[0, i]), 4), "anger": named(s.anger[0, i]), "fear": named(s.fear[0, i]),
                "knows_death": known,
                "knows_threat": [self.names[e] for e in np.flatnonzero(s.knows_threat[0, i])],
                "activity": ACTION_NAMES[int(s.activity[0, i])], "target": self.name(int(s.target[0, i])),
                "busy": bool(s.busy[0, i]), "reaction": REACTION_NAMES[int(self.sim.reaction[0, i])],
                "traits": dict(zip(TRAIT_NAMES, (round(float(v), 4) for v in self.sim.w.traits[0, i]),
                                   strict=True)),
            })
        return {"tick": int(s.tick[0]), "npcs": npcs}

    # -------------------------------------------------------------------------------- persistence
    def snapshot(self) -> dict[str, np.ndarray]:
        sim = self.sim
        arrays = {f"state.{f.name}": getattr(sim.state, f.name) for f in fields(VillageState)}
        arrays["sim.reaction"] = sim.reaction
        arrays["sim.prev_reaction"] = sim.prev_reaction
        arrays["session.react_cause"] = self.react_cause
        arrays.update({f"session.runs.{k}": v for k, v in self.runs.arrays().items()})
        meta = {
            "format": SNAPSHOT_FORMAT, "id": self.id, "create": self.create, "deterministic": self.deterministic,
            "rng": sim.rng.bit_generator.state, "event_seq": self.event_seq, "pending": self.pending,
            "engine_ids": [[k, v] for k, v in self.engine_ids.items()], "last_used": self.last_used,
            "steps": self.steps,
            "replies": [[k, base64.b64encode(v).decode("ascii")] for k, v in self.replies.items()],
        }
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
        return arrays

    def restore(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        sim = self.sim
        missing = set()
        for f in fields(VillageState):
            if f"state.{f.name}" not in arrays and f.name in LATER_STATE_FIELDS:
                missing.add(f.name)
                continue
            saved = arrays[f"state.{f.name}"]
            current = getattr(sim.state, f.name)
            if saved.shape != current.shape or saved.dtype != current.dtype:
                raise ValueError(f"state.{f.name}: saved {saved.shape} {saved.dtype}, expected "
                                 f"{current.shape} {current.dtype}")
            setattr(sim.state, f.name, saved.copy())
        if "loss_grief" in missing and sim.t.grief_per_loss:
            sim.state.loss_grief = losses_from_grief(sim)
        sim.reaction = arrays["sim.reaction"].copy()
        sim.prev_reaction = arrays["sim.prev_reaction"].copy()
        self.react_cause = arrays["session.react_cause"].copy()
        self.runs.load({k: arrays[f"session.runs.{k}"] for k in self.runs.arrays() if f"session.runs.{k}" in arrays})
        sim.rng.bit_generator.state = meta["rng"]
        self.event_seq = int(meta["event_seq"])
        self.pending = list(meta["pending"])
        self.engine_ids = OrderedDict((int(k), int(v)) for k, v in meta["engine_ids"])
        self.last_used = float(meta["last_used"])
        self.steps = int(meta.get("steps", 0))
        self.replies = OrderedDict((k, base64.b64decode(v)) for k, v in meta["replies"])
        sim.obs, sim.mask = sim.observer.observe()


class SessionStore:
    """All open sessions: create, find, close, expire, and save to / restore from a state directory."""

    def __init__(self, limits: Limits, slots: int, ttl_s: float, state_dir: Path | None = None):
        self.limits = limits
        self.slots = slots
        self.ttl_s = ttl_s
        self.tuning: Tuning | None = None  # the serving policy's engine tuning, for the sessions created from now
        self.dir = Path(state_dir) / "sessions" if state_dir is not None else None
        self.sessions: dict[str, Session] = {}
        if self.dir is not None:
            self.dir.mkdir(parents=True, exist_ok=True)

    def __len__(self) -> int:
        return len(self.sessions)

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self.sessions.values()))

    def _build(self, sid: str, create: dict[str, Any]) -> Session:
        spec = build_world(create, self.limits)
        entities = len(spec.npcs) + len(spec.actors)
        if entities < self.slots + 1:
            raise ProtocolError("invalid_world", f"npcs: the observation shows {self.slots} others, so a session "
                                f"needs at least {self.slots + 1} NPCs and actors together, got {entities}")
        seed = create.get("seed", 0)
        if not isinstance(seed, int) or seed < 0:
            raise ProtocolError("bad_request", f"seed: expected an integer >= 0, got {describe(seed)}")
        temperature, strength = create.get("temperature"), create.get("personality_strength")
        try:
            if temperature is not None:
                temperature = check_temperature(temperature)
            if strength is not None:
                strength = check_personality(strength)
        except ValueError as exc:
            raise ProtocolError("bad_request", str(exc)) from None
        sim = ExternalSim(spec, seed, self.slots, self.tuning)
        return Session(sid, create, spec, sim, deterministic=bool(create.get("deterministic", False)),
                       limits=self.limits, temperature=temperature, personality_strength=strength)

    def create(self, req: dict[str, Any]) -> Session:
        if len(self.sessions) >= self.limits.max_sessions:
            raise ProtocolError("limit_exceeded", f"{len(self.sessions)} sessions are open (limits.max_sessions); "
                                "close one or wait for idle ones to expire")
        sid = secrets.token_hex(8)
        session = self._build(sid, req)
        try:  # what a restart rebuilds the session from; validated above, so plain values
            session.create = _to_jsonable(req)
        except (TypeError, ValueError) as exc:
            raise ProtocolError("bad_request", f"session.create: fields that cannot be saved: {exc}") from None
        self.sessions[sid] = session
        return session

    def get(self, sid: str) -> Session:
        session = self.sessions.get(sid)
        if session is None:
            raise ProtocolError("not_found", f"session: no session {describe(sid)} (closed, expired or never created)")
        session.last_used = time.time()
        return session

    def close(self, sid: str) -> None:
        self.get(sid)
        del self.sessions[sid]
        self._delete(sid)

    def expire(self, now: float | None = None) -> list[str]:
        now = time.time() if now is None else now
        gone = [sid for sid, s in self.sessions.items() if now - s.last_used > self.ttl_s]
        for sid in gone:
            del self.sessions[sid]
            self._delete(sid)
        return gone

    # -------------------------------------------------------------------------------- persistence
    def _path(self, sid: str) -> Path:
        assert self.dir is not None
        return self.dir / f"{sid}.npz"

    def _delete(self, sid: str) -> None:
        if self.dir is not None:
            with contextlib.suppress(FileNotFoundError):
                self._path(sid).unlink()

    def save(self, session: Session) -> None:
        """Write the session's snapshot atomically and durably; no-op without a state dir.

        The bytes are fsynced before the rename and the directory after it (worlds.atomic): without that, a
        power loss can leave an empty or truncated file under the final name, which a restore cannot read.
        """
        if self.dir is None:
            return
        buffer = io.BytesIO()
        np.savez(buffer, **session.snapshot())
        write_atomically(self._path(session.id), buffer.getbuffer())

    def _quarantine(self, path: Path) -> Path:
        """Move an unreadable snapshot aside (never delete it: it may still be worth a look)."""
        assert self.dir is not None
        folder = self.dir / QUARANTINE
        folder.mkdir(exist_ok=True)
        target = folder / path.name
        n = 1
        while target.exists():
            target = folder / f"{path.stem}.{n}{path.suffix}"
            n += 1
        os.replace(path, target)
        return target

    def restore_all(self) -> tuple[int, list[str]]:
        """Load every saved session; returns (restored count, problems). Expired ones are deleted.

        A snapshot that cannot be read (empty, truncated, bit-flipped, not a snapshot) is moved to
        `sessions/quarantine/` and reported, so it neither stops the start-up nor is reported again at the
        next one. A readable snapshot this server cannot rebuild (a different --slots, say) stays where it is
        and is reported: a restart with the settings it was made under restores it.
        """
        if self.dir is None:
            return 0, []
        problems: list[str] = []
        restored = 0
        now = time.time()
        for path in sorted(self.dir.glob("*.npz")):
            sid = path.stem
            try:
                arrays, meta = _read_snapshot(path, sid)
            except Exception as exc:  # noqa: BLE001 - any failure to parse the bytes means a corrupt file
                reason = _one_line(exc)
                try:
                    moved = self._quarantine(path)
                except OSError as move_exc:
                    problems.append(f"{path.name}: unreadable snapshot ({reason}); could not move it aside: "
                                    f"{move_exc}")
                else:
                    problems.append(f"{path.name}: unreadable snapshot ({reason}); moved to "
                                    f"{moved.relative_to(self.dir.parent)}")
                continue
            try:
                if now - float(meta["last_used"]) > self.ttl_s:
                    path.unlink()
                    continue
                session = self._build(sid, meta["create"])
                session.restore(arrays, meta)
                self.sessions[sid] = session
                restored += 1
            except (OSError, ValueError, KeyError, TypeError, ProtocolError, WorldError) as exc:
                problems.append(f"{path.name}: not restored, left in place: {_one_line(exc)}")
        return restored, problems


def _read_snapshot(path: Path, sid: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and metadata of one snapshot file; raises on anything that is not a whole snapshot."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}  # reading every member checks each one's CRC
    if "meta" not in arrays:
        raise ValueError("no metadata entry")
    meta = json.loads(arrays.pop("meta").tobytes().decode("utf-8"))
    if not isinstance(meta, dict):
        raise ValueError("metadata is not a JSON object")
    if meta.get("format") != SNAPSHOT_FORMAT or meta.get("id") != sid:
        raise ValueError(f"unexpected snapshot format {meta.get('format')!r} or id {meta.get('id')!r}")
    for key in ("last_used", "create", "rng", "event_seq", "pending", "engine_ids", "replies"):
        if key not in meta:
            raise ValueError(f"metadata lacks {key!r}")
    return arrays, meta


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "no detail"
    return f"{type(exc).__name__}: {text[:200]}"


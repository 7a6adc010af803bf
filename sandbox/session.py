"""Recorded sessions and command scripts: the seed, the world, the policy and tick-stamped commands.

A run of the sandbox is fully determined by (world, seed, policy, scenario, slots) plus the player's
commands, each stamped with the tick at which the engine applies it; the policy is reseeded from the
seed. So a session file replays to the same state, and `digest` (a hash of the final engine state)
says whether it did. A command script (`--script`) is the same format with only `[[commands]]`.

    format = 1
    seed = 7
    policy = "scripted"
    scenario = "world"
    slots = 4
    ticks = 120
    digest = "9f2c..."
    world_ref = "village-v1"
    [world]  ... the full world (worlds.world_to_dict), so edited worlds replay too
    [[commands]]
    tick = 30
    op = "kill"
    actor = "player"
    target = "Alda"
    [[commands]]
    tick = 40
    op = "temperature"   # a sandbox op, not an engine command: the trained policy samples at `value` from here
    value = 0.5
    [[commands]]
    tick = 50
    op = "personality_strength"   # a sandbox op: the NPCs play their personalities `value` times as strongly
    value = 2.0

TOML (`.toml`) or JSON (`.json`), chosen by the file's extension.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.sim import COMMAND_OPS
from npc_brains.config import toml_module
from worlds import WorldError, WorldSpec, world_from_dict, world_to_dict

FORMAT = 1
_TOP_KEYS = ("format", "seed", "policy", "temperature", "personality_strength", "personality_traits", "scenario",
             "slots", "ticks", "digest", "world_ref", "world", "commands")
_COMMAND_KEYS = ("tick", "op", "actor", "target", "x", "y", "value")
TEMPERATURE_OP = "temperature"  # the `[` / `]` keys: the policy's sampling temperature from that tick on
PERSONALITY_OP = "personality_strength"  # the `{` / `}` keys: the policy's personality strength from that tick on
# The sandbox's own ops, with a `value`: they change how the policy acts and never reach the engine.
SANDBOX_OPS = (TEMPERATURE_OP, PERSONALITY_OP)
# Ops a session may hold: the engine's commands (sent through VillageSim.command) and the sandbox's own.
SESSION_OPS = (*COMMAND_OPS, *SANDBOX_OPS)
_ENGINE_KEYS = ("actor", "target", "x", "y")  # what only an engine command has


class SessionError(ValueError):
    """A session or script file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class CommandRecord:
    """One player/raider command, applied by the engine at the start of tick `tick`; or, with op "temperature" or
    "personality_strength", the policy's new sampling temperature or personality strength `value` from tick `tick`
    on (the sandbox applies it, not the engine)."""

    tick: int
    op: str
    actor: str = "player"
    target: str | None = None
    x: float = 0.0
    y: float = 0.0
    value: float | None = None  # the SANDBOX_OPS only

    def as_dict(self) -> dict[str, Any]:
        if self.op in SANDBOX_OPS:
            return {"tick": self.tick, "op": self.op, "value": self.value}
        data: dict[str, Any] = {"tick": self.tick, "op": self.op, "actor": self.actor}
        if self.target is not None:
            data["target"] = self.target
        if self.op == "move":
            data["x"] = float(self.x)  # exact: a replay must send the same numbers
            data["y"] = float(self.y)
        return data


@dataclass
class Session:
    """A recorded run (or, with only `commands`, a script)."""

    commands: list[CommandRecord] = field(default_factory=list)
    seed: int | None = None
    policy: str | None = None
    temperature: float | None = None  # the trained policy's sampling temperature (None: 1, as trained)
    personality_strength: float | None = None  # how strongly the NPCs play their personalities (None: 1)
    personality_traits: list[str] | None = None  # the traits the strength acts on (None: all five)
    scenario: str | None = None
    slots: int | None = None
    ticks: int | None = None
    digest: str | None = None
    world_ref: str | None = None
    world: WorldSpec | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"format": FORMAT}
        for key in ("seed", "policy", "temperature", "personality_strength", "personality_traits", "scenario",
                    "slots", "ticks", "digest", "world_ref"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        if self.world is not None:
            data["world"] = world_to_dict(self.world)
        data["commands"] = [c.as_dict() for c in self.commands]
        return data


def state_digest(state: object) -> str:
    """sha256 over every array of an engine state (VillageState): equal digests, equal states."""
    h = hashlib.sha256()
    for f in dataclasses.fields(state):  # type: ignore[arg-type]
        value = np.ascontiguousarray(getattr(state, f.name))
        h.update(f.name.encode())
        h.update(str(value.dtype).encode())
        h.update(str(value.shape).encode())
        h.update(value.tobytes())
    return h.hexdigest()


def save_session(session: Session, path: str | Path) -> None:
    path = Path(path)
    data = session.as_dict()
    try:
        if path.suffix.lower() == ".json":
            text = json.dumps(data, indent=1) + "\n"
        else:
            import tomli_w

            text = "# Village sandbox session (docs/sandbox.md). Replay: village play --replay FILE\n\n"
            text += tomli_w.dumps(data)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SessionError(f"{path}: cannot write the session: {exc.strerror or exc}") from None


def load_session(path: str | Path) -> Session:
    """Read a session or a command script; every problem raises `SessionError` naming the field."""
    path = Path(path)
    src = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SessionError(f"{src}: cannot read: {exc.strerror or exc}") from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(raw.decode("utf-8"))
        else:
            data = toml_module().loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SessionError(f"{src}: not valid {'JSON' if path.suffix.lower() == '.json' else 'TOML'}: {exc}") \
            from None
    return session_from_dict(data, src)


def session_from_dict(data: Any, src: str = "<session>") -> Session:
    if not isinstance(data, dict):
        raise SessionError(f"{src}: expected a table at the top level")
    unknown = sorted(set(data) - set(_TOP_KEYS))
    if unknown:
        raise SessionError(f"{src}: {unknown[0]}: unknown key; expected one of {', '.join(_TOP_KEYS)}")
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        raise SessionError(f"{src}: format: expected {FORMAT}, got {fmt!r}")
    session = Session(
        seed=_opt_int(data, "seed", src, lo=0),
        policy=_opt_str(data, "policy", src),
        temperature=_opt_temperature(data, src),
        personality_strength=_opt_strength(data, src),
        personality_traits=_opt_traits(data, src),
        scenario=_opt_str(data, "scenario", src),
        slots=_opt_int(data, "slots", src, lo=1),
        ticks=_opt_int(data, "ticks", src, lo=0),
        digest=_opt_str(data, "digest", src),
        world_ref=_opt_str(data, "world_ref", src),
    )
    if "world" in data:
        try:
            session.world = world_from_dict(data["world"], source=f"{src}: world")
        except WorldError as exc:
            raise SessionError(str(exc)) from None
    commands = data.get("commands", [])
    if not isinstance(commands, list):
        raise SessionError(f"{src}: commands: expected an array of tables, got {type(commands).__name__}")
    for k, item in enumerate(commands):
        session.commands.append(_command(item, f"{src}: commands[{k}]"))
    ticks = [c.tick for c in session.commands]
    if ticks != sorted(ticks):
        raise SessionError(f"{src}: commands: expected ticks in increasing order")
    return session


def _command(item: Any, where: str) -> CommandRecord:
    if not isinstance(item, dict):
        raise SessionError(f"{where}: expected a table, got {type(item).__name__}")
    unknown = sorted(set(item) - set(_COMMAND_KEYS))
    if unknown:
        raise SessionError(f"{where}.{unknown[0]}: unknown key; expected one of {', '.join(_COMMAND_KEYS)}")
    tick = _opt_int(item, "tick", where, lo=0, sep=".")
    if tick is None:
        raise SessionError(f"{where}.tick: missing; expected an integer >= 0")
    op = item.get("op")
    if op not in SESSION_OPS:
        raise SessionError(f"{where}.op: expected one of {', '.join(SESSION_OPS)}, got {op!r}")
    if op in SANDBOX_OPS:
        return CommandRecord(tick, op, value=_record_value(item, op, where))
    if "value" in item:  # refused rather than ignored: a value on an engine command is a mistake worth naming
        raise SessionError(f"{where}.value: only op {TEMPERATURE_OP!r} or {PERSONALITY_OP!r} takes a value, not "
                           f"{op!r}")
    actor = _opt_str(item, "actor", where, sep=".") or "player"
    target = _opt_str(item, "target", where, sep=".")
    if op in ("kill", "attack", "gift", "talk") and target is None:
        raise SessionError(f"{where}.target: op {op!r} needs a target name")
    xy = []
    for key in ("x", "y"):
        value = item.get(key, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
            raise SessionError(f"{where}.{key}: expected a finite number, got {value!r}")
        xy.append(float(value))
    return CommandRecord(tick, op, actor, target, xy[0], xy[1])


def _record_value(item: dict, op: str, where: str) -> float:
    """A temperature or personality strength record's `value`; its own keys only, since actor, target, x and y
    would be silently unused."""
    from npc_brains.personality import PERSONALITY_RANGE, check_personality
    from npc_brains.runtime import TEMPERATURE_RANGE, check_temperature

    check, (low, high) = ((check_temperature, TEMPERATURE_RANGE) if op == TEMPERATURE_OP
                          else (check_personality, PERSONALITY_RANGE))
    extra = [key for key in _ENGINE_KEYS if key in item]
    if extra:
        raise SessionError(f"{where}.{extra[0]}: op {op!r} takes only tick and value")
    if "value" not in item:
        raise SessionError(f"{where}.value: missing; op {op!r} needs a number from {low:g} to {high:g}")
    value = item["value"]
    try:
        if isinstance(value, bool):  # float(True) is 1: a bool is a typo, not a temperature or a strength
            raise ValueError(f"value: expected a number, got {value!r}")
        return check(value, "value")
    except ValueError as exc:
        raise SessionError(f"{where}.{exc}") from None


def _opt_int(data: dict, key: str, where: str, *, lo: int, sep: str = ": ") -> int | None:
    if key not in data:
        return None
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise SessionError(f"{where}{sep}{key}: expected an integer >= {lo}, got {value!r}")
    return int(value)


def _opt_temperature(data: dict, where: str) -> float | None:
    if "temperature" not in data:
        return None
    from npc_brains.runtime import check_temperature

    value = data["temperature"]
    try:
        if isinstance(value, bool):
            raise ValueError(f"temperature: expected a number, got {value!r}")
        return check_temperature(value)
    except ValueError as exc:
        raise SessionError(f"{where}: {exc}") from None


def _opt_strength(data: dict, where: str) -> float | None:
    if "personality_strength" not in data:
        return None
    from npc_brains.personality import check_personality

    try:
        return check_personality(data["personality_strength"])
    except ValueError as exc:
        raise SessionError(f"{where}: {exc}") from None


def _opt_traits(data: dict, where: str) -> list[str] | None:
    if "personality_traits" not in data:
        return None
    from npc_brains.personality import check_traits

    value = data["personality_traits"]
    try:
        if not isinstance(value, list):
            raise ValueError(f"personality_traits: expected an array of trait names, got {value!r}")
        return list(check_traits(value))
    except ValueError as exc:
        raise SessionError(f"{where}: {exc}") from None


def _opt_str(data: dict, key: str, where: str, *, sep: str = ": ") -> str | None:
    if key not in data:
        return None
    value = data[key]
    if not isinstance(value, str) or not value:
        raise SessionError(f"{where}{sep}{key}: expected a non-empty string, got {value!r}")
    return value

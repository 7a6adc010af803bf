"""Load, validate and save world files (TOML).

`world_from_dict` is the one validator: every path into a `WorldSpec` (a file, a bundled id, a
dict from the sandbox's editor, the generator's output) goes through it. Anything wrong raises
`WorldError` naming the source, the field path (``npcs[3].traits.bravery``) and what was expected,
never another exception type. The format is documented in docs/world-format.md.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import tomli_w

from worlds.atomic import write_atomically
from worlds.spec import (
    ACTOR_KINDS,
    EVENT_TYPES,
    LOCATION_KINDS,
    MAX_ACTORS,
    MAX_EVENTS,
    MAX_LOCATIONS,
    MAX_NPCS,
    MAX_RELATIONSHIPS,
    MAX_WORLD_FILE_BYTES,
    MIN_NPCS,
    MIN_PEOPLE,
    RELATION_KINDS,
    ROLES,
    TRAIT_NAMES,
    ActorSpec,
    Location,
    NPCSpec,
    Relationship,
    ScenarioEvent,
    Traits,
    WorldError,
    WorldSettings,
    WorldSpec,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

DATA_DIR = Path(__file__).resolve().parent / "data"
MAX_MAP_SIDE = 10000.0
MAX_HEALTH = 10.0
# Events whose meaning needs someone on the receiving end.
TARGETED_EVENTS: tuple[str, ...] = ("kill", "attack", "gift", "talk")
_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")

_TOP_KEYS = ("world", "settings", "locations", "npcs", "relationships", "actors", "events")
_WORLD_KEYS = ("id", "name", "width", "height", "description")
_SETTINGS_KEYS = ("sight_radius", "raid_probability", "granary_start", "gossip_probability")
_LOCATION_KEYS = ("name", "kind", "x", "y", "radius")
_NPC_KEYS = ("name", "role", "home", "traits", "health")
_RELATIONSHIP_KEYS = ("a", "b", "kind", "affinity")
_ACTOR_KEYS = ("name", "kind", "x", "y", "health")
_EVENT_KEYS = ("tick", "type", "actor", "target", "x", "y")

_MISSING = object()
_MAX_ENTRIES = {"locations": MAX_LOCATIONS, "npcs": MAX_NPCS, "actors": MAX_ACTORS,
                "relationships": MAX_RELATIONSHIPS, "events": MAX_EVENTS}


# --------------------------------------------------------------------------------------------------
# Public API


def bundled_worlds() -> list[str]:
    """Ids of the worlds shipped in worlds/data (usable as `load_world("village-v1")`)."""
    if not DATA_DIR.is_dir():
        return []
    return sorted(p.stem for p in DATA_DIR.glob("*.toml") if p.is_file())


def load_world(path_or_id: str | os.PathLike[str]) -> WorldSpec:
    """Load and validate a world file, or a bundled world by id ("village-v1")."""
    path = _resolve(path_or_id)
    source = str(path)
    try:
        size = path.stat().st_size
    except (OSError, ValueError):  # a file that cannot be read is reported just below
        size = 0
    if size > MAX_WORLD_FILE_BYTES:
        raise WorldError(f"expected a world file of at most {MAX_WORLD_FILE_BYTES // (1024 * 1024)} MiB, got "
                         f"{size / (1024 * 1024):.1f} MiB (at most {MAX_NPCS:,} NPCs; docs/world-format.md)",
                         source=source)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise WorldError(f"no such world file (bundled worlds: {_bundled_list()})", source=source) from None
    except (OSError, ValueError) as exc:  # ValueError: e.g. a NUL byte in the path
        raise WorldError(f"cannot read the world file: {getattr(exc, 'strerror', None) or exc}",
                         source=source) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorldError(f"expected UTF-8 text, got undecodable bytes at offset {exc.start}",
                         source=source) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WorldError(f"TOML syntax error: {exc}", source=source) from None
    except (ValueError, RecursionError) as exc:  # defensive: tomllib's own limits
        raise WorldError(f"cannot parse the TOML: {exc}", source=source) from None
    return world_from_dict(data, source=source)


def save_world(spec: WorldSpec, path: str | os.PathLike[str]) -> None:
    """Validate `spec` and write it as TOML, atomically (worlds.atomic)."""
    target = Path(path)
    try:
        data = world_to_dict(spec)
    except (TypeError, ValueError, AttributeError) as exc:
        raise WorldError(f"expected a WorldSpec of plain values, got one that cannot be written: {exc}",
                         source=str(target)) from None
    # Never write a file that would not load back.
    world_from_dict(data, source=str(target))
    text = world_to_toml(data)
    try:
        write_atomically(target, text.encode("utf-8"))
    except OSError as exc:
        raise WorldError(f"cannot write the world file: {exc.strerror or exc}", source=str(target)) from None


def world_to_dict(spec: WorldSpec) -> dict[str, Any]:
    """The TOML-shaped dict of a spec (the inverse of `world_from_dict`); floats are stored as given."""
    world: dict[str, Any] = {"id": spec.id, "name": spec.name, "width": float(spec.width),
                             "height": float(spec.height)}
    if spec.description:
        world["description"] = spec.description
    s = spec.settings
    data: dict[str, Any] = {
        "world": world,
        "settings": {
            "sight_radius": float(s.sight_radius),
            "raid_probability": float(s.raid_probability),
            "granary_start": float(s.granary_start),
            "gossip_probability": float(s.gossip_probability),
        },
        "locations": [
            {"name": loc.name, "kind": loc.kind, "x": float(loc.x), "y": float(loc.y),
             "radius": float(loc.radius)}
            for loc in spec.locations
        ],
        "npcs": [
            {"name": npc.name, "role": npc.role, "home": npc.home,
             "traits": {name: float(value) for name, value in zip(TRAIT_NAMES, npc.traits.as_tuple(),
                                                                  strict=True)},
             "health": float(npc.health)}
            for npc in spec.npcs
        ],
        "relationships": [
            {"a": rel.a, "b": rel.b, "kind": rel.kind, "affinity": float(rel.affinity)}
            for rel in spec.relationships
        ],
        "actors": [
            {"name": actor.name, "kind": actor.kind, "x": float(actor.x), "y": float(actor.y),
             "health": float(actor.health)}
            for actor in spec.actors
        ],
        "events": [_event_to_dict(event) for event in spec.events],
    }
    return data


def world_to_toml(data: Mapping[str, Any]) -> str:
    """TOML text in the hand-written layout: [world], [settings], then one [[table]] per entry.

    (tomli_w alone would squeeze short arrays of tables onto inline lines, which is hard to edit.)
    """
    chunks = [_HEADER.rstrip("\n")]
    for key in ("world", "settings"):
        if key in data:
            chunks.append(f"[{key}]\n{_lines(data[key])}")
    for key in ("locations", "npcs", "relationships", "actors", "events"):
        for entry in data.get(key, []):
            chunks.append(f"[[{key}]]\n{_lines(entry)}")
    return "\n\n".join(chunks) + "\n"


def world_from_dict(data: Any, source: str = "<dict>") -> WorldSpec:
    """Validate a TOML-shaped dict into a `WorldSpec`; any problem raises `WorldError`."""
    return _Validator(source).world(data)


# --------------------------------------------------------------------------------------------------
# Helpers

_HEADER = "# Village world file (format: docs/world-format.md). Written by worlds.save_world.\n"


def _resolve(path_or_id: str | os.PathLike[str]) -> Path:
    try:
        path = Path(path_or_id)
    except TypeError:
        raise WorldError(f"expected a file path or a bundled world id, got {_describe(path_or_id)}") from None
    if path.is_file():
        return path
    if isinstance(path_or_id, str) and path_or_id in bundled_worlds():
        return DATA_DIR / f"{path_or_id}.toml"
    return path


def _bundled_list() -> str:
    return ", ".join(bundled_worlds()) or "none"


def _literal(value: Any) -> str:
    """One TOML value, escaped by tomli_w; a table becomes an inline table."""
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_literal(v)}" for k, v in value.items()) + " }"
    return tomli_w.dumps({"v": value}).rstrip("\n")[len("v = "):]


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _literal(key)


def _lines(table: Mapping[str, Any]) -> str:
    return "\n".join(f"{_key(k)} = {_literal(v)}" for k, v in table.items())


def _event_to_dict(event: ScenarioEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"tick": int(event.tick), "type": event.type, "actor": event.actor}
    if event.target is not None:
        out["target"] = event.target
    if event.x is not None:
        out["x"] = float(event.x)
    if event.y is not None:
        out["y"] = float(event.y)
    return out


def _describe(value: Any) -> str:
    """How a found value reads in an error message: `1.7`, `'abc'`, `true (a boolean)`, `a table`."""
    if value is _MISSING:
        return "nothing (the field is missing)"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{'true' if value else 'false'} (a boolean)"
    if isinstance(value, int):
        text = str(value) if abs(value) < 10**30 else f"an integer with {len(str(abs(value)))} digits"
        return text
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, (list, tuple)):
        return "an array"
    return f"a {type(value).__name__}"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


class _Validator:
    """Walks the TOML-shaped data, checking each field and building the spec."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str | None, message: str) -> WorldError:
        return WorldError(message, source=self.source, path=path or None)

    # ---- primitive checks -------------------------------------------------------------------------

    def table(self, value: Any, path: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected a table, got {_describe(value)}")
        for key in value:
            if not isinstance(key, str) or key not in allowed:
                where = f"{path}.{key}" if path else str(key)
                raise self.fail(where, f"unknown key {key!r}; allowed keys: {', '.join(allowed)}")
        return value

    def array(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, (list, tuple)):
            raise self.fail(path, f"expected an array of tables, got {_describe(value)}")
        return list(value)

    def get(self, table: Mapping[str, Any], key: str, path: str, expected: str, *, required: bool) -> Any:
        value = table.get(key, _MISSING)
        if value is _MISSING and required:
            raise self.fail(_join(path, key), f"missing required field; expected {expected}")
        return value

    def string(self, table: Mapping[str, Any], key: str, path: str, *, required: bool = True,
               default: str | None = None) -> str | None:
        value = self.get(table, key, path, "a non-empty string", required=required)
        if value is _MISSING:
            return default
        if not isinstance(value, str) or not value.strip():
            raise self.fail(_join(path, key), f"expected a non-empty string, got {_describe(value)}")
        self.encodable(value, _join(path, key))
        return value

    def encodable(self, value: str, path: str) -> None:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise self.fail(path, "expected text that UTF-8 can encode, got a string with a lone "
                            "surrogate") from None

    def name(self, table: Mapping[str, Any], key: str, path: str) -> str:
        return cast(str, self.string(table, key, path))  # required: never None

    def choice(self, table: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...]) -> str:
        expected = f"one of {', '.join(allowed)}"
        value = self.get(table, key, path, expected, required=True)
        if not isinstance(value, str) or value not in allowed:
            raise self.fail(_join(path, key), f"expected {expected}; got {_describe(value)}")
        return value

    def number(self, table: Mapping[str, Any], key: str, path: str, *, lo: float | None = None,
               hi: float | None = None, lo_open: bool = False, hi_open: bool = False,
               required: bool = True, default: float | None = None, what: str | None = None) -> float | None:
        expected = what or _range_text(lo, hi, lo_open, hi_open)
        value = self.get(table, key, path, expected, required=required)
        if value is _MISSING:
            return default
        where = _join(path, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(where, f"expected {expected}, got {_describe(value)}")
        if isinstance(value, int):
            # Compare as an exact integer first: float() of a huge int overflows.
            if (lo is not None and value < lo) or (hi is not None and value > hi) or abs(value) > 10**300:
                raise self.fail(where, f"expected {expected}, got {_describe(value)}")
            number = float(value)
        else:
            number = float(value)
        if not math.isfinite(number):
            raise self.fail(where, f"expected {expected}, got {_describe(value)}")
        too_low = lo is not None and (number <= lo if lo_open else number < lo)
        too_high = hi is not None and (number >= hi if hi_open else number > hi)
        if too_low or too_high:
            raise self.fail(where, f"expected {expected}, got {_describe(value)}")
        return number

    def real(self, table: Mapping[str, Any], key: str, path: str, **kwargs: Any) -> float:
        # Required, or optional with a float default: never None.
        return cast(float, self.number(table, key, path, **kwargs))

    def entries(self, data: Mapping[str, Any], key: str, allowed: tuple[str, ...],
                build: Callable[[Mapping[str, Any], str], Any]) -> list[Any]:
        raw = data.get(key, [])
        items = self.array(raw, key)
        limit = _MAX_ENTRIES[key]
        if len(items) > limit:  # before building any entry: the engine's memory grows with people squared
            raise self.fail(key, f"expected at most {limit} entries (the loader's limit, docs/world-format.md), "
                            f"got {len(items)}")
        out = []
        for i, item in enumerate(items):
            path = f"{key}[{i}]"
            out.append(build(self.table(item, path, allowed), path))
        return out

    # ---- the world --------------------------------------------------------------------------------

    def world(self, data: Any) -> WorldSpec:
        top = self.table(data, "", _TOP_KEYS)
        if "world" not in top:
            raise self.fail("world", "missing required table; expected a table with keys "
                            f"{', '.join(_WORLD_KEYS)}")
        head = self.table(top["world"], "world", _WORLD_KEYS)
        world_id = self.name(head, "id", "world")
        if not _ID_PATTERN.fullmatch(world_id):
            raise self.fail("world.id", "expected an id of letters, digits, '_', '.' or '-' "
                            f"(e.g. 'village-v1'), got {_describe(world_id)}")
        name = self.name(head, "name", "world")
        width = self.real(head, "width", "world", lo=0.0, hi=MAX_MAP_SIDE, lo_open=True)
        height = self.real(head, "height", "world", lo=0.0, hi=MAX_MAP_SIDE, lo_open=True)
        description = head.get("description", "")
        if not isinstance(description, str):
            raise self.fail("world.description", f"expected a string, got {_describe(description)}")
        self.encodable(description, "world.description")

        settings = self.settings(top.get("settings", {}))
        self.width, self.height = width, height

        if "locations" not in top:
            raise self.fail("locations", "missing required array; expected at least one [[locations]] table")
        locations = self.entries(top, "locations", _LOCATION_KEYS, self.location)
        if not locations:
            raise self.fail("locations", "expected at least one [[locations]] table, got an empty array")
        self.unique([loc.name for loc in locations], "locations", "location")
        self.location_kinds = {loc.name: loc.kind for loc in locations}

        if "npcs" not in top:
            raise self.fail("npcs", f"missing required array; expected at least {MIN_NPCS} [[npcs]] tables")
        npcs = self.entries(top, "npcs", _NPC_KEYS, self.npc)
        if not npcs:
            raise self.fail("npcs", "expected at least 1 NPC, got an empty array")
        actors = self.entries(top, "actors", _ACTOR_KEYS, self.actor)
        if len(npcs) + len(actors) < MIN_PEOPLE:
            raise self.fail("npcs", f"expected at least {MIN_PEOPLE} NPCs and actors together, since each NPC "
                            f"observes the 4 most salient others (docs/world-format.md); got {len(npcs)} NPCs "
                            f"and {len(actors)} actors")
        if len(npcs) < MIN_NPCS:
            raise self.fail("npcs", f"expected at least {MIN_NPCS} NPCs, since a training episode can plan "
                            f"{MIN_NPCS} killings (docs/world-format.md); got {len(npcs)}")
        self.unique_people(npcs, actors)
        players = [i for i, actor in enumerate(actors) if actor.kind == "player"]
        if len(players) > 1:
            raise self.fail(f"actors[{players[1]}].kind",
                            f"expected at most 1 player actor, got {len(players)}")

        self.npc_names = {npc.name for npc in npcs}
        self.people = self.npc_names | {actor.name for actor in actors}
        relationships = self.entries(top, "relationships", _RELATIONSHIP_KEYS, self.relationship)
        seen_pairs: dict[frozenset[str], int] = {}
        for i, rel in enumerate(relationships):
            pair = frozenset((rel.a, rel.b))
            if pair in seen_pairs:
                raise self.fail(f"relationships[{i}]",
                                f"expected one relationship per pair of NPCs, got a second one for "
                                f"{rel.a!r} and {rel.b!r} (first at relationships[{seen_pairs[pair]}])")
            seen_pairs[pair] = i
        events = self.entries(top, "events", _EVENT_KEYS, self.event)

        return WorldSpec(
            id=world_id, name=name, width=width, height=height, locations=tuple(locations),
            npcs=tuple(npcs), relationships=tuple(relationships), actors=tuple(actors),
            events=tuple(events), settings=settings, description=description,
        )

    def settings(self, raw: Any) -> WorldSettings:
        table = self.table(raw, "settings", _SETTINGS_KEYS)
        d = WorldSettings()
        return WorldSettings(
            sight_radius=self.real(table, "sight_radius", "settings", lo=0.0, lo_open=True,
                                   required=False, default=d.sight_radius, what="a number > 0"),
            raid_probability=self.real(table, "raid_probability", "settings", lo=0.0, hi=1.0,
                                       required=False, default=d.raid_probability),
            granary_start=self.real(table, "granary_start", "settings", lo=0.0, hi=1.0,
                                    required=False, default=d.granary_start),
            gossip_probability=self.real(table, "gossip_probability", "settings", lo=0.0, hi=1.0,
                                         required=False, default=d.gossip_probability),
        )

    def position(self, table: Mapping[str, Any], path: str) -> tuple[float, float]:
        x, y = self.optional_position(table, path, required=True)
        return cast(float, x), cast(float, y)

    def optional_position(self, table: Mapping[str, Any], path: str, *, required: bool = False
                          ) -> tuple[float | None, float | None]:
        what_x = f"an x inside the map, a number in [0, {_fmt(self.width)}]"
        what_y = f"a y inside the map, a number in [0, {_fmt(self.height)}]"
        x = self.number(table, "x", path, lo=0.0, hi=self.width, required=required, what=what_x)
        y = self.number(table, "y", path, lo=0.0, hi=self.height, required=required, what=what_y)
        return x, y

    def location(self, table: Mapping[str, Any], path: str) -> Location:
        name = self.name(table, "name", path)
        kind = self.choice(table, "kind", path, LOCATION_KINDS)
        x, y = self.position(table, path)
        radius = self.real(table, "radius", path, lo=0.0, hi=MAX_MAP_SIDE, lo_open=True, required=False,
                           default=_default(Location, "radius"))
        return Location(name=name, kind=kind, x=x, y=y, radius=radius)

    def npc(self, table: Mapping[str, Any], path: str) -> NPCSpec:
        name = self.name(table, "name", path)
        role = self.choice(table, "role", path, ROLES)
        home = self.name(table, "home", path)
        if home not in self.location_kinds:
            raise self.fail(f"{path}.home", f"expected the name of a location of kind 'home', got "
                            f"{_describe(home)}, which is not a location")
        if self.location_kinds[home] != "home":
            raise self.fail(f"{path}.home", f"expected the name of a location of kind 'home', got "
                            f"{_describe(home)}, a location of kind {self.location_kinds[home]!r}")
        traits_raw = table.get("traits", {})
        traits_table = self.table(traits_raw, f"{path}.traits", TRAIT_NAMES)
        defaults = Traits()
        traits = Traits(**{
            trait: self.real(traits_table, trait, f"{path}.traits", lo=0.0, hi=1.0, required=False,
                             default=getattr(defaults, trait))
            for trait in TRAIT_NAMES
        })
        health = self.real(table, "health", path, lo=0.0, hi=MAX_HEALTH, lo_open=True, required=False,
                           default=_default(NPCSpec, "health"))
        return NPCSpec(name=name, role=role, home=home, traits=traits, health=health)

    def actor(self, table: Mapping[str, Any], path: str) -> ActorSpec:
        name = self.name(table, "name", path)
        kind = self.choice(table, "kind", path, ACTOR_KINDS)
        x, y = self.position(table, path)
        health = self.real(table, "health", path, lo=0.0, hi=MAX_HEALTH, lo_open=True, required=False,
                           default=_default(ActorSpec, "health"))
        return ActorSpec(name=name, kind=kind, x=x, y=y, health=health)

    def relationship(self, table: Mapping[str, Any], path: str) -> Relationship:
        a = self.npc_ref(table, "a", path)
        b = self.npc_ref(table, "b", path)
        if a == b:
            raise self.fail(f"{path}.b", f"expected two different NPCs, got {a!r} twice")
        kind = self.choice(table, "kind", path, RELATION_KINDS)
        affinity = self.real(table, "affinity", path, lo=-1.0, hi=1.0)
        return Relationship(a=a, b=b, kind=kind, affinity=affinity)

    def npc_ref(self, table: Mapping[str, Any], key: str, path: str) -> str:
        value = self.name(table, key, path)
        if value not in self.npc_names:
            raise self.fail(_join(path, key), f"expected the name of an NPC, got {_describe(value)}, "
                            "which is not an NPC")
        return value

    def event(self, table: Mapping[str, Any], path: str) -> ScenarioEvent:
        tick = self.get(table, "tick", path, "an integer >= 0", required=True)
        if isinstance(tick, bool) or not isinstance(tick, int) or tick < 0:
            raise self.fail(f"{path}.tick", f"expected an integer >= 0, got {_describe(tick)}")
        event_type = self.choice(table, "type", path, EVENT_TYPES)
        actor = self.name(table, "actor", path)
        if actor not in self.people:
            raise self.fail(f"{path}.actor", f"expected the name of an actor or NPC, got {_describe(actor)}, "
                            "which is neither")
        target = self.string(table, "target", path, required=event_type in TARGETED_EVENTS)
        if target is not None:
            if target not in self.people:
                raise self.fail(f"{path}.target", f"expected the name of an NPC or actor, got "
                                f"{_describe(target)}, which is neither")
            if target == actor:
                raise self.fail(f"{path}.target", f"expected someone other than the actor, got {actor!r}")
        x, y = self.optional_position(table, path)
        if (x is None) != (y is None):
            missing = "y" if y is None else "x"
            raise self.fail(_join(path, missing), "expected both x and y, or neither; got only one")
        return ScenarioEvent(tick=tick, type=event_type, actor=actor, target=target, x=x, y=y)

    # ---- cross-field checks -----------------------------------------------------------------------

    def unique(self, names: list[str], key: str, what: str) -> None:
        first: dict[str, int] = {}
        for i, name in enumerate(names):
            if name in first:
                raise self.fail(f"{key}[{i}].name", f"expected a unique {what} name, got {name!r} "
                                f"again (first at {key}[{first[name]}])")
            first[name] = i

    def unique_people(self, npcs: list[NPCSpec], actors: list[ActorSpec]) -> None:
        first: dict[str, str] = {}
        labelled = [(f"npcs[{i}]", npc.name) for i, npc in enumerate(npcs)]
        labelled += [(f"actors[{i}]", actor.name) for i, actor in enumerate(actors)]
        for where, name in labelled:
            if name in first:
                raise self.fail(f"{where}.name", f"expected a name unique across NPCs and actors, got "
                                f"{name!r} again (first at {first[name]})")
            first[name] = where


def _default(cls: type, name: str) -> Any:
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _range_text(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    if lo is None and hi is None:
        return "a number"
    if hi is None:
        return f"a number {'>' if lo_open else '>='} {_fmt(lo)}"
    if lo is None:
        return f"a number {'<' if hi_open else '<='} {_fmt(hi)}"
    return f"a number in {'(' if lo_open else '['}{_fmt(lo)}, {_fmt(hi)}{')' if hi_open else ']'}"

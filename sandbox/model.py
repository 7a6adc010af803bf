"""The sandbox's controller, without pygame: one village, its policy, the command log and the world editor.

It owns no game logic. Each tick asks the policy for every NPC's action and calls `VillageSim.step`;
every player order goes through `VillageSim.command` (the engine's command queue), exactly as in
training and in the bridge. Edits make a new `WorldSpec` and rebuild the simulation from it. The
sandbox-level orders, a trained policy's sampling temperature and its personality strength, never reach the
engine: they are set on the policy at a tick boundary and logged beside the commands, so a replay acts the same way.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engine.constants import EntityKind, EventType
from engine.events import Event, Message
from engine.policy_api import Policy
from engine.sim import COMMAND_OPS, VillageSim
from npc_brains import PolicyError, policy_slots, policy_tuning
from npc_brains.personality import (
    PersonalityStrength,
    check_personality,
    check_traits,
    guidable,
    with_personality_strength,
)
from npc_brains.runtime import set_temperature
from sandbox import editor
from sandbox.feed import EDIT, INFO, Feed
from sandbox.policy import PolicySource, resolve_policy
from sandbox.session import PERSONALITY_OP, TEMPERATURE_OP, CommandRecord, Session, state_digest
from worlds import ROLES, WorldError, WorldSpec, load_world, save_world

SCENARIOS = ("world", "none")
ENDLESS = 10**9  # the sandbox never truncates an episode
RECENT = 6  # reactions kept per NPC for the inspector
STEER_AHEAD = 2.5  # map units ahead of the player a held direction key walks to (actor speed is 2/tick)
# The temperatures `[` and `]` step through: 1 samples as trained, lower follows each NPC's preferences more
# closely (0.1 is nearly always the most likely action), 2 is noticeably more random.
TEMPERATURE_LADDER = (0.1, 0.25, 0.5, 1.0, 2.0)
# The personality strengths `{` and `}` step through: 1 plays the trained policy, 0 everyone as a neutral villager of
# its role, 3 each NPC's own traits three times as strongly (npc_brains.personality).
PERSONALITY_LADDER = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)


def ladder_step(current: float | None, direction: int, ladder: tuple[float, ...] = TEMPERATURE_LADDER) -> float:
    """The next rung of `ladder` above (`direction` > 0) or below `current` (None: 1, as trained); `current` itself
    at the ladder's end. A start off the ladder (a `--temperature 0.3`) steps to the nearest rung."""
    now = 1.0 if current is None else current
    if direction > 0:
        return min((rung for rung in ladder if rung > now), default=now)
    return max((rung for rung in ladder if rung < now), default=now)


class SandboxModel:
    """One village (B = 1) driven by a policy; the state the renderer draws and the input handler edits."""

    def __init__(self, world: WorldSpec, *, policy: str | Policy | PolicySource = "default", seed: int = 0,
                 scenario: str = "world", slots: int = 4, world_ref: str | None = None,
                 temperature: float | None = None, personality_strength: float | None = None,
                 personality_traits: list[str] | None = None):
        if scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
        self.source = policy if isinstance(policy, PolicySource) else resolve_policy(policy)
        self.seed = int(seed)
        # the trained policy's sampling temperature now (None: 1, as trained), and the run's starting one, which
        # every (re)start goes back to: changes during a run are commands, and a restart clears the commands
        self.start_temperature = temperature
        self.temperature = temperature
        # how strongly a trained policy's NPCs play their personalities (npc_brains.personality; None: 1, as
        # trained) now, and the run's starting strength, which every (re)start goes back to, as for T
        self.start_personality_strength = personality_strength
        self.personality_strength = personality_strength
        self.personality_traits = personality_traits  # the traits it acts on; None: all five
        self.scenario = scenario
        self.slots = int(slots)
        self.world_ref = world_ref or world.id
        self.feed = Feed()
        self.spec = world
        self.spec_version = 0  # bumped on every edit (the renderer re-draws the map)
        self.commands: list[CommandRecord] = []  # everything sent since the last (re)start
        self.script: list[CommandRecord] = []  # commands still to send (a script or a replay)
        self.replaying = False
        self._steering = False
        self.rebuild(world)

    # ------------------------------------------------------------------ running
    def rebuild(self, spec: WorldSpec | None = None, *, seed: int | None = None) -> None:
        """(Re)start from tick 0 with `spec` (default: the current world) and a freshly seeded policy."""
        if spec is not None:
            self.spec = spec
            self.spec_version += 1
        if seed is not None:
            self.seed = int(seed)
        changed_temperature = self.temperature != self.start_temperature
        self.temperature = self.start_temperature
        changed_strength = self.personality_strength != self.start_personality_strength
        self.personality_strength = self.start_personality_strength
        self.policy = self.source.make(self.seed, self.slots)
        if self.temperature is not None or hasattr(self.policy, "temperature"):
            # set every run (None: back to 1), since a policy object may be shared between runs
            try:
                set_temperature(self.policy, 1.0 if self.temperature is None else self.temperature, "--temperature")
            except ValueError as exc:
                raise PolicyError(str(exc)) from None
        if self.personality_strength is not None:  # after T: the wrapper holds the temperature from now on
            try:
                self.policy = with_personality_strength(self.policy, self.personality_strength, seed=self.seed,
                                                        name="--personality-strength", traits=self.personality_traits)
            except ValueError as exc:
                raise PolicyError(str(exc)) from None
        self.slots = policy_slots(self.policy) or self.slots  # a trained policy fixes K
        self.sim = VillageSim(self.spec, 1, self.seed, slots=self.slots, max_ticks=ENDLESS,
                              scenario=self.scenario, record=True, tuning=policy_tuning(self.policy))
        expected = getattr(self.policy, "obs_dim", None)
        if isinstance(expected, int) and expected != self.sim.obs.shape[-1]:
            raise PolicyError(f"policy {self.source.name!r} needs {self.slots} observation slots, but this world "
                              f"has only {self.sim.E - 1} other entities")
        self.prev_pos = self.sim.state.pos[0].copy()
        self.commands = []
        self.feed.reset()
        if changed_temperature:
            self.feed.note(0, f"temperature back to {_shown(self.temperature)}, the run's start", INFO)
        if changed_strength:
            self.feed.note(0, f"personality strength back to {_shown(self.personality_strength)}, the run's start",
                           INFO)
        self.news: dict[tuple[int, int], Message] = {}  # (receiver, subject) -> how it first learned
        self.recent: dict[int, deque[Event]] = {}  # NPC -> its latest reaction events
        if self.script or self.replaying:
            self.feed.note(0, "the script or replay stopped: the village was restarted", INFO)
        self.script = []
        self.replaying = False
        self._steering = False

    @property
    def tick(self) -> int:
        return int(self.sim.state.tick[0])

    @property
    def names(self) -> list[str]:
        return self.sim.entity_names[0]

    @property
    def player(self) -> int:
        """Entity index of the player actor, -1 if the world has none."""
        players = np.flatnonzero(self.sim.w.entity_kind == EntityKind.PLAYER)
        return int(players[0]) if len(players) else -1

    def step(self, n: int = 1) -> None:
        """Run `n` ticks: due script commands, then one batched policy call, then the engine's step."""
        sim = self.sim
        for _ in range(n):
            self._send_due_script()
            obs = sim.obs.reshape(sim.N, -1)
            mask = sim.mask.reshape(sim.N, -1)
            actions = np.asarray(self.policy.act(obs, mask).actions, np.int64).reshape(1, sim.N)
            self.prev_pos = sim.state.pos[0].copy()
            sim.step(actions)
            self._index_log()

    def _index_log(self) -> None:
        """Feed lines, and per-NPC indexes the inspector reads (first news of each death, recent reactions)."""
        log = self.sim.log
        events_before, messages_before = self.feed.seen
        self.feed.update(log, self.names)
        for m in log.messages[messages_before:]:
            self.news.setdefault((m.receiver, m.subject), m)
        for e in log.events[events_before:]:
            if e.type == EventType.REACTION:
                self.recent.setdefault(e.actor, deque(maxlen=RECENT)).append(e)

    def _send_due_script(self) -> None:
        while self.script and self.script[0].tick <= self.tick:
            record = self.script.pop(0)
            if record.tick < self.tick:
                self.feed.note(self.tick, f"script: skipped {record.op} planned for tick {record.tick}", INFO)
                continue
            try:
                # A policy without probabilities ignores T and has no learned personality, so the run (and a
                # replay's digest) is the same without such a record: a note, not an error that stops the replay.
                if record.op == TEMPERATURE_OP:
                    self._apply_temperature(record.value)
                elif record.op == PERSONALITY_OP:
                    self._apply_personality_strength(record.value)
                else:
                    self._send(record)
            except ValueError as exc:
                self.feed.note(self.tick, f"script: {exc}", INFO)
        if self.replaying and not self.script:
            self.replaying = False

    # ------------------------------------------------------------------ player commands
    def command(self, op: str, target: int | str | None = None, *, x: float = 0.0, y: float = 0.0,
                actor: int | str | None = None) -> bool:
        """Queue a command for the player (or another actor); it applies at the next tick. False if refused."""
        if self.replaying:
            self.feed.note(self.tick, "replaying: player input is ignored", INFO)
            return False
        names = self.names
        actor_i = self.player if actor is None else (names.index(actor) if isinstance(actor, str) else int(actor))
        if actor_i < 0:
            self.feed.note(self.tick, "this world has no player actor", INFO)
            return False
        if not self.sim.state.alive[0, actor_i] and op != "raid":
            self.feed.note(self.tick, f"{names[actor_i]} is dead: Ctrl+R restarts", INFO)
            return False
        target_name = None
        if target is not None:
            target_name = target if isinstance(target, str) else names[int(target)]
        try:
            self._send(CommandRecord(self.tick, op, names[actor_i], target_name, float(x), float(y)))
        except ValueError as exc:
            self.feed.note(self.tick, str(exc), INFO)
            return False
        return True

    def _send(self, record: CommandRecord) -> None:
        if record.op not in COMMAND_OPS:
            raise ValueError(f"unknown command {record.op!r}; expected one of {', '.join(COMMAND_OPS)}")
        names = self.names
        if record.actor not in names:
            raise ValueError(f"no actor named {record.actor!r}")
        if record.target is not None and record.target not in names:
            raise ValueError(f"no one named {record.target!r}")
        target = -1 if record.target is None else record.target
        self.sim.command(0, record.actor, record.op, target, x=record.x, y=record.y)
        self.commands.append(CommandRecord(self.tick, record.op, record.actor, record.target, record.x, record.y))

    # ------------------------------------------------------------------ sampling temperature
    @property
    def samples(self) -> bool:
        """Whether the policy samples from learned probabilities, so that its temperature matters."""
        return hasattr(self.policy, "temperature")

    def set_temperature(self, value: float) -> bool:
        """Sample at `value` from this tick on (before the policy acts), logged as a command so that a saved
        session replays it. False, with a feed note, where it cannot apply (a replay, a policy without learned
        probabilities, the same T)."""
        return self._set_dial(value, self._apply_temperature, self.samples and value == self.temperature)

    def shift_temperature(self, direction: int) -> bool:
        """`]` (direction 1) and `[` (-1): the next temperature on the ladder; at its end, a note and no change."""
        return self._shift_dial(direction, self.temperature, TEMPERATURE_LADDER, "temperature", self.samples,
                                self.set_temperature)

    def _apply_temperature(self, value: float | None) -> None:
        """Set T on the policy now and log it; ValueError (one line) for a bad T or a policy that ignores T."""
        if not self.samples:
            name = getattr(self.policy, "name", self.source.name)
            raise ValueError(f"temperature: policy {name} has no learned probabilities to sharpen (the scripted "
                             "rules and random actions ignore T); the run is unchanged")
        set_temperature(self.policy, value, "temperature")
        was, self.temperature = self.temperature, float(value)
        self._record_dial(TEMPERATURE_OP, self.temperature, "temperature", was)

    # ------------------------------------------------------------------ personality strength
    @property
    def has_personality(self) -> bool:
        """Whether the policy has a learned personality that `{` and `}` can play more or less strongly."""
        return self._personality_refusal() is None

    def set_personality_strength(self, value: float) -> bool:
        """Play the NPCs' personalities at strength `value` from this tick on (before the policy acts), logged as a
        command so that a saved session replays it. False, with a feed note, where it cannot apply (a replay, a
        policy without a learned personality, the same strength)."""
        return self._set_dial(value, self._apply_personality_strength,
                              self.has_personality and value == _strength(self.personality_strength))

    def shift_personality_strength(self, direction: int) -> bool:
        """`}` (direction 1) and `{` (-1): the next strength on the ladder; at its end, a note and no change."""
        return self._shift_dial(direction, self.personality_strength, PERSONALITY_LADDER, "personality strength",
                                self.has_personality, self.set_personality_strength)

    def _apply_personality_strength(self, value: float | None) -> None:
        """Set the strength on the policy now and log it; ValueError (one line) for a bad strength or a policy
        without a learned personality.

        A run started at strength 1 (or none) plays the policy itself; the first change wraps it in a
        `PersonalityStrength` seeded from the run's seed, which samples with its own RNG away from 1 and with the
        policy's at 1, and holds the temperature from then on. The wrapper is made even for a value of 1: a replay
        applies only the last of several presses before one tick, so it must reach the state the presses reached
        (wrapped, its RNG unused) whatever the last value is."""
        s = check_personality(value, PERSONALITY_OP)
        refusal = self._personality_refusal()
        if refusal is not None:
            raise ValueError(refusal)
        if isinstance(self.policy, PersonalityStrength):
            self.policy.strength = s
        else:
            self.policy = PersonalityStrength(self.policy, s, seed=self.seed, name=PERSONALITY_OP,
                                              traits=self.personality_traits)
        was, self.personality_strength = self.personality_strength, s
        self._record_dial(PERSONALITY_OP, s, "personality strength", was)

    # ------------------------------------------------------------------ the two dials' shared steps
    def _set_dial(self, value: float, apply: Callable[[float], None], unchanged: bool) -> bool:
        """A dial's set: `apply(value)` now unless replaying or `unchanged`; False, with a feed note for a refusal
        (`apply`'s ValueError), where nothing changed."""
        if self.replaying:
            self.feed.note(self.tick, "replaying: player input is ignored", INFO)
            return False
        if unchanged:
            return False  # nothing changes, so nothing to log
        try:
            apply(value)
        except ValueError as exc:
            self.feed.note(self.tick, str(exc), INFO)
            return False
        return True

    def _shift_dial(self, direction: int, current: float | None, ladder: tuple[float, ...], label: str,
                    applies: bool, set_value: Callable[[float], bool]) -> bool:
        """A dial's key: the next rung of `ladder` above (`direction` > 0) or below `current`; at the ladder's end a
        note and no change (where the dial `applies`; elsewhere `set_value` says why not)."""
        new = ladder_step(current, direction, ladder)
        if new == _strength(current) and applies and not self.replaying:
            end = "highest" if direction > 0 else "lowest"
            self.feed.note(self.tick, f"{label}: already at the {end} step ({_shown(current)})", INFO)
            return False
        return set_value(new)

    def _record_dial(self, op: str, value: float, label: str, was: float | None) -> None:
        """Log a dial's change at this tick as a session record, and say so in the feed. Several presses before
        one tick leave one record, the last: only it matters to a replay."""
        last = self.commands[-1] if self.commands else None
        if last is not None and last.op == op and last.tick == self.tick:
            self.commands.pop()
        self.commands.append(CommandRecord(self.tick, op, value=value))
        self.feed.note(self.tick, f"{label} {_shown(value)} (was {_shown(was)})", INFO)

    def _personality_refusal(self) -> str | None:
        """Why the policy's personality cannot be played more or less strongly (one line), or None if it can."""
        if isinstance(self.policy, PersonalityStrength):
            return None
        try:
            guidable(self.policy, PERSONALITY_OP, check_traits(self.personality_traits))
        except ValueError as exc:
            return f"{exc}; the run is unchanged"
        return None

    def steer_player(self, dx: float, dy: float) -> None:
        """Called once per tick with the held direction: walk ahead while held, stop when released."""
        p = self.player
        if p < 0 or not self.sim.state.alive[0, p] or self.replaying:
            return
        length = math.hypot(dx, dy)
        if length > 0:
            pos = self.sim.state.pos[0, p]
            self.command("move", x=float(pos[0] + dx / length * STEER_AHEAD),
                         y=float(pos[1] + dy / length * STEER_AHEAD))
            self._steering = True
        elif self._steering:
            self.command("stop")
            self._steering = False

    # ------------------------------------------------------------------ queries
    def npcs_at(self, x: float, y: float, radius: float) -> list[int]:
        """NPCs within `radius` map units of (x, y), nearest first (the living before the dead)."""
        pos = self.sim.state.pos[0, : self.sim.N]
        d = np.hypot(pos[:, 0] - x, pos[:, 1] - y)
        near = np.flatnonzero(d <= radius)
        dead = ~self.sim.state.alive[0, near]
        return [int(i) for i in near[np.lexsort((d[near], dead))]]

    def npc_at(self, x: float, y: float, radius: float) -> int | None:
        """The NPC nearest the map point (x, y) within `radius` map units (living ones first), or None."""
        found = self.npcs_at(x, y, radius)
        return found[0] if found else None

    # ------------------------------------------------------------------ world editing
    def _edit(self, spec: WorldSpec, message: str) -> None:
        previous = self.spec
        try:
            self.rebuild(spec)
        except (ValueError, WorldError):  # e.g. a trained policy's K no longer fits: keep the old world
            self.rebuild(previous)
            raise
        self.feed.note(0, f"{message}; restarted at tick 0", EDIT)

    def add_npc(self, x: float, y: float, role: str = "farmer") -> str:
        spec, name = editor.add_npc(self.spec, x, y, role=role)
        self._edit(spec, f"added {name} ({role})")
        return name

    def remove_npc(self, name: str) -> None:
        self._edit(editor.remove_npc(self.spec, name), f"removed {name}")

    def set_trait(self, name: str, trait: str, value: float) -> None:
        spec = editor.set_trait(self.spec, name, trait, value)
        new = getattr(spec.npcs[spec.npc_index(name)].traits, trait)
        self._edit(spec, f"{name}: {trait} = {new:.2f}")

    def cycle_role(self, name: str) -> str:
        role = self.spec.npcs[self.spec.npc_index(name)].role
        new = ROLES[(ROLES.index(role) + 1) % len(ROLES)]
        self._edit(editor.set_role(self.spec, name, new), f"{name} is now a {new}")
        return new

    def set_affinity(self, a: str, b: str, affinity: float) -> None:
        rel = editor.relationship(self.spec, a, b)
        kind = rel.kind if rel else "friend"
        spec = editor.set_relationship(self.spec, a, b, kind, affinity)
        self._edit(spec, f"{a} - {b}: {kind} {editor.relationship(spec, a, b).affinity:+.2f}")

    def cycle_relationship(self, a: str, b: str) -> str | None:
        spec, kind = editor.cycle_relationship(self.spec, a, b)
        self._edit(spec, f"{a} - {b}: {kind or 'no tie'}")
        return kind

    def save_world(self, path: str | Path) -> None:
        save_world(self.spec, path)
        self.world_ref = str(path)
        self.feed.note(self.tick, f"saved world to {path}", EDIT)

    def load_world(self, path_or_id: str | Path) -> None:
        spec = load_world(path_or_id)
        self.world_ref = str(path_or_id)
        self._edit(spec, f"loaded {path_or_id}")

    # ------------------------------------------------------------------ sessions
    def session(self) -> Session:
        """Everything needed to replay the current run from tick 0."""
        # the starting T and strength: the changes since are in `commands`, at their ticks
        return Session(commands=list(self.commands), seed=self.seed, policy=self.source.spec,
                       temperature=self.start_temperature, personality_strength=self.start_personality_strength,
                       personality_traits=self.personality_traits,
                       scenario=self.scenario, slots=self.slots,
                       ticks=self.tick, digest=state_digest(self.sim.state), world_ref=self.world_ref, world=self.spec)

    def start_replay(self, session: Session) -> None:
        """Restart with the session's world and seed and send its commands at their ticks."""
        if session.world is not None:
            self.spec = session.world
            self.spec_version += 1
        if session.scenario is not None:
            if session.scenario not in SCENARIOS:
                raise WorldError(f"scenario: expected one of {', '.join(SCENARIOS)}, got {session.scenario!r}")
            self.scenario = session.scenario
        if session.slots is not None:
            self.slots = session.slots
        self.start_temperature = self.temperature = session.temperature
        self.start_personality_strength = self.personality_strength = session.personality_strength
        self.personality_traits = session.personality_traits
        self.rebuild(seed=session.seed if session.seed is not None else self.seed)
        self.load_script(session)
        self.replaying = True

    def load_script(self, session: Session) -> None:
        """Send the session's commands at their ticks (on top of the player's own input)."""
        self.script = sorted(session.commands, key=lambda c: c.tick)

    def digest(self) -> str:
        return state_digest(self.sim.state)


def _strength(value: float | None) -> float:
    return 1.0 if value is None else value  # None plays as trained: T = 1, strength 1


def _shown(value: float | None) -> str:
    """A temperature or a personality strength as the feed writes it."""
    return f"{_strength(value):g}"

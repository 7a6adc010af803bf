"""Reaction labels on the bridge last as long as the behaviour: a recorded deterministic session.

The recording (data/reaction_session.json) is a session.step sequence on village-v1: the player kills Alda
at step 3 and the bundled default policy (deterministic) chose every NPC's action for 48 steps; its actions
are stored, so the replay needs no policy. In it Bren and Cai charge the player, then mourn Alda in spells
at her body, and Dora attacks the player for 44 steps. The tick's own labels flicker (a landed blow or the
end of a mourning spell reads `none`); the session's reactions must not.

Re-record (only when the engine's behaviour is meant to change): `python tests/bridge/test_reaction_runs.py
--record`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bridge.protocol import Limits  # noqa: E402
from bridge.sessions import SessionStore  # noqa: E402
from engine.constants import REACTION_NAMES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RECORDING = Path(__file__).resolve().parent / "data" / "reaction_session.json"
STEPS = 48
DEATH_STEP = 3


def _store(tuning: dict[str, Any]) -> SessionStore:
    from npc_brains.config import engine_tuning

    store = SessionStore(Limits(), slots=4, ttl_s=600.0)
    store.tuning = engine_tuning(tuning) if tuning else None
    return store


def replay(recording: dict[str, Any]) -> tuple[list[dict[str, Any]], list[np.ndarray]]:
    """The replies of the recorded session, and the tick's own labels after every step."""
    session = _store(recording["tuning"]).create({"world": (ROOT / "worlds" / "data" / "village-v1.toml").read_text(
        encoding="utf-8"), "seed": 0, "deterministic": True})
    replies, raw = [], []
    for step, actions in enumerate(recording["actions"]):
        if step == DEATH_STEP:
            session.queue_event({"type": "death", "actor": "player", "target": "Alda"})
        session.prepare({})
        replies.append(session.finish(np.array(actions, np.int64)))
        raw.append(session.sim.reaction[0].copy())
    return replies, raw


def runs_of(replies: list[dict[str, Any]], npc: str) -> list[tuple[str, str, int, int]]:
    """(reaction, action, first step, steps) of each stretch of one reaction label of an NPC."""
    out: list[list[Any]] = []
    for step, reply in enumerate(replies):
        entry = next(e for e in reply["reactions"] if e["npc"] == npc)
        if out and out[-1][0] == entry["reaction"]:
            out[-1][3] += 1
        else:
            out.append([entry["reaction"], entry["action"], step, 1])
    return [tuple(r) for r in out]


def entries(replies: list[dict[str, Any]], npc: str) -> list[dict[str, Any]]:
    return [next(e for e in r["reactions"] if e["npc"] == npc) for r in replies]


def test_mourning_keeps_its_label_while_the_mourning_continues():
    replies, raw = replay(json.loads(RECORDING.read_text(encoding="utf-8")))
    names = [e["npc"] for e in replies[0]["reactions"]]
    for npc in ("Bren", "Cai"):
        rows = entries(replies, npc)
        mourning = [k for k, e in enumerate(rows) if e["reaction"] == "mourning"]
        assert mourning, f"{npc} never mourns in the recording"
        first, last = mourning[0], mourning[-1]
        assert mourning == list(range(first, last + 1)), f"{npc}: mourning drops: {runs_of(replies, npc)}"
        assert all(rows[k]["action"] == "mourn" for k in range(first, last + 1))
        assert rows[last + 1]["action"] != "mourn"  # it ends when the mourning does
        assert last - first + 1 >= 10
        # one reaction: one start, one bark, a duration that counts up
        assert {rows[k]["since"] for k in mourning} == {replies[first]["tick"]}
        assert [rows[k]["duration"] for k in mourning] == list(range(1, len(mourning) + 1))
        assert sum("bark" in rows[k] for k in mourning) == 1 and "bark" in rows[first]
        # the tick's own label flickers in these very steps: the persistence is the session's
        own = [REACTION_NAMES[raw[k][names.index(npc)]] for k in mourning]
        assert "none" in own


def test_attacking_the_player_for_33_steps_stays_revenge():
    replies, raw = replay(json.loads(RECORDING.read_text(encoding="utf-8")))
    rows = entries(replies, "Dora")
    attacking = [k for k, e in enumerate(rows) if e["action"] == "attack" and e["target"] == "player"]
    assert len(attacking) >= 33 and attacking == list(range(attacking[0], attacking[-1] + 1))
    assert {rows[k]["reaction"] for k in attacking} == {"revenge"}
    assert sum("bark" in rows[k] for k in attacking) == 1
    dora = [e["npc"] for e in replies[0]["reactions"]].index("Dora")
    assert sum(REACTION_NAMES[raw[k][dora]] == "none" for k in attacking) >= 20  # the tick's own label drops


def test_reaction_runs_survive_a_snapshot(tmp_path):
    recording = json.loads(RECORDING.read_text(encoding="utf-8"))
    store = _store(recording["tuning"])
    store.dir = tmp_path / "sessions"
    store.dir.mkdir()
    world = (ROOT / "worlds" / "data" / "village-v1.toml").read_text(encoding="utf-8")
    session = store.create({"world": world, "seed": 0})
    for step, actions in enumerate(recording["actions"][:20]):
        if step == DEATH_STEP:
            session.queue_event({"type": "death", "actor": "player", "target": "Alda"})
        session.prepare({})
        session.finish(np.array(actions, np.int64))
    store.save(session)
    fresh = _store(recording["tuning"])
    fresh.dir = store.dir
    assert fresh.restore_all()[0] == 1
    again = fresh.sessions[session.id]
    for actions in recording["actions"][20:24]:
        a, b = session.prepare({}), again.prepare({})
        assert np.array_equal(a[0], b[0])
        assert session.finish(np.array(actions)) == again.finish(np.array(actions))


def _record() -> None:
    from npc_brains import load_policy, policy_tuning

    policy = load_policy("default", seed=0)
    tuning = policy_tuning(policy)
    overrides = (getattr(policy, "config", None) or {}).get("tuning") or {}
    store = SessionStore(Limits(), slots=4, ttl_s=600.0)
    store.tuning = tuning
    session = store.create({"world": (ROOT / "worlds" / "data" / "village-v1.toml").read_text(encoding="utf-8"),
                            "seed": 0, "deterministic": True})
    actions = []
    for step in range(STEPS):
        if step == DEATH_STEP:
            session.queue_event({"type": "death", "actor": "player", "target": "Alda"})
        obs, mask = session.prepare({})
        chosen = np.asarray(policy.act(obs, mask, deterministic=True).actions, np.int64)
        actions.append(chosen.tolist())
        session.finish(chosen)
    RECORDING.parent.mkdir(parents=True, exist_ok=True)
    RECORDING.write_text(json.dumps({"policy": "default", "tuning": overrides, "actions": actions}) + "\n",
                         encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit("usage: python tests/bridge/test_reaction_runs.py --record")
    _record()

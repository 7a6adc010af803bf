"""Sessions run the engine's NPC minds on external bodies and events (no sockets here)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bridge_helpers import FirstValidPolicy

from bridge.protocol import Limits, ProtocolError, encode_array
from bridge.sessions import SessionStore
from engine.constants import Action
from engine.observe import SELF_FEATURES
from npc_brains.baselines import ScriptedPolicy


def _store(tmp_path=None, ttl=600.0) -> SessionStore:
    return SessionStore(Limits(), slots=4, ttl_s=ttl, state_dir=tmp_path)


def _step(session, policy=None, **fields):
    policy = policy or FirstValidPolicy()
    obs, mask = session.prepare(fields)
    return session.finish(policy.act(obs, mask, deterministic=True).actions)


def test_death_event_runs_through_the_engine(world_text):
    session = _store().create({"world": world_text})
    s = session.sim.state
    alda, bren = session.index["Alda"], session.index["Bren"]
    player = session.index["player"]
    # put the player next to Bren, far from everyone else's sight of Alda
    session.queue_event({"type": "death", "actor": "player", "target": "Alda"})
    out = _step(session)
    assert not s.alive[0, alda] and s.health[0, alda] == 0
    assert s.killer[0, alda] == player and s.death_tick[0, alda] == 0
    # Bren shares a home with Alda at the start: he sees it, knows who did it, grieves and is angry
    assert s.knows_death[0, bren, alda] and s.known_culprit[0, bren, alda] == player
    assert s.grief[0, bren] > 0 and s.anger[0, bren, player] > 0
    assert s.knows_threat[0, bren, player]
    assert out["events"][0]["type"] == "death" and out["events"][0]["event"] == 1


def test_witness_list_replaces_sight(world_text):
    session = _store().create({"world": world_text})
    s = session.sim.state
    alda, kara, bren, cai = (session.index[n] for n in ("Alda", "Kara", "Bren", "Cai"))
    player = session.index["player"]
    session.queue_event({"type": "death", "actor": "player", "target": "Alda", "witnesses": ["Kara"]})
    _step(session)
    # Kara lives across the village but the game says she saw it; Bren and Cai (at home with Alda) did not
    assert s.knows_death[0, kara, alda] and s.known_culprit[0, kara, alda] == player
    assert s.learned_from[0, kara, alda] == -1
    assert s.knows_threat[0, kara, player]
    for npc in (bren, cai):
        witnessed = s.knows_death[0, npc, alda] and s.learned_from[0, npc, alda] == -1 \
            and s.known_culprit[0, npc, alda] == player
        assert not witnessed
        assert not s.knows_threat[0, npc, player]


def test_death_with_unknown_killer_from_the_alive_flags(world_text):
    session = _store().create({"world": world_text})
    s = session.sim.state
    alive = np.ones(session.E, bool)
    alive[session.index["Dora"]] = False
    out = _step(session, alive=encode_array(alive))
    dora, alda = session.index["Dora"], session.index["Alda"]
    assert not s.alive[0, dora] and s.killer[0, dora] == -1
    assert s.knows_death[0, alda, dora] and s.known_culprit[0, alda, dora] == -1
    assert [e["type"] for e in out["events"]] == ["death"] and out["events"][0]["actor"] is None


def test_bodies_follow_the_game(world_text):
    session = _store().create({"world": world_text})
    pos = np.full((session.E, 2), 30.0, np.float32)
    health = np.full(session.E, 0.5, np.float32)
    obs, _ = session.prepare({"pos": encode_array(pos), "health": encode_array(health)})
    s = session.sim.state
    np.testing.assert_allclose(s.pos[0], 30.0)
    np.testing.assert_allclose(s.health[0], 0.5)
    # the observation was recomputed from the game's bodies: every NPC stands on every other
    assert obs.shape == (session.N, session.sim.observer.obs_dim)
    health_col = SELF_FEATURES.index("health")  # health / max_health
    np.testing.assert_allclose(obs[:, health_col], 0.5 / session.sim.w.max_health[0, :session.N], rtol=1e-5)


def test_attack_event_frightens_the_attacked(world_text):
    session = _store().create({"world": world_text})
    s = session.sim.state
    cai, player = session.index["Cai"], session.index["player"]
    session.queue_event({"type": "attack", "actor": "player", "target": "Cai"})
    out = _step(session)
    assert s.alive[0, cai] and s.health[0, cai] > 0.69  # the game owns the damage
    assert s.fear[0, cai, player] > 0 and s.knows_threat[0, cai, player]
    assert out["events"][0]["type"] == "attack"


def test_gift_and_talk_events(world_text):
    session = _store().create({"world": world_text})
    s = session.sim.state
    bren, alda, kara = session.index["Bren"], session.index["Alda"], session.index["Kara"]
    session.queue_event({"type": "gift", "actor": "player", "target": "Bren"})
    out = _step(session)
    assert s.joy[0, bren] > 0.2 and out["events"][0]["type"] == "gift"
    # Bren learns of a death, then the game says Bren talked to Kara: Kara hears the news
    session.queue_event({"type": "death", "actor": "player", "target": "Alda", "witnesses": ["Bren"]})
    _step(session)
    assert s.knows_death[0, bren, alda] and not s.knows_death[0, kara, alda]
    session.queue_event({"type": "talk", "actor": "Bren", "target": "Kara"})
    out = _step(session)
    assert s.knows_death[0, kara, alda] and s.learned_from[0, kara, alda] == bren
    assert s.known_culprit[0, kara, alda] == session.index["player"]
    assert {"type": "talk", "actor": "Bren", "target": "Kara"}.items() <= out["events"][0].items()


def test_the_minds_never_hurt_the_bodies(world_text):
    """An NPC that attacks is reported to the game; the session's own blows do no damage."""
    session = _store().create({"world": world_text})
    session.queue_event({"type": "death", "actor": "player", "target": "Alda"})
    policy = ScriptedPolicy(slots=4, seed=0)
    attacks = 0
    for _ in range(20):
        out = _step(session, policy)
        attacks += sum(r["action"] == Action.ATTACK.name.lower() for r in out["reactions"])
    s = session.sim.state
    assert attacks > 0
    np.testing.assert_allclose(s.health[0, session.N:], session.sim.state.health[0, session.N:])
    assert s.alive[0, session.index["player"]]


def test_snapshot_restore_continues_identically(tmp_path, world_text):
    store = _store(tmp_path)
    session = store.create({"world": world_text, "seed": 5})
    policy = ScriptedPolicy(slots=4, seed=1)
    session.queue_event({"type": "death", "actor": "player", "target": "Alda"})
    for _ in range(3):
        _step(session, policy)
    session.queue_event({"type": "gift", "actor": "player", "target": "Bren"})  # still queued when saved
    session.remember("key", b"reply")
    store.save(session)
    twin_store = _store(tmp_path)
    restored, problems = twin_store.restore_all()
    assert (restored, problems) == (1, [])
    twin = twin_store.get(session.id)
    assert twin.pending == session.pending and twin.cached("key") == b"reply"
    for _ in range(4):
        a = _step(session, FirstValidPolicy())
        b = _step(twin, FirstValidPolicy())
        assert a == b
    for name in ("grief", "anger", "knows_death", "pos", "hunger"):
        np.testing.assert_array_equal(getattr(session.sim.state, name), getattr(twin.sim.state, name))


def test_snapshots_are_not_pickles(tmp_path, world_text):
    store = _store(tmp_path)
    session = store.create({"world": world_text})
    store.save(session)
    path = tmp_path / "sessions" / f"{session.id}.npz"
    with np.load(path, allow_pickle=False) as data:  # would raise if any entry needed pickle
        meta = json.loads(data["meta"].tobytes())
    assert meta["id"] == session.id and meta["create"]["world"] == world_text


def test_corrupt_snapshot_is_reported_not_fatal(tmp_path, world_text):
    store = _store(tmp_path)
    store.save(store.create({"world": world_text}))
    (tmp_path / "sessions" / "deadbeefdeadbeef.npz").write_bytes(b"not a zip")
    twin = _store(tmp_path)
    restored, problems = twin.restore_all()
    assert restored == 1 and len(problems) == 1 and "deadbeefdeadbeef" in problems[0]


def _damaged(good: bytes) -> dict[str, bytes]:
    flipped = bytearray(good)
    for k in range(len(flipped) // 3, len(flipped) // 3 + 64):  # inside the first members' data
        flipped[k] ^= 0xFF
    return {"empty": b"", "truncated": good[: len(good) // 2], "flipped": bytes(flipped), "junk": b"not a zip"}


def test_corrupt_snapshots_are_quarantined_and_the_good_ones_restored(tmp_path, world_text):
    store = _store(tmp_path)
    good = [store.create({"world": world_text, "seed": k}) for k in range(2)]
    for session in good:
        store.save(session)
    folder = tmp_path / "sessions"
    sample = (folder / f"{good[0].id}.npz").read_bytes()
    bad = {f"{k:016x}": data for k, data in enumerate(_damaged(sample).values())}
    for sid, data in bad.items():
        (folder / f"{sid}.npz").write_bytes(data)
    twin = _store(tmp_path)
    restored, problems = twin.restore_all()
    assert restored == 2 and {s.id for s in twin} == {s.id for s in good}
    assert len(problems) == len(bad)
    for sid, data in bad.items():
        line = next(p for p in problems if p.startswith(f"{sid}.npz"))
        assert "quarantine" in line and "\n" not in line
        assert (folder / "quarantine" / f"{sid}.npz").read_bytes() == data  # moved aside, not lost
        assert not (folder / f"{sid}.npz").exists()
    assert _store(tmp_path).restore_all() == (2, [])  # the next start has nothing left to report


def test_incompatible_snapshot_is_left_in_place(tmp_path, world_text):
    store = _store(tmp_path)
    session = store.create({"world": world_text})
    store.save(session)
    wider = SessionStore(Limits(), slots=40, ttl_s=600.0, state_dir=tmp_path)  # a server with --slots 40
    restored, problems = wider.restore_all()
    assert restored == 0 and len(problems) == 1 and "left in place" in problems[0]
    assert (tmp_path / "sessions" / f"{session.id}.npz").exists()
    assert _store(tmp_path).restore_all() == (1, [])


def _saved_without(tmp_path, world_text, field: str, tuning=None):
    """A session in which the player killed Alda, saved as a server from before `field` existed would have saved it:
    (the session, the snapshot's path, its arrays)."""
    store = _store(tmp_path)
    store.tuning = tuning
    session = store.create({"world": world_text})
    session.queue_event({"type": "death", "actor": "player", "target": "Alda"})
    _step(session)
    store.save(session)
    path = tmp_path / "sessions" / f"{session.id}.npz"
    with np.load(path, allow_pickle=False) as data:
        old = {k: data[k] for k in data.files if k != f"state.{field}"}
    np.savez(path, **old)
    return session, path, old


def test_a_snapshot_saved_before_a_later_state_field_restores(tmp_path, world_text):
    """A session saved by a server from before `threat_victim` existed comes back, with that field fresh."""
    session, path, old = _saved_without(tmp_path, world_text, "threat_victim")
    again = _store(tmp_path)
    assert again.restore_all() == (1, [])
    restored = again.sessions[session.id].sim.state
    assert (restored.threat_victim == -1).all() and restored.knows_death.any()
    (tmp_path / "sessions" / f"{session.id}.npz").unlink()
    del old["state.pos"]  # a field format 1 always had is still required
    np.savez(path, **old)
    restored_count, problems = _store(tmp_path).restore_all()
    assert restored_count == 0 and "state.pos" in problems[0]


def test_a_snapshot_from_before_grief_per_loss_shares_the_grief_out_over_the_losses(tmp_path, world_text):
    """Restored into a world that holds grief per loss, a snapshot that held only the sum keeps every villager's
    grief, shared out over the deaths it knows of."""
    from engine.constants import Tuning

    per_loss = Tuning(grief_per_loss=True, mourning_ends_with_grief=True)
    session, _, _ = _saved_without(tmp_path, world_text, "loss_grief", per_loss)
    again = _store(tmp_path)
    again.tuning = per_loss
    assert again.restore_all() == (1, [])
    state = again.sessions[session.id].sim.state
    alda = session.sim.specs[0].npc_names.index("Alda")
    assert state.grief.max() > 0.1, "the death was grieved"
    np.testing.assert_allclose(state.loss_grief.sum(-1), state.grief, rtol=1e-5, atol=1e-7)
    assert not np.delete(state.loss_grief, alda, axis=2).any(), "the one death known of holds all the grief"


def test_snapshot_is_fsynced_before_the_rename(tmp_path, world_text, monkeypatch):
    import bridge.sessions as sessions

    calls: list[str] = []
    real_fsync, real_replace = sessions.os.fsync, sessions.os.replace
    monkeypatch.setattr(sessions.os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(sessions.os, "replace", lambda a, b: (calls.append("replace"), real_replace(a, b))[1])
    store = _store(tmp_path)
    store.save(store.create({"world": world_text}))
    assert calls[:2] == ["fsync", "replace"]


def test_expired_snapshots_are_dropped_at_restore(tmp_path, world_text):
    store = _store(tmp_path)
    session = store.create({"world": world_text})
    session.last_used -= 1000
    store.save(session)
    twin = _store(tmp_path, ttl=10.0)
    assert twin.restore_all() == (0, [])
    assert not list((tmp_path / "sessions").glob("*.npz"))


def test_close_deletes_the_snapshot(tmp_path, world_text):
    store = _store(tmp_path)
    session = store.create({"world": world_text})
    store.save(session)
    store.close(session.id)
    assert not list((tmp_path / "sessions").glob("*.npz"))
    with pytest.raises(ProtocolError):
        store.get(session.id)


def test_sessions_run_the_minds_under_the_serving_policys_tuning(tmp_path, world_text):
    """A policy trained with `--tuning` overrides meets the appraisal it learned; the mind still never harms."""
    from npc_brains.config import engine_tuning

    store = _store(tmp_path)
    plain = store.create({"world": world_text})
    store.tuning = engine_tuning({"mourn_ticks": 4, "mourn_relief_linear": True, "blow_damage": 0.9})
    tuned = store.create({"world": world_text})
    assert plain.sim.t.mourn_ticks == 6 and not plain.sim.t.mourn_relief_linear
    assert tuned.sim.t.mourn_ticks == 4 and tuned.sim.t.mourn_relief_linear
    assert tuned.sim.t.blow_damage == 0.0 == plain.sim.t.blow_damage  # bodies are the game's business


def test_the_server_starts_past_a_corrupt_snapshot_and_serves_the_good_one(tmp_path, world_text, caplog):
    from bridge_helpers import make_server

    from bridge.client import BridgeClient

    first = make_server(state_dir=tmp_path)
    first.run_in_thread()
    try:
        with BridgeClient(first.endpoint, timeout=5.0) as c:
            sid = c.session_create(world=world_text, seed=3)["session"]
            c.session_step(sid)
    finally:
        first.stop()
    (tmp_path / "sessions" / "cccc000000000000.npz").write_bytes(b"")
    second = make_server(state_dir=tmp_path)
    with caplog.at_level("WARNING"):
        second.run_in_thread()
    try:
        with BridgeClient(second.endpoint, timeout=5.0) as c:
            assert c.session_state(sid, npc="Alda")["tick"] == 1
    finally:
        second.stop()
    problems = [r.problem for r in caplog.records if getattr(r, "problem", None)]
    assert any("cccc000000000000.npz" in p and "quarantine" in p for p in problems), problems
    assert (tmp_path / "sessions" / "quarantine" / "cccc000000000000.npz").exists()

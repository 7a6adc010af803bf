"""Headless sandbox driven by posted pygame events: selection, commands, edits, files, replay, screenshots."""

from __future__ import annotations

import numpy as np
import pygame
import pytest

from engine.constants import EventType
from sandbox.app import SandboxApp
from sandbox.feed import REACTION, VIOLENCE
from sandbox.model import SandboxModel
from sandbox.session import load_session
from worlds import load_world


def screen_pos(app: SandboxApp, npc: int) -> tuple[int, int]:
    """A point on the NPC's sprite (its body, a little above the feet)."""
    x, y = app.model.sim.state.pos[0, npc]
    sx, sy = app.renderer.camera.to_screen(float(x), float(y))
    return int(sx), int(sy) - 6 * app.renderer.sprite_factor


def post(app: SandboxApp, *events: pygame.event.Event) -> None:
    for event in events:
        pygame.event.post(event)
    app.frame(0.0)  # handles the queued events; zero time, so no tick runs


def click(pos, button=1):
    return pygame.event.Event(pygame.MOUSEBUTTONDOWN, pos=pos, button=button)


def key(k, mod=0, unicode=""):
    return pygame.event.Event(pygame.KEYDOWN, key=k, mod=mod, unicode=unicode, scancode=0)


def test_click_selects_the_npc_under_the_cursor(make_app, random_policy):
    app = make_app(policy=random_policy)
    app.model.step(12)  # households leave home and spread out
    app.model.prev_pos = app.model.sim.state.pos[0].copy()
    pos = app.model.sim.state.pos[0, :app.model.sim.N]
    gap = np.linalg.norm(pos[:, None] - pos[None], axis=-1) + np.eye(len(pos)) * 1e9
    alone = [int(i) for i in np.flatnonzero(gap.min(1) > 3.0)]
    assert len(alone) >= 3
    for npc in alone:
        post(app, click(screen_pos(app, npc)))
        assert app.ui.selected == npc
    post(app, click((app.renderer.map_rect.x + 3, app.renderer.map_rect.y + 3)))  # empty ground
    assert app.ui.selected is None
    post(app, click((app.renderer.panel_rect.centerx, app.renderer.panel_rect.bottom - 5)))  # the feed: no pick
    assert app.ui.selected is None


def test_clicks_cycle_through_npcs_standing_together(make_app):
    app = make_app()  # tick 0: each household stands at its home
    forge = [app.model.names.index(n) for n in ("Edric", "Fenna", "Garth")]
    picked = []
    for _ in range(3):
        post(app, click(screen_pos(app, forge[0])))
        picked.append(app.ui.selected)
    assert sorted(picked) == forge


def test_kill_key_makes_a_death_and_reactions_in_the_feed(make_app):
    app = make_app(policy="default")  # the bundled policy (the scripted baseline until one is trained)
    victim = app.model.names.index("Alda")
    post(app, pygame.event.Event(pygame.MOUSEMOTION, pos=screen_pos(app, victim), rel=(0, 0), buttons=(0, 0, 0)))
    post(app, key(pygame.K_k))
    assert [c.op for c in app.model.commands] == ["kill"] and app.model.commands[0].target == "Alda"
    death_tick = None
    for _ in range(120):
        app.model.step(1)
        if death_tick is None and not app.model.sim.state.alive[0, victim]:
            death_tick = app.model.tick - 1
        reactions = [ln for ln in app.model.feed.lines if ln.kind == REACTION]
        if death_tick is not None and reactions:
            break
    lines = list(app.model.feed.lines)
    assert any(ln.kind == VIOLENCE and ln.text == "player killed Alda" for ln in lines)
    assert any(ln.kind == REACTION and ln.tick >= death_tick for ln in lines)
    assert any(e.type == EventType.DEATH and e.target == victim for e in app.model.sim.log.events)


def test_fixed_step_loop_runs_ticks_from_wall_time(make_app):
    app = make_app()
    assert app.frame(0.0) == 0
    ticks = sum(app.frame(1 / 60) for _ in range(120))  # two seconds at 1x
    assert ticks == pytest.approx(2 * app.clock.ticks_per_second, abs=1)
    post(app, key(pygame.K_SPACE))
    assert sum(app.frame(1 / 60) for _ in range(30)) == 0
    before = app.model.tick
    post(app, key(pygame.K_PERIOD))  # the single step runs in the frame that handles the key
    assert app.model.tick == before + 1
    assert sum(app.frame(1 / 60) for _ in range(30)) == 0
    post(app, key(pygame.K_3))
    assert app.clock.speed == 16


def test_held_keys_walk_the_player_through_the_command_queue(make_app):
    app = make_app()
    model = app.model
    start = model.sim.state.pos[0, model.player].copy()
    post(app, key(pygame.K_d))
    for _ in range(3):
        app.clock.request_step()
        app.update(0.0)
    assert [c.op for c in model.commands] == ["move"] * 3
    assert model.sim.state.pos[0, model.player, 0] > start[0] + 3
    post(app, pygame.event.Event(pygame.KEYUP, key=pygame.K_d, mod=0, unicode="", scancode=0))
    app.clock.request_step()
    app.update(0.0)
    assert model.commands[-1].op == "stop"


def test_inspector_bar_click_edits_a_trait(make_app):
    app = make_app()
    hilda = app.model.names.index("Hilda")  # first of her household: a click on her home picks her
    post(app, click(screen_pos(app, hilda)))
    assert app.ui.selected == hilda
    app.draw()
    area = next(a for a in app.renderer.hit_areas if a.edit == ("trait", "bravery"))
    post(app, click((area.rect.x + area.rect.w // 4, area.rect.centery)))
    npc = app.model.spec.npcs[hilda]
    assert npc.name == "Hilda" and npc.traits.bravery == pytest.approx(0.25, abs=0.02)
    assert app.model.sim.w.traits[0, hilda, 0] == pytest.approx(npc.traits.bravery)  # the engine runs the edit
    assert app.ui.selected == hilda
    app.draw()
    area = next(a for a in app.renderer.hit_areas if a.edit == ("trait", "bravery"))
    app.ui.mouse = area.rect.center
    post(app, pygame.event.Event(pygame.MOUSEWHEEL, x=0, y=2, flipped=False))
    assert app.model.spec.npcs[hilda].traits.bravery == pytest.approx(npc.traits.bravery + 0.1)


def test_add_remove_and_tie_npcs_with_keys(make_app):
    app = make_app()
    model = app.model
    n = model.sim.N
    spot = app.renderer.camera.to_screen(40.0, 44.0)
    post(app, pygame.event.Event(pygame.MOUSEMOTION, pos=(int(spot[0]), int(spot[1])), rel=(0, 0),
                                 buttons=(0, 0, 0)))
    post(app, key(pygame.K_INSERT))
    assert n + 1 == model.sim.N and app.ui.selected == n
    new = model.names[n]
    post(app, click(screen_pos(app, 0)), click(screen_pos(app, n)))  # select Alda, then...
    pygame.key.set_mods(pygame.KMOD_SHIFT)
    try:
        post(app, click(screen_pos(app, 4)))  # ...shift+click Edric: a new friendship
    finally:
        pygame.key.set_mods(0)
    assert any({r.a, r.b} == {new, "Edric"} and r.kind == "friend" for r in model.spec.relationships)
    post(app, key(pygame.K_DELETE))
    assert n == model.sim.N and new not in model.spec.npc_names


def test_save_then_load_gives_the_same_world(make_app, tmp_path):
    app = make_app()
    model = app.model
    model.add_npc(6.0, 42.0, role="hunter")
    model.set_trait("Kara", "aggression", 0.9)
    model.cycle_relationship("Kara", "Jory")
    edited = model.spec
    path = tmp_path / "edited.toml"
    post(app, key(pygame.K_s, mod=pygame.KMOD_CTRL))
    app.ui.prompt.text = ""
    post(app, *[key(0, unicode=ch) for ch in str(path)], key(pygame.K_RETURN))
    assert path.is_file()
    assert load_world(path) == edited
    model.load_world("village-v1")
    assert model.spec != edited
    post(app, key(pygame.K_o, mod=pygame.KMOD_CTRL))
    app.ui.prompt.text = str(path)
    post(app, key(pygame.K_RETURN))
    assert model.spec == edited and len(edited.npcs) == model.sim.N


def _play(model: SandboxModel) -> None:
    model.step(4)
    model.command("move", x=20.0, y=20.0)
    model.step(3)
    model.command("gift", "Cai")
    model.command("kill", "Hilda")
    model.step(30)
    model.command("attack", "Bren")
    model.step(10)


def test_recorded_session_replays_to_the_same_state(village, tmp_path, random_policy):
    model = SandboxModel(village, policy=random_policy, seed=11, scenario="world")
    _play(model)
    path = tmp_path / "session.toml"
    from sandbox.session import save_session

    save_session(model.session(), path)
    session = load_session(path)
    assert session.ticks == model.tick and len(session.commands) == 4

    replay = SandboxModel(village, policy=random_policy, seed=0)  # start_replay takes seed and world from the file
    replay.start_replay(session)
    assert replay.replaying and replay.seed == 11
    assert not replay.command("kill", "Alda")  # the player cannot interfere with a replay
    replay.step(session.ticks)
    assert replay.digest() == session.digest
    assert replay.commands == model.commands
    # control: a different command gives a different state, so the digest does compare something
    session.commands[1] = session.commands[1].__class__(session.commands[1].tick, "gift", "player", "Dora")
    other = SandboxModel(village, policy=random_policy, seed=0)
    other.start_replay(session)
    other.step(session.ticks)
    assert other.digest() != session.digest


def test_screenshot_is_written_and_not_blank(make_app, tmp_path):
    app = make_app(size=(900, 600))
    app.model.step(20)
    app.ui.show_graph = True
    app.ui.selected = 2
    path = tmp_path / "shot.png"
    app.screenshot(path)
    image = pygame.image.load(str(path))
    assert image.get_size() == (900, 600)
    pixels = pygame.surfarray.array3d(image).reshape(-1, 3).astype(np.float64)
    assert pixels.std(axis=0).mean() > 20
    assert len(np.unique(pixels[::7], axis=0)) > 100


def test_night_is_darker_than_day(make_app, tmp_path):
    app = make_app(size=(800, 500))
    app.draw()
    day = pygame.surfarray.array3d(app.screen.subsurface(app.renderer.map_rect)).mean()
    app.model.step(100)  # 06:00 + 100 ticks = 22:40
    app.model.prev_pos = app.model.sim.state.pos[0].copy()
    app.draw()
    night = pygame.surfarray.array3d(app.screen.subsurface(app.renderer.map_rect)).mean()
    assert night < day * 0.7


def test_inspector_shows_what_a_witness_knows_and_feels(village):
    from sandbox.inspector import inspect_npc

    model = SandboxModel(village, policy="scripted", seed=1, scenario="world")  # the player kills Alda
    model.step(60)
    alda = model.names.index("Alda")
    assert not model.sim.state.alive[0, alda]
    witnesses = [i for i in range(model.sim.N) if model.sim.state.knows_death[0, i, alda]]
    assert witnesses
    i = witnesses[0]
    sections = {s.title.split(" (")[0]: s for s in inspect_npc(model.sim, model.spec, i, news=model.news,
                                                                recent=model.recent.get(i, ()))}
    knows = [r for r in sections["knows"].rows if r.label == "Alda dead"]
    assert len(knows) == 1 and "by player" in knows[0].text
    first = model.news[(i, alda)]
    assert ("witnessed" in knows[0].text) == (first.sender == -1 and first.how == 0)
    assert {r.label for r in sections["traits"].rows} == {"bravery", "aggression", "empathy", "sociability",
                                                         "diligence"}
    # the incremental indexes and a scan of the whole log give the same inspector
    assert inspect_npc(model.sim, model.spec, i) == inspect_npc(model.sim, model.spec, i, news=model.news,
                                                                recent=model.recent.get(i, ()))


def test_interactive_loop_runs_until_quit_and_f5_saves_the_session(make_app, tmp_path):
    app = make_app()
    path = tmp_path / "f5.toml"
    post(app, key(pygame.K_F5))
    app.ui.prompt.text = str(path)
    post(app, key(pygame.K_RETURN))
    assert load_session(path).ticks == app.model.tick
    pygame.event.post(pygame.event.Event(pygame.QUIT))
    app.run(fps=1000)  # returns once the QUIT event is handled
    assert not app.ui.running

"""The pygame front end: input -> fixed-step ticks -> draw, one frame at a time.

`SandboxApp.handle_event` turns pygame events into model calls (commands, selection, edits), `update`
runs the ticks the fixed-step clock says are due, and `draw` renders; a frame never runs game logic
itself. pygame is initialised when an app is created, never at import.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pygame

from sandbox.clock import SPEEDS, FixedStepClock
from sandbox.feed import INFO
from sandbox.model import SandboxModel
from sandbox.render import Renderer
from sandbox.session import SessionError, load_session, save_session
from sandbox.ui import Prompt, UIState
from worlds import WorldError

DEFAULT_SIZE = (1280, 800)
PICK_RADIUS_PX = 18  # how close to an NPC's feet a click must land
WHEEL_STEP = 0.05  # trait/affinity change per mouse-wheel notch over an inspector bar

_DIRECTIONS = {
    pygame.K_w: (0, -1), pygame.K_UP: (0, -1), pygame.K_s: (0, 1), pygame.K_DOWN: (0, 1),
    pygame.K_a: (-1, 0), pygame.K_LEFT: (-1, 0), pygame.K_d: (1, 0), pygame.K_RIGHT: (1, 0),
}


def _brace(event: pygame.event.Event) -> str | None:
    """The brace a key press types, `{` or `}` (Shift+[ or Shift+] on a US layout, AltGr+7 or AltGr+0 on a German
    one), else None: `[` and `]` alone are the temperature keys."""
    typed = getattr(event, "unicode", "")
    if typed in ("{", "}"):
        return typed
    if event.key in (pygame.K_LEFTBRACKET, pygame.K_RIGHTBRACKET) and event.mod & pygame.KMOD_SHIFT:
        return "}" if event.key == pygame.K_RIGHTBRACKET else "{"  # a platform that leaves unicode empty
    return None


def init_pygame(size: tuple[int, int], *, headless: bool) -> pygame.Surface:
    """Initialise only what the sandbox uses (display, fonts) and open the window (or a dummy one)."""
    if headless:
        os.environ["SDL_VIDEODRIVER"] = "dummy"
    pygame.display.init()
    pygame.font.init()
    screen = pygame.display.set_mode(size, 0 if headless else pygame.RESIZABLE)
    pygame.display.set_caption("Village sandbox")
    return screen


class SandboxApp:
    def __init__(self, model: SandboxModel, *, size: tuple[int, int] = DEFAULT_SIZE, headless: bool = False,
                 session_path: str | None = None, world_path: str | None = None, speed: int = 1):
        self.model = model
        self.screen = init_pygame(size, headless=headless)
        self.renderer = Renderer(size)
        self.clock = FixedStepClock(speed=speed)
        self.ui = UIState(speed=speed)
        self.session_path = session_path
        self.world_path = world_path
        self._last_spec_version = model.spec_version
        self._last_selected: int | None = None

    # ------------------------------------------------------------------ loop
    def run(self, fps: int = 60) -> None:
        """The interactive loop, until the window closes or Ctrl+Q."""
        frame_clock = pygame.time.Clock()
        last = time.perf_counter()
        while self.ui.running:
            frame_clock.tick(fps)
            now = time.perf_counter()
            self.frame(now - last)
            last = now
            pygame.display.flip()

    def frame(self, dt: float) -> int:
        """One frame: pending input events, the ticks due after `dt` wall seconds, then drawing."""
        for event in pygame.event.get():
            self.handle_event(event)
        ticks = self.update(dt)
        self.draw()
        return ticks

    def update(self, dt: float) -> int:
        """Run the ticks the fixed-step clock says are due; held keys steer the player once per tick."""
        due = self.clock.advance(dt)
        for _ in range(due):
            dx = sum(_DIRECTIONS[k][0] for k in self.ui.held)
            dy = sum(_DIRECTIONS[k][1] for k in self.ui.held)
            self.model.steer_player(dx, dy)
            self.model.step(1)
        self._after_model_change()
        return due

    def draw(self, alpha: float | None = None) -> None:
        """Render a frame; positions are interpolated `alpha` of the way from the last tick to the current
        one (default: the clock's, so motion is smooth between ticks)."""
        self.ui.speed = self.clock.speed
        if self.ui.selected != self._last_selected:  # a new NPC's inspector starts at the top
            self.ui.inspector_scroll = 0
            self._last_selected = self.ui.selected
        self.renderer.draw(self.screen, self.model, self.ui, self.clock.alpha if alpha is None else alpha)

    def zoom(self, factor: float) -> None:
        """Zoom the map by `factor` and centre it on the selected NPC (or the map's middle)."""
        model, r = self.model, self.renderer
        r.fit(model.spec.width, model.spec.height)
        r.zoom(factor, r.map_rect.center, model.spec.width, model.spec.height)
        if self.ui.selected is not None:
            x, y = model.sim.state.pos[0, self.ui.selected]
            r.center_on(float(x), float(y))
        else:
            r.center_on(model.spec.width / 2, model.spec.height / 2)

    def screenshot(self, path: str | Path) -> None:
        """Write the current state (not interpolated) as a PNG."""
        self.draw(alpha=1.0)
        pygame.image.save(self.screen, str(path))

    def close(self) -> None:
        pygame.display.quit()

    def _after_model_change(self) -> None:
        if self.model.spec_version != self._last_spec_version:  # rebuilt: indices may have moved
            self._last_spec_version = self.model.spec_version
            if self.ui.selected is not None and self.ui.selected >= self.model.sim.N:
                self.ui.selected = None
            self.ui.hover = None

    # ------------------------------------------------------------------ input
    def handle_event(self, event: pygame.event.Event) -> None:
        try:
            self._handle(event)
        except (WorldError, SessionError, OSError, ValueError) as exc:
            self.model.feed.note(self.model.tick, f"error: {exc}", INFO)
        self._after_model_change()

    def _handle(self, event: pygame.event.Event) -> None:
        ui = self.ui
        if event.type == pygame.QUIT:
            ui.running = False
        elif event.type == pygame.KEYDOWN:
            if ui.prompt is not None:
                self._prompt_key(event)
            else:
                self._key(event)
        elif event.type == pygame.KEYUP:
            ui.held.discard(event.key)
        elif event.type == pygame.MOUSEMOTION:
            ui.mouse = event.pos
            if ui.panning:
                self.renderer.pan(*event.rel)
            ui.hover = self.npc_under(event.pos)
        elif event.type == pygame.MOUSEBUTTONDOWN:
            ui.mouse = event.pos
            self._click(event)
        elif event.type == pygame.MOUSEBUTTONUP and event.button == 2:
            ui.panning = False
        elif event.type == pygame.MOUSEWHEEL:
            self._wheel(event.y)
        elif event.type == pygame.VIDEORESIZE:
            self.screen = pygame.display.get_surface()
            self.renderer.resize(self.screen.get_size())

    def npcs_under(self, pos: tuple[int, int]) -> list[int]:
        """NPCs whose sprites are under a screen position, nearest first (none off the map)."""
        r = self.renderer
        if not r.map_rect.collidepoint(pos):
            return []
        # sprites stand on their position: aim a little below the cursor, at the feet
        f = r.sprite_factor
        wx, wy = r.camera.to_world(pos[0], pos[1] + 6 * f)
        return self.model.npcs_at(wx, wy, radius=max(PICK_RADIUS_PX, 10 * f) / r.camera.scale)

    def npc_under(self, pos: tuple[int, int]) -> int | None:
        found = self.npcs_under(pos)
        return found[0] if found else None

    def _target(self) -> int | None:
        under = self.npc_under(self.ui.mouse)
        return under if under is not None else self.ui.selected

    def _key(self, event: pygame.event.Event) -> None:
        ui, model, key = self.ui, self.model, event.key
        ctrl = bool(event.mod & pygame.KMOD_CTRL)
        brace = _brace(event)
        if key in _DIRECTIONS and not ctrl:
            ui.held.add(key)
        elif brace is not None:  # before the keys it is typed with (Shift+[, AltGr+7, ...)
            model.shift_personality_strength(1 if brace == "}" else -1)
        elif ctrl and key == pygame.K_q:
            ui.running = False
        elif ctrl and key == pygame.K_s:
            default = self.world_path or f"{model.spec.id}.toml"
            ui.prompt = Prompt("save world as", default, self._save_world)
        elif ctrl and key == pygame.K_o:
            ui.prompt = Prompt("load world (file or bundled id)", self.world_path or "village-v1", self._load_world)
        elif ctrl and key == pygame.K_r:
            model.rebuild()
            model.feed.note(0, f"restarted (seed {model.seed})", INFO)
        elif (ctrl and key == pygame.K_n) or key == pygame.K_INSERT:
            self._add_npc()
        elif key == pygame.K_SPACE:
            self.clock.set_speed(1 if self.clock.paused else 0)
        elif key in (pygame.K_n, pygame.K_PERIOD):
            self.clock.request_step()
        elif key in (pygame.K_1, pygame.K_2, pygame.K_3):
            self.clock.set_speed(SPEEDS[1 + key - pygame.K_1])
        elif key in (pygame.K_LEFTBRACKET, pygame.K_RIGHTBRACKET):
            model.shift_temperature(1 if key == pygame.K_RIGHTBRACKET else -1)
        elif key in (pygame.K_k, pygame.K_f, pygame.K_g, pygame.K_t):
            self._act_on_target(key)
        elif key == pygame.K_x:
            model.command("stop")
        elif key == pygame.K_r:
            raiders = [n for n, a in zip(model.spec.actor_names, model.spec.actors, strict=True) if a.kind == "raider"]
            if raiders:
                model.command("raid", actor=raiders[0])
            else:
                model.feed.note(model.tick, "this world has no raiders", INFO)
        elif key == pygame.K_o:
            ui.show_graph = not ui.show_graph
        elif key == pygame.K_v:
            ui.show_names = not ui.show_names
        elif key == pygame.K_e:
            ui.feed_filter = not ui.feed_filter
        elif key == pygame.K_HOME:
            self.renderer.fit(model.spec.width, model.spec.height)
        elif key == pygame.K_DELETE and ui.selected is not None:
            name = model.names[ui.selected]
            ui.selected = None
            model.remove_npc(name)
        elif key in (pygame.K_h, pygame.K_F1):
            ui.show_help = not ui.show_help
        elif key == pygame.K_F5:
            ui.prompt = Prompt("save the session as", self.session_path or "session.toml", self._save_session)
        elif key == pygame.K_ESCAPE:
            if ui.show_help:
                ui.show_help = False
            else:
                ui.selected = None

    def _act_on_target(self, key: int) -> None:
        model = self.model
        target = self._target()
        if target is None:
            model.feed.note(model.tick, "no NPC under the cursor", INFO)
            return
        if key == pygame.K_k:
            model.command("kill", target)
        elif key == pygame.K_f:
            model.command("attack", target)
        elif key == pygame.K_g:
            model.command("gift", target)
        else:
            # talk when close enough (the engine's "talk" order); otherwise walk over first
            from engine.sim import TALK_RANGE_FACTOR

            state = model.sim.state
            gap = math.hypot(*(state.pos[0, model.player] - state.pos[0, target]))
            if gap <= model.sim.t.talk_radius * TALK_RANGE_FACTOR:
                if model.command("talk", target):
                    model.feed.note(model.tick, f"you talk with {model.names[target]}", INFO)
                return
            x, y = state.pos[0, target]
            if model.command("move", x=float(x), y=float(y)):
                model.feed.note(model.tick, f"you walk over to talk with {model.names[target]} (press T again there)",
                                INFO)

    def _prompt_key(self, event: pygame.event.Event) -> None:
        prompt = self.ui.prompt
        assert prompt is not None
        if event.key == pygame.K_ESCAPE:
            self.ui.prompt = None
        elif event.key in (pygame.K_RETURN, pygame.K_KP_ENTER):
            self.ui.prompt = None
            if prompt.text.strip():
                prompt.on_submit(prompt.text.strip())
        elif event.key == pygame.K_BACKSPACE:
            prompt.text = prompt.text[:-1]
        elif event.unicode and event.unicode.isprintable():
            prompt.text += event.unicode

    def _click(self, event: pygame.event.Event) -> None:
        ui, model, r = self.ui, self.model, self.renderer
        if event.button == 2:
            ui.panning = True
            return
        if event.button not in (1, 3):
            return
        if r.map_rect.collidepoint(event.pos):
            if event.button == 3:
                wx, wy = r.camera.to_world(*event.pos)
                model.command("move", x=wx, y=wy)
                return
            under = self.npcs_under(event.pos)
            shift = bool(pygame.key.get_mods() & pygame.KMOD_SHIFT)
            if shift and ui.selected is not None:
                others = [i for i in under if i != ui.selected]
                if others:
                    model.cycle_relationship(model.names[ui.selected], model.names[others[0]])
            elif ui.selected in under:  # NPCs standing together: repeated clicks cycle through them
                ui.selected = under[(under.index(ui.selected) + 1) % len(under)]
            else:
                ui.selected = under[0] if under else None
        elif event.button == 1 and ui.selected is not None:
            for area in r.hit_areas:
                if area.rect.collidepoint(event.pos):
                    self._edit(area.edit, area.value_at(event.pos[0]))
                    return

    def _wheel(self, notches: int) -> None:
        ui, r, model = self.ui, self.renderer, self.model
        if r.map_rect.collidepoint(ui.mouse):
            r.zoom(1.15 ** notches, ui.mouse, model.spec.width, model.spec.height)
            return
        if ui.selected is None:
            return
        for area in r.hit_areas:
            if area.rect.collidepoint(ui.mouse) and area.edit[0] != "role":
                current = self._current_value(area.edit)
                if current is not None:
                    self._edit(area.edit, current + WHEEL_STEP * notches)
                return
        if r.inspector_rect.collidepoint(ui.mouse):
            limit = ui.inspector_scroll + r.inspector_overflow
            ui.inspector_scroll = max(0, min(limit, ui.inspector_scroll - 30 * notches))

    def _current_value(self, edit: tuple[str, str]) -> float | None:
        from sandbox import editor

        name = self.model.names[self.ui.selected]  # type: ignore[index]
        what, key = edit
        if what == "trait":
            return float(getattr(self.model.spec.npcs[self.model.spec.npc_index(name)].traits, key))
        if what == "affinity":
            rel = editor.relationship(self.model.spec, name, key)
            return rel.affinity if rel else 0.0
        return None

    def _edit(self, edit: tuple[str, str], value: float) -> None:
        model = self.model
        name = model.names[self.ui.selected]  # type: ignore[index]
        what, key = edit
        if what == "trait":
            model.set_trait(name, key, value)
        elif what == "affinity":
            model.set_affinity(name, key, value)
        elif what == "role":
            model.cycle_role(name)
        # the rebuilt world keeps NPC order, so the selection stays on the same NPC
        self.ui.selected = model.spec.npc_index(name)

    def _add_npc(self) -> None:
        r, model = self.renderer, self.model
        if r.map_rect.collidepoint(self.ui.mouse):
            wx, wy = r.camera.to_world(*self.ui.mouse)
        else:
            wx, wy = model.spec.width / 2, model.spec.height / 2
        name = model.add_npc(wx, wy)
        self.ui.selected = model.spec.npc_index(name)

    # ------------------------------------------------------------------ files
    def _save_world(self, path: str) -> None:
        self.model.save_world(path)
        self.world_path = path

    def _load_world(self, path: str) -> None:
        self.model.load_world(path)
        self.ui.selected = None
        if Path(path).suffix:
            self.world_path = path

    def _save_session(self, path: str) -> None:
        self.save_session(path)
        self.session_path = path

    def save_session(self, path: str) -> None:
        save_session(self.model.session(), path)
        self.model.feed.note(self.model.tick, f"saved session ({self.model.tick} ticks) to {path}", INFO)

    def replay(self, path: str) -> None:
        self.model.start_replay(load_session(path))

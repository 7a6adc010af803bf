"""Drawing the sandbox: map, NPCs, emotions, social graph, day/night tint, inspector, feed, overlays.

Rendering only reads the model: it never changes the simulation. Static parts (the map with its
locations) are drawn once into a cached surface; text is cached by (text, colour, size).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pygame

from engine.constants import NIGHT_END, NIGHT_START, REACTION_NAMES, START_TICK_OF_DAY, TICKS_PER_DAY, EntityKind
from sandbox.feed import EDIT, INFO, NEWS, REACTION, VIOLENCE
from sandbox.inspector import Section, inspect_npc
from sandbox.sprites import SpriteBank
from sandbox.ui import HELP, UIState

if TYPE_CHECKING:
    from sandbox.model import SandboxModel

TOP_BAR = 26
GRASS = (92, 146, 78)
PATH = (178, 154, 112)
PANEL_BG = (30, 30, 38)
PANEL_LINE = (60, 60, 74)
TEXT = (226, 226, 232)
DIM = (150, 150, 164)
TITLE = (250, 214, 120)
FEED_COLORS = {VIOLENCE: (240, 110, 100), REACTION: (250, 210, 90), NEWS: (140, 190, 250),
               INFO: (190, 190, 200), EDIT: (140, 220, 150)}
EMOTION_COLORS = {"grief": (80, 140, 240), "anger": (230, 60, 60), "fear": (190, 120, 240), "joy": (250, 210, 60)}
EMOTION_SHOWN = 0.15  # an emotion icon appears above this intensity
ICON_BASE = 16  # emotion icon side in pixels at the smallest sprite scale (4 more per scale step)
CROWDED = 60  # above this many NPCs, names show only when zoomed in (or for the selected one)
# Day/night colour multipliers by hour (linearly interpolated).
_TINT_KEYS = ((0.0, (72, 84, 150)), (5.0, (72, 84, 150)), (6.5, (250, 196, 170)), (8.0, (255, 255, 255)),
              (18.0, (255, 255, 255)), (20.0, (250, 170, 124)), (22.0, (72, 84, 150)), (24.0, (72, 84, 150)))


def day_tint(tick_of_day: float) -> tuple[int, int, int]:
    """The multiply colour for a tick of the day (0 = midnight): white by day, blue at night."""
    hour = (tick_of_day % TICKS_PER_DAY) / (TICKS_PER_DAY / 24)
    for (h0, c0), (h1, c1) in zip(_TINT_KEYS, _TINT_KEYS[1:], strict=False):
        if h0 <= hour <= h1:
            f = 0.0 if h1 == h0 else (hour - h0) / (h1 - h0)
            return tuple(int(a + (b - a) * f) for a, b in zip(c0, c1, strict=True))  # type: ignore[return-value]
    return _TINT_KEYS[-1][1]


def affinity_colors(affinity: np.ndarray) -> np.ndarray:
    """(..., 3) uint8 colours: red for dislike, grey for indifference, green for liking."""
    a = np.clip(np.asarray(affinity, np.float64), -1.0, 1.0)[..., None]
    grey = np.array([170.0, 170.0, 170.0])
    end = np.where(a >= 0, np.array([60.0, 220.0, 90.0]), np.array([235.0, 60.0, 60.0]))
    return (grey + (end - grey) * np.abs(a)).astype(np.uint8)


@dataclass
class Camera:
    """World (map units) to screen pixels inside the map rectangle."""

    scale: float = 1.0
    ox: float = 0.0  # screen x of world x = 0
    oy: float = 0.0

    def to_screen(self, x: float, y: float) -> tuple[float, float]:
        return self.ox + x * self.scale, self.oy + y * self.scale

    def to_world(self, sx: float, sy: float) -> tuple[float, float]:
        return (sx - self.ox) / self.scale, (sy - self.oy) / self.scale


@dataclass(frozen=True)
class HitArea:
    """A clickable bar in the inspector: clicking at x sets the value lo + (hi - lo) * fraction."""

    rect: pygame.Rect
    edit: tuple[str, str]
    lo: float
    hi: float

    def value_at(self, x: float) -> float:
        f = (x - self.rect.x) / max(self.rect.w, 1)
        return self.lo + (self.hi - self.lo) * min(max(f, 0.0), 1.0)


class Renderer:
    def __init__(self, size: tuple[int, int], sprites: SpriteBank | None = None):
        self.sprites = sprites or SpriteBank()
        self.fonts = {"s": pygame.font.Font(None, 17), "m": pygame.font.Font(None, 20), "l": pygame.font.Font(None, 26)}
        self._text_cache: dict[tuple[str, tuple[int, int, int], str], pygame.Surface] = {}
        self.camera = Camera()
        self._background: pygame.Surface | None = None
        self._background_key: tuple | None = None
        self.place_labels: list[pygame.Rect] = []  # screen rects of the place names on the map background
        self.label_rects: list[pygame.Rect] = []  # the NPC labels drawn last frame (none overlap)
        self.legend_rect: pygame.Rect | None = None
        self._tiles: dict[tuple[str, str], pygame.Surface] = {}
        self._sprite_names: list[str] = []
        self._sprite_names_key: tuple | None = None
        self._fitted_for: tuple | None = None
        self.hit_areas: list[HitArea] = []
        self.inspector_overflow = 0  # pixels of inspector content below the panel (scrollable)
        self._inspector_key: tuple | None = None
        self._inspector: list[Section] = []
        self.resize(size)

    # ------------------------------------------------------------------ layout
    def resize(self, size: tuple[int, int]) -> None:
        w, h = size
        self.size = size
        panel_w = int(min(440, max(320, w * 0.32)))
        self.map_rect = pygame.Rect(0, TOP_BAR, w - panel_w, h - TOP_BAR)
        self.panel_rect = pygame.Rect(w - panel_w, TOP_BAR, panel_w, h - TOP_BAR)
        inspector_h = int(self.panel_rect.h * 0.63)
        self.inspector_rect = pygame.Rect(self.panel_rect.x, TOP_BAR, panel_w, inspector_h)
        self.feed_rect = pygame.Rect(self.panel_rect.x, TOP_BAR + inspector_h, panel_w, self.panel_rect.h - inspector_h)
        self._fitted_for = None

    def fit(self, width: float, height: float) -> None:
        """Show the whole map in the map rectangle."""
        r = self.map_rect
        scale = min(r.w / width, r.h / height) * 0.97
        self.camera = Camera(scale, r.x + (r.w - width * scale) / 2, r.y + (r.h - height * scale) / 2)
        self._fitted_for = (width, height, self.size)

    def zoom(self, factor: float, at: tuple[int, int], width: float, height: float) -> None:
        r = self.map_rect
        fit = min(r.w / width, r.h / height)
        cam = self.camera
        new = min(max(cam.scale * factor, fit * 0.5), 80.0)
        wx, wy = cam.to_world(*at)
        self.camera = Camera(new, at[0] - wx * new, at[1] - wy * new)

    def center_on(self, x: float, y: float) -> None:
        """Put the map point (x, y) in the middle of the map rectangle."""
        r = self.map_rect
        self.camera = Camera(self.camera.scale, r.centerx - x * self.camera.scale, r.centery - y * self.camera.scale)

    def pan(self, dx: float, dy: float) -> None:
        self.camera = Camera(self.camera.scale, self.camera.ox + dx, self.camera.oy + dy)

    def text(self, text: str, color: tuple[int, int, int] = TEXT, size: str = "s") -> pygame.Surface:
        key = (text, color, size)
        surface = self._text_cache.get(key)
        if surface is None:
            if len(self._text_cache) > 3000:
                self._text_cache.clear()
            surface = self.fonts[size].render(text, True, color)
            self._text_cache[key] = surface
        return surface

    @property
    def sprite_factor(self) -> int:
        """Integer pixel-art scale for characters at the current zoom."""
        return max(1, min(4, round(self.camera.scale / 8)))

    # ------------------------------------------------------------------ frame
    def draw(self, screen: pygame.Surface, model: SandboxModel, ui: UIState, alpha: float = 1.0) -> None:
        spec = model.spec
        fit_key = (spec.width, spec.height, self.size)
        if self._fitted_for != fit_key:
            self.fit(spec.width, spec.height)
            self._fitted_for = fit_key
        screen.fill((20, 24, 20), self.map_rect)
        screen.set_clip(self.map_rect)
        screen.blit(self._map_background(model), self.map_rect.topleft)
        positions = self._positions(model, alpha)
        self._draw_graves(screen, model)
        self._draw_entities(screen, model, ui, positions)
        tod = float(model.sim.time_of_day[0])
        screen.fill(day_tint(tod), self.map_rect, special_flags=pygame.BLEND_RGB_MULT)
        if ui.show_graph:
            self._draw_graph(screen, model, ui, positions)
        self._draw_labels(screen, model, ui, positions)
        screen.set_clip(None)
        self._draw_top_bar(screen, model, ui)
        self._draw_inspector(screen, model, ui)
        self._draw_feed(screen, model, ui)
        if ui.show_help:
            self._draw_help(screen, ui)
        if ui.prompt is not None:
            self._draw_prompt(screen, ui)

    # ------------------------------------------------------------------ map
    def _map_background(self, model: SandboxModel) -> pygame.Surface:
        cam = self.camera
        key = (model.spec_version, id(model.spec), round(cam.scale, 4), round(cam.ox, 2), round(cam.oy, 2),
               self.map_rect.size)
        if self._background is not None and self._background_key == key:
            return self._background
        spec = model.spec
        r = self.map_rect
        surface = pygame.Surface(r.size)
        surface.fill((38, 52, 36))

        def to_local(x: float, y: float) -> tuple[int, int]:
            sx, sy = cam.to_screen(x, y)
            return int(sx - r.x), int(sy - r.y)

        x0, y0 = to_local(0, 0)
        x1, y1 = to_local(spec.width, spec.height)
        world_rect = pygame.Rect(x0, y0, x1 - x0, y1 - y0)
        surface.fill(GRASS, world_rect)
        # grass: one seeded noise tile, repeated from the world's origin so it pans with the map
        tile = self._grass_tile(spec.id)
        tw, th = tile.get_size()
        visible = world_rect.clip(surface.get_rect())
        if visible.w > 0 and visible.h > 0:
            surface.set_clip(visible)
            first_x = world_rect.x + (visible.x - world_rect.x) // tw * tw
            first_y = world_rect.y + (visible.y - world_rect.y) // th * th
            for tx in range(first_x, visible.right, tw):
                for ty in range(first_y, visible.bottom, th):
                    surface.blit(tile, (tx, ty))
            surface.set_clip(None)
        # dirt paths from the square to every place
        squares = spec.locations_of_kind("square")
        hub = squares[0] if squares else None
        path_w = max(2, int(cam.scale * 1.1))
        crowded = len(spec.locations) > 24
        if hub is not None:
            for loc in spec.locations:
                if loc is hub or loc.kind == "forest_edge" or (crowded and loc.kind in ("home", "field")):
                    continue
                pygame.draw.line(surface, PATH, to_local(hub.x, hub.y), to_local(loc.x, loc.y), path_w)
        for loc in spec.locations:
            cx, cy = to_local(loc.x, loc.y)
            if loc.kind == "field":
                side = max(8, int(loc.radius * 2 * cam.scale))
                tile = max(8, min(side, int(cam.scale * 4)))
                for tx in range(cx - side // 2, cx + side // 2, tile):
                    for ty in range(cy - side // 2, cy + side // 2, tile):
                        surface.blit(self.sprites.scaled("loc_field", tile), (tx, ty))
            else:
                side = max(16, int(max(loc.radius, 1.6) * 2 * cam.scale))
                surface.blit(self.sprites.scaled(f"loc_{loc.kind}", side), (cx - side // 2, cy - side // 2))
        self.place_labels = []
        for loc in spec.locations:
            if crowded and cam.scale < 12 and loc.kind in ("home", "field"):
                continue  # a big village's many houses and fields are named only when zoomed in
            cx, cy = to_local(loc.x, loc.y)
            side = max(16, int(max(loc.radius, 1.6) * 2 * cam.scale))
            label = self.text(loc.name, (250, 246, 230), "s")
            shadow = self.text(loc.name, (30, 30, 30), "s")
            pos = (cx - label.get_width() // 2, cy + side // 2 - 2)
            surface.blit(shadow, (pos[0] + 1, pos[1] + 1))
            surface.blit(label, pos)
            self.place_labels.append(pygame.Rect(pos[0] + r.x, pos[1] + r.y, label.get_width() + 1,
                                                 label.get_height() + 1))
        pygame.draw.rect(surface, (40, 60, 36), world_rect, 2)
        self._background = surface
        self._background_key = key
        return surface

    def _grass_tile(self, seed_text: str) -> pygame.Surface:
        key = ("grass", seed_text)
        tile = self._tiles.get(key)
        if tile is None:
            tile = pygame.Surface((96, 96))
            tile.fill(GRASS)
            rng = np.random.default_rng(zlib.crc32(seed_text.encode()))
            for x, y, shade in zip(rng.integers(0, 95, 36), rng.integers(0, 95, 36), rng.integers(0, 2, 36),
                                   strict=True):
                tile.fill((80, 132, 68) if shade else (106, 160, 88), (int(x), int(y), 2, 2))
            self._tiles[key] = tile
        return tile

    def _positions(self, model: SandboxModel, alpha: float) -> np.ndarray:
        """Screen positions (E, 2) of every entity, interpolated between the last two ticks."""
        cur = model.sim.state.pos[0]
        prev = model.prev_pos if model.prev_pos.shape == cur.shape else cur
        world = prev + (cur - prev) * alpha
        cam = self.camera
        return np.stack([cam.ox + world[:, 0] * cam.scale, cam.oy + world[:, 1] * cam.scale], axis=1)

    def _draw_graves(self, screen: pygame.Surface, model: SandboxModel) -> None:
        s, N = model.sim.state, model.sim.N
        dead = np.flatnonzero(~s.alive[0, :N])
        if not len(dead):
            return
        f = self.sprite_factor
        grave = self.sprites.scaled("grave", 16 * f)
        for i in dead:
            sx, sy = self.camera.to_screen(*s.death_pos[0, i])
            screen.blit(grave, (int(sx) - 8 * f, int(sy) - 13 * f))

    def _entity_sprites(self, model: SandboxModel) -> list[str]:
        """Sprite name per entity (NPCs by role, then the player and raiders), cached per world."""
        key = (model.spec_version, id(model.spec))
        if self._sprite_names_key != key:
            sim = model.sim
            self._sprite_names = [f"npc_{npc.role}" for npc in model.spec.npcs] + [
                "player" if sim.w.entity_kind[e] == EntityKind.PLAYER else "raider" for e in range(sim.N, sim.E)]
            self._sprite_names_key = key
        return self._sprite_names

    def _visible(self, model: SandboxModel) -> np.ndarray:
        s = model.sim.state
        return np.flatnonzero(s.alive[0] & s.present[0])

    def _draw_entities(self, screen: pygame.Surface, model: SandboxModel, ui: UIState, pos: np.ndarray) -> None:
        f = self.sprite_factor
        half = 8 * f
        visible = self._visible(model)
        order = visible[np.argsort(pos[visible, 1], kind="stable")]
        for e in (ui.hover, ui.selected):
            if e is not None and e in visible:
                x, y = pos[e]
                color = (255, 230, 90) if e == ui.selected else (240, 240, 240)
                pygame.draw.ellipse(screen, color, (int(x) - half - 2, int(y) - 2 * f - 1, 2 * half + 4, 4 * f + 2), 2)
        if ui.selected is not None and ui.selected in visible:  # the selected one stands in front
            order = np.concatenate([order[order != ui.selected], [ui.selected]])
        sprite_names = self._entity_sprites(model)
        corner = (pos[order] - np.array([half, 14 * f])).astype(np.int64).tolist()
        screen.blits([(self.sprites.scaled(sprite_names[e], 16 * f), xy)
                      for e, xy in zip(order.tolist(), corner, strict=True)], doreturn=False)

    def _draw_graph(self, screen: pygame.Surface, model: SandboxModel, ui: UIState, pos: np.ndarray) -> None:
        s, N = model.sim.state, model.sim.N
        affinity = s.affinity[0]
        ii, jj = np.nonzero(np.triu(affinity, 1))
        lift = 6 * self.sprite_factor  # from the feet to the middle of the body
        values = affinity[ii, jj]
        colors = affinity_colors(values)
        alive = s.alive[0, ii] & s.alive[0, jj]
        colors[~alive] //= 2  # a dead NPC's ties are dimmed
        color_list = [tuple(c) for c in colors.tolist()]
        widths = 1 + (np.abs(values) * 2.5).astype(np.int64)
        for k, (i, j) in enumerate(zip(ii.tolist(), jj.tolist(), strict=True)):
            touches = ui.selected in (i, j)
            if ui.selected is not None and not touches and N > CROWDED:
                continue
            start = (int(pos[i, 0]), int(pos[i, 1]) - lift)
            end = (int(pos[j, 0]), int(pos[j, 1]) - lift)
            pygame.draw.line(screen, color_list[k], start, end, int(widths[k]) + touches)

    def _draw_labels(self, screen: pygame.Surface, model: SandboxModel, ui: UIState, pos: np.ndarray) -> None:
        """Emotion icons above heads; under the feet one label per entity: its name and its reaction.

        Labels are placed so they do not overlap: a label that would cover another moves down a line,
        and is left out if it still cannot fit (the selected NPC's label always shows).
        """
        sim, s = model.sim, model.sim.state
        N = sim.N
        f = self.sprite_factor
        names = model.names
        show_names = ui.show_names and (N <= CROWDED or self.camera.scale >= 12)
        emotions = np.stack([s.grief[0], s.anger[0].max(-1), s.fear[0].max(-1), s.joy[0]], axis=1)
        kinds = ("grief", "anger", "fear", "joy")
        icon_side = ICON_BASE + 4 * f
        visible = [int(e) for e in self._visible(model)]
        strongest = emotions.argmax(1)
        feeling = emotions.max(1) > EMOTION_SHOWN
        for e in visible:
            if e >= N or not (feeling[e] or e == ui.selected):
                continue
            x, y = int(pos[e, 0]), int(pos[e, 1])
            top = y - 14 * f
            levels = emotions[e]
            k = int(strongest[e])
            shown = bool(feeling[e])
            if shown:
                icon = self.sprites.scaled(f"emo_{kinds[k]}", icon_side)
                screen.blit(icon, (x - icon_side // 2, top - icon_side + 2))
                # one bar per emotion beside the icon: all four levels at a glance (the legend names them)
                bx = x + icon_side // 2 + 1
                bar_h = icon_side - 2
                for c, level in enumerate(levels):
                    h = int(min(level, 2.0) / 2.0 * bar_h)
                    if h:
                        screen.fill(EMOTION_COLORS[kinds[c]], (bx + c * 4, top - h + 1, 3, h))
            if e == ui.selected:  # a marker above the head, visible in any crowd
                tip_y = top - (icon_side if shown else 0) - 2
                triangle = [(x - 6, tip_y - 9), (x + 6, tip_y - 9), (x, tip_y)]
                pygame.draw.polygon(screen, (255, 230, 90), triangle)
                pygame.draw.polygon(screen, (40, 30, 10), triangle, 1)
        legend = self._draw_legend(screen, any(e < N and feeling[e] for e in visible))
        # labels: the selected first, then reacting NPCs, then the rest; none covers a place name, the legend
        # or another label
        order = sorted(visible, key=lambda e: (e != ui.selected, not (e < N and sim.reaction[0, e]), e))
        reserved = list(self.place_labels) + ([legend] if legend is not None else [])
        placed: list[pygame.Rect] = []
        for e in order:
            reaction = int(sim.reaction[0, e]) if e < N else 0
            named = show_names or e in (ui.selected, ui.hover) or e >= N
            if not named and not reaction:
                continue
            parts = []
            if named:
                parts.append(self.text("you" if e == model.player else names[e],
                                       TITLE if e == ui.selected else (255, 255, 255)))
            if reaction:
                parts.append(self.text(REACTION_NAMES[reaction], (255, 214, 110)))
            width = sum(p.get_width() for p in parts) + 4 * (len(parts) - 1)
            height = parts[0].get_height()
            x, y = int(pos[e, 0]), int(pos[e, 1])
            rect = pygame.Rect(x - width // 2, y + 1, width, height)
            for dx, dy in _label_offsets(width, height):
                candidate = rect.move(dx, dy)
                if candidate.inflate(4, 0).collidelist(placed) < 0 and candidate.collidelist(reserved) < 0:
                    rect = candidate
                    break
            else:
                if e != ui.selected:
                    continue  # no free spot near its feet: the hover or a click still names it
            placed.append(rect.inflate(4, 0))
            screen.fill((18, 18, 22), rect.inflate(4, 0), special_flags=pygame.BLEND_RGB_MULT)
            cx = rect.x
            for part in parts:
                screen.blit(part, (cx, rect.y))
                cx += part.get_width() + 4

        self.label_rects = placed

    def _draw_legend(self, screen: pygame.Surface, feeling: bool) -> pygame.Rect | None:
        """The emotion icons' key, in the map's lower-left corner, while any icon is on screen."""
        if not feeling:
            self.legend_rect = None
            return None
        side = ICON_BASE + 4
        names = [self.text(kind, TEXT) for kind in EMOTION_COLORS]
        width = 8 + sum(side + 3 + n.get_width() + 10 for n in names)
        box = pygame.Rect(self.map_rect.x + 6, self.map_rect.bottom - side - 12, width, side + 8)
        screen.fill((18, 18, 22), box)
        pygame.draw.rect(screen, PANEL_LINE, box, 1)
        x = box.x + 6
        for kind, name in zip(EMOTION_COLORS, names, strict=True):
            screen.blit(self.sprites.scaled(f"emo_{kind}", side), (x, box.y + 4))
            x += side + 3
            screen.blit(name, (x, box.centery - name.get_height() // 2))
            x += name.get_width() + 10
        self.legend_rect = box
        return box

    # ------------------------------------------------------------------ panels
    def _draw_top_bar(self, screen: pygame.Surface, model: SandboxModel, ui: UIState) -> None:
        bar = pygame.Rect(0, 0, self.size[0], TOP_BAR)
        screen.fill((24, 24, 30), bar)
        tod = int(model.sim.time_of_day[0])
        minutes = tod * (24 * 60 // TICKS_PER_DAY)
        day = 1 + (model.tick + START_TICK_OF_DAY) // TICKS_PER_DAY
        night = tod >= NIGHT_START or tod < NIGHT_END
        speed = "paused" if ui.speed == 0 else f"{ui.speed}x"
        mode = []
        if model.replaying:
            mode.append("REPLAY")
        if model.script and not model.replaying:
            mode.append("SCRIPT")
        text = (f"{model.spec.name}   tick {model.tick}   day {day} {minutes // 60:02d}:{minutes % 60:02d}"
                f"{' (night)' if night else ''}   {speed}   policy {model.source.name}"
                f"{'' if model.temperature is None else f' at T={model.temperature:g}'}"
                f"{'' if model.personality_strength is None else f' strength {model.personality_strength:g}'}   "
                f"NPCs {int(model.sim.state.alive[0, :model.sim.N].sum())}/{model.sim.N}   {' '.join(mode)}")
        screen.blit(self.text(text, TEXT, "m"), (8, 5))
        hint = self.text("H: help", DIM, "m")
        screen.blit(hint, (self.size[0] - hint.get_width() - 8, 5))

    def _draw_inspector(self, screen: pygame.Surface, model: SandboxModel, ui: UIState) -> None:
        r = self.inspector_rect
        screen.fill(PANEL_BG, r)
        pygame.draw.line(screen, PANEL_LINE, r.topleft, r.bottomleft, 2)
        self.hit_areas = []
        if ui.selected is None or ui.selected >= model.sim.N:
            screen.blit(self.text("Inspector", TITLE, "l"), (r.x + 10, r.y + 8))
            for k, line in enumerate(("Click an NPC to inspect its mind.", "Shift+click another to tie them.",
                                      "K kill, F attack, G gift, T talk (cursor)", "H for every key.")):
                screen.blit(self.text(line, DIM, "m"), (r.x + 10, r.y + 40 + 20 * k))
            return
        key = (ui.selected, model.tick, model.spec_version, len(model.sim.log.events))
        if key != self._inspector_key:
            self._inspector = inspect_npc(model.sim, model.spec, ui.selected, news=model.news,
                                          recent=model.recent.get(ui.selected, ()))
            self._inspector_key = key
        screen.set_clip(r)
        top = r.y + 6
        y = top - ui.inspector_scroll
        label_w = 112
        bar_x = r.x + 10 + label_w
        bar_w = 120

        def visible(row_y: int) -> bool:
            return r.y <= row_y and row_y + 14 <= r.bottom

        for k, section in enumerate(self._inspector):
            if k == 0:
                screen.blit(self.text(section.title, TITLE, "l"), (r.x + 10, y))
                y += 24
            else:
                y += 3
                screen.blit(self.text(section.title, TITLE), (r.x + 10, y))
                y += 15
            for row in section.rows:
                if not visible(y):
                    y += 15
                    continue
                screen.blit(self.text(row.label, DIM), (r.x + 14, y))
                x = bar_x
                if row.bar is not None:
                    track = pygame.Rect(bar_x, y + 3, bar_w, 8)
                    screen.fill((56, 56, 66), track)
                    span = max(row.hi - row.lo, 1e-6)
                    if row.lo < 0:  # a bar centred on zero
                        mid = track.x + int(track.w * (-row.lo / span))
                        end = track.x + int(track.w * (min(max(row.bar, row.lo), row.hi) - row.lo) / span)
                        screen.fill(row.color or TEXT, (min(mid, end), track.y, abs(end - mid) or 1, track.h))
                        screen.fill((200, 200, 200), (mid, track.y - 1, 1, track.h + 2))
                    else:
                        frac = min(max((row.bar - row.lo) / span, 0.0), 1.0)
                        screen.fill(row.color or TEXT, (track.x, track.y, int(track.w * frac), track.h))
                    if row.edit is not None:
                        pygame.draw.rect(screen, (110, 110, 130), track.inflate(2, 2), 1)
                        self.hit_areas.append(HitArea(track.inflate(0, 6), row.edit, row.lo, row.hi))
                    x = bar_x + bar_w + 8
                text = self.text(row.text, row.color if row.bar is None and row.color else TEXT)
                screen.blit(text, (x, y))
                if row.edit is not None and row.bar is None:
                    self.hit_areas.append(HitArea(pygame.Rect(r.x + 10, y, r.w - 20, 15), row.edit, 0.0, 1.0))
                y += 15
        self.inspector_overflow = max(0, y + ui.inspector_scroll - top - (r.h - 12))
        if self.inspector_overflow:
            hint = self.text("wheel: scroll", DIM)
            screen.fill(PANEL_BG, (r.right - hint.get_width() - 12, r.bottom - 16, hint.get_width() + 10, 16))
            screen.blit(hint, (r.right - hint.get_width() - 8, r.bottom - 15))
        screen.set_clip(None)

    def _draw_feed(self, screen: pygame.Surface, model: SandboxModel, ui: UIState) -> None:
        r = self.feed_rect
        screen.fill((24, 24, 30), r)
        pygame.draw.line(screen, PANEL_LINE, r.topleft, r.topright, 2)
        pygame.draw.line(screen, PANEL_LINE, r.topleft, r.bottomleft, 2)
        title = "events" + (f" about {model.names[ui.selected]}" if ui.feed_filter and ui.selected is not None else "")
        screen.blit(self.text(title, TITLE), (r.x + 10, r.y + 6))
        lines = list(model.feed.lines)
        if ui.feed_filter and ui.selected is not None:
            lines = [ln for ln in lines if ui.selected in (ln.actor, ln.target)]
        line_h = 15
        capacity = max(0, (r.h - 28) // line_h)
        screen.set_clip(r.inflate(-4, 0))
        y = r.y + 24
        for line in lines[-capacity:] if capacity else []:
            screen.blit(self.text(f"{line.tick:>4}", DIM), (r.x + 8, y))
            screen.blit(self.text(line.text, FEED_COLORS.get(line.kind, TEXT)), (r.x + 44, y))
            y += line_h
        screen.set_clip(None)

    def _draw_help(self, screen: pygame.Surface, ui: UIState) -> None:
        w = min(self.size[0] - 40, 700)
        h = min(self.size[1] - 40, 40 + 17 * len(HELP))
        box = pygame.Rect((self.size[0] - w) // 2, (self.size[1] - h) // 2, w, h)
        shade = pygame.Surface(box.size, pygame.SRCALPHA)
        shade.fill((16, 16, 22, 235))
        screen.blit(shade, box.topleft)
        pygame.draw.rect(screen, TITLE, box, 1)
        screen.blit(self.text("Keys (H or F1 closes)", TITLE, "l"), (box.x + 14, box.y + 8))
        y = box.y + 36
        for keys, what in HELP:
            screen.blit(self.text(keys, (255, 236, 150)), (box.x + 14, y))
            screen.blit(self.text(what, TEXT), (box.x + 200, y))
            y += 17

    def _draw_prompt(self, screen: pygame.Surface, ui: UIState) -> None:
        prompt = ui.prompt
        assert prompt is not None
        w = min(self.size[0] - 40, 640)
        box = pygame.Rect((self.size[0] - w) // 2, self.size[1] // 2 - 40, w, 80)
        screen.fill((16, 16, 22), box)
        pygame.draw.rect(screen, TITLE, box, 1)
        screen.blit(self.text(f"{prompt.label} (Enter: ok, Esc: cancel)", TITLE, "m"), (box.x + 12, box.y + 10))
        cursor = "_" if (pygame.time.get_ticks() // 500) % 2 == 0 else " "
        screen.blit(self.text(prompt.text + cursor, TEXT, "m"), (box.x + 12, box.y + 44))


def _label_offsets(width: int, height: int) -> list[tuple[int, int]]:
    """Where a name tag may go, nearest first: under the feet, lower lines, then shifted to either side."""
    out = [(0, 0), (0, height), (0, 2 * height)]
    for dy in (0, height):
        out += [(width // 2 + 6, dy), (-(width // 2 + 6), dy)]
    return out

"""The sandbox's pixel art, drawn in code: 16x16 character grids with a palette, plus an outline pass.

`assets/make_sprites.py` renders every sprite here to a PNG under sandbox/data/sprites/ (committed); the
sandbox loads those PNGs and falls back to rendering from this module when they are missing. Each
grid row is a string; '.' is transparent, every other letter is a palette key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pygame

SIZE = 16
OUTLINE = (28, 22, 30, 255)
Color = tuple[int, int, int, int]

# The villager body; role sprites recolour it and add an overlay (hat, tool, apron).
_BODY = (
    "................",
    "................",
    "................",
    ".....hhhhhh.....",
    "....hhhhhhhh....",
    "....hssssssh....",
    "....sesssses....",
    "....ssssssss....",
    ".....ssmmss.....",
    "......ssss......",
    "....tttttttt....",
    "...sttttttttts..",
    "...s.tttttttt.s.",
    ".....pppppppp...",
    ".....pp....pp...",
    ".....bb....bb...",
)
# A child: the same figure, shorter and with a bigger head.
_CHILD = (
    "................",
    "................",
    "................",
    "................",
    "................",
    ".....hhhhhh.....",
    "....hhhhhhhh....",
    "....hssssssh....",
    "....sesssses....",
    "....ssssssss....",
    ".....ssmmss.....",
    ".....tttttt.....",
    "....sttttttts...",
    ".....pppppp.....",
    ".....pp..pp.....",
    ".....bb..bb.....",
)

_SKIN = (236, 188, 150, 255)
_EYE = (40, 30, 40, 255)
_MOUTH = (176, 92, 84, 255)
_BOOTS = (82, 54, 38, 255)

# role -> (hair, tunic, pants, overlay grid or None, overlay palette)
_ROLE_LOOKS: dict[str, tuple[Color, Color, Color, tuple[str, ...] | None, dict[str, Color]]] = {
    "farmer": ((120, 78, 40, 255), (96, 140, 60, 255), (92, 74, 52, 255), (
        "................",
        "................",
        "....yyyyyyyy....",
        "...yyyyyyyyyy...",
        "..yyyyyyyyyyyy..",
    ), {"y": (232, 200, 90, 255)}),
    "smith": ((50, 40, 36, 255), (150, 70, 50, 255), (70, 62, 60, 255), (
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "......aaaa......",
        ".....aaaaaa.....",
        ".....aaaaaa...g.",
        "..............g.",
    ), {"a": (96, 72, 56, 255), "g": (150, 150, 160, 255)}),
    "guard": ((90, 60, 40, 255), (60, 80, 150, 255), (60, 60, 80, 255), (
        "................",
        "................",
        ".....kkkkkk.....",
        "....kkkkkkkk....",
        "....kkkkkkkk....",
        "................",
        "................",
        "................",
        "................",
        "...............l",
        "...............l",
        "...............l",
        "...............l",
        "...............l",
    ), {"k": (170, 176, 190, 255), "l": (120, 96, 60, 255)}),
    "merchant": ((150, 90, 50, 255), (150, 60, 140, 255), (80, 60, 90, 255), (
        "................",
        "................",
        "................",
        ".....rrrrrr.....",
        "....rrrrrrrrr...",
    ), {"r": (200, 50, 60, 255)}),
    "hunter": ((110, 80, 50, 255), (70, 110, 60, 255), (80, 70, 50, 255), (
        "................",
        "................",
        ".....nnnnnn.....",
        "....nnnnnnnn....",
        "...nnnnnnnnnn...",
        "...nn......nn...",
        "...n........n...",
        "................",
        "................",
        "................",
        ".o..............",
        ".o..............",
        ".o..............",
    ), {"n": (60, 96, 52, 255), "o": (140, 100, 60, 255)}),
    "healer": ((220, 190, 120, 255), (236, 236, 230, 255), (180, 180, 176, 255), (
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        ".......cc.......",
        "......cccc......",
        ".......cc.......",
    ), {"c": (210, 40, 50, 255)}),
    "elder": ((214, 214, 220, 255), (120, 100, 150, 255), (90, 80, 100, 255), (
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
        "....wwwwwwww....",
        "....ww....ww.q..",
        ".............q..",
        ".............q..",
        ".............q..",
        ".............q..",
        ".............q..",
        ".............q..",
    ), {"w": (214, 214, 220, 255), "q": (130, 96, 60, 255)}),
    "child": ((200, 140, 70, 255), (230, 170, 60, 255), (90, 110, 150, 255), None, {}),
}

_PLAYER = (
    "......gggg......",
    ".....gyyyyg.....",
    "....gyyyyyyg....",
    "....hhhhhhhh....",
    "....hssssssh....",
    "....sesssses....",
    "....ssssssss....",
    ".....ssmmss.....",
    "......ssss......",
    "...rrttttttrr...",
    "..rrtttttttttr..",
    "..rs.tttttttts..",
    "..r..ttttttt....",
    ".....pppppppp...",
    ".....pp....pp...",
    ".....bb....bb...",
)
_RAIDER = (
    "................",
    "................",
    "....mmmmmmmm....",
    "...mmmmmmmmmm...",
    "...mmddddddmm...",
    "...mdeddddedm...",
    "...mddddddddm...",
    "....ddddddd.....",
    "......dddd...x..",
    "....tttttttt.x..",
    "...dtttttttttx..",
    "...d.ttttttttd..",
    ".....tttttttt...",
    ".....pppppppp...",
    ".....pp....pp...",
    ".....bb....bb...",
)
_GRAVE = (
    "................",
    "................",
    "................",
    ".....gggggg.....",
    "....gggggggg....",
    "....ggglgggg....",
    "....gglllggg....",
    "....ggglgggg....",
    "....ggglgggg....",
    "....gggggggg....",
    "....gggggggg....",
    "....gggggggg....",
    "..eeeeeeeeeeee..",
    "..eeeeeeeeeeee..",
    "................",
    "................",
)

_LOCATIONS: dict[str, tuple[tuple[str, ...], dict[str, Color]]] = {
    "home": ((
        "................",
        ".......rr.......",
        "......rrrr......",
        ".....rrrrrr.....",
        "....rrrrrrrr....",
        "...rrrrrrrrrr...",
        "..rrrrrrrrrrrr..",
        ".rrrrrrrrrrrrrr.",
        "..wwwwwwwwwwww..",
        "..wwkkwwwwkkww..",
        "..wwkkwwwwkkww..",
        "..wwwwwddwwwww..",
        "..wwwwwddwwwww..",
        "..wwwwwddwwwww..",
        "..wwwwwddwwwww..",
        "................",
    ), {"r": (170, 70, 50, 255), "w": (222, 200, 160, 255), "k": (120, 170, 210, 255), "d": (110, 70, 40, 255)}),
    "field": ((
        "................",
        ".y.y.y.y.y.y.y..",
        ".y.y.y.y.y.y.y..",
        "gygygygygygygyg.",
        "................",
        ".y.y.y.y.y.y.y..",
        ".y.y.y.y.y.y.y..",
        "gygygygygygygyg.",
        "................",
        ".y.y.y.y.y.y.y..",
        ".y.y.y.y.y.y.y..",
        "gygygygygygygyg.",
        "................",
        ".y.y.y.y.y.y.y..",
        ".y.y.y.y.y.y.y..",
        "gygygygygygygyg.",
    ), {"y": (226, 196, 80, 255), "g": (120, 150, 50, 255)}),
    "well": ((
        "................",
        "...bbbbbbbbbb...",
        "...b........b...",
        "...b...rr...b...",
        "...b...r....b...",
        "...b...r....b...",
        "...b...k....b...",
        "..ssssssssssss..",
        "..sllllllllllss.",
        "..slwwwwwwwwlss.",
        "..slwwwwwwwwlss.",
        "..sllllllllllss.",
        "..ssssssssssss..",
        "..ssssssssssss..",
        "................",
        "................",
    ), {"b": (110, 70, 40, 255), "r": (160, 130, 90, 255), "k": (90, 90, 100, 255),
        "s": (150, 150, 150, 255), "l": (110, 110, 115, 255), "w": (70, 120, 200, 255)}),
    "tavern": ((
        "................",
        "..bbbbbbbbbbbb..",
        ".bbbbbbbbbbbbbb.",
        "bbbbbbbbbbbbbbbb",
        ".wwwwwwwwwwwwww.",
        ".wkkwwwwwwwwkkw.",
        ".wkkwwyyyywwkkw.",
        ".wwwwwyaaywwwww.",
        ".wwwwwyaaywwwww.",
        ".wwwwwyyyywwwww.",
        ".wwwwwddddwwwww.",
        ".wwwwwddddwwwww.",
        ".wwwwwddddwwwww.",
        ".wwwwwddddwwwww.",
        "................",
        "................",
    ), {"b": (90, 60, 40, 255), "w": (200, 170, 120, 255), "k": (250, 210, 110, 255),
        "y": (120, 80, 40, 255), "a": (240, 180, 60, 255), "d": (100, 60, 30, 255)}),
    "market": ((
        "................",
        ".rwrwrwrwrwrwrw.",
        ".rwrwrwrwrwrwrw.",
        "rwrwrwrwrwrwrwrw",
        ".p............p.",
        ".p............p.",
        ".p.aa.oo.gg...p.",
        ".p.aa.oo.gg...p.",
        ".bbbbbbbbbbbbbb.",
        ".bbbbbbbbbbbbbb.",
        ".b............b.",
        ".b............b.",
        "................",
        "................",
        "................",
        "................",
    ), {"r": (200, 50, 50, 255), "w": (240, 236, 220, 255), "p": (110, 70, 40, 255),
        "a": (220, 60, 50, 255), "o": (240, 150, 40, 255), "g": (110, 180, 60, 255), "b": (140, 96, 56, 255)}),
    "graveyard": ((
        "................",
        "................",
        "..g.....g.......",
        ".ggg...ggg...g..",
        ".ggg...ggg..ggg.",
        ".ggg...ggg..ggg.",
        "..........f.ggg.",
        "...g......f.....",
        "..ggg.....f..g..",
        "..ggg....fff.gg.",
        "..ggg.....f.ggg.",
        "..........f.ggg.",
        "................",
        "ffffffffffffffff",
        "f..f..f..f..f..f",
        "................",
    ), {"g": (160, 160, 168, 255), "f": (110, 84, 60, 255)}),
    "forest_edge": ((
        "....g.......g...",
        "...ggg.....ggg..",
        "..ggggg...ggggg.",
        ".gggdggg.gggdggg",
        "..ggggg...ggggg.",
        ".ggggggg.ggggggg",
        "gggggdggggggdggg",
        "...ttt.....ttt..",
        "...ttt..g..ttt..",
        ".......ggg......",
        "......ggggg.....",
        ".....ggdgggg....",
        "......ggggg.....",
        ".....ggggggg....",
        "........t.......",
        "........t.......",
    ), {"g": (40, 100, 50, 255), "d": (30, 70, 40, 255), "t": (100, 70, 40, 255)}),
    "square": ((
        "................",
        "..ssssssssssss..",
        ".sslllllllllss..",
        ".slssssssssssl..",
        ".slsssffsssssl..",
        ".slssffffsssslt.",
        ".slssfwwfsssslt.",
        ".slssfwwfssssl..",
        ".slssffffssssl..",
        ".slsssffsssssl..",
        ".slssssssssssl..",
        ".sslllllllllss..",
        "..ssssssssssss..",
        "................",
        "................",
        "................",
    ), {"s": (196, 186, 160, 255), "l": (170, 160, 136, 255), "f": (140, 140, 150, 255),
        "w": (90, 150, 220, 255), "t": (120, 90, 60, 255)}),
    "smithy": ((
        "................",
        "..........cc....",
        "..........cc....",
        "..kkkkkkkkcckk..",
        ".kkkkkkkkkkkkkk.",
        "kkkkkkkkkkkkkkkk",
        ".ssssssssssssss.",
        ".ssoooosssssss..",
        ".ssoyyossssaaa..",
        ".ssoyyosssssa...",
        ".ssoooossssaaa..",
        ".ssssssssssssss.",
        ".ssssssssssssss.",
        "................",
        "................",
        "................",
    ), {"k": (80, 80, 90, 255), "c": (60, 60, 66, 255), "s": (150, 120, 100, 255),
        "o": (90, 60, 40, 255), "y": (250, 140, 40, 255), "a": (110, 110, 120, 255)}),
}

_EMOTIONS: dict[str, tuple[tuple[str, ...], dict[str, Color]]] = {
    "grief": ((
        "................",
        ".......b........",
        ".......b........",
        "......bbb.......",
        "......bbb.......",
        ".....bbbbb......",
        ".....bbwbb......",
        "....bbbwbbb.....",
        "....bbbbbbb.....",
        "....bbbbbbb.....",
        ".....bbbbb......",
        "......bbb.......",
        "................",
        "................",
        "................",
        "................",
    ), {"b": (80, 140, 240, 255), "w": (200, 230, 255, 255)}),
    "anger": ((
        "................",
        "................",
        "...r........r...",
        "...rr......rr...",
        "....rr....rr....",
        ".....r....r.....",
        "................",
        "................",
        ".....r....r.....",
        "....rr....rr....",
        "...rr......rr...",
        "...r........r...",
        "................",
        "................",
        "................",
        "................",
    ), {"r": (230, 40, 40, 255)}),
    "fear": ((
        "................",
        "......pppp......",
        ".....pppppp.....",
        ".....pppppp.....",
        ".....pppppp.....",
        "......pppp......",
        "......pppp......",
        ".......pp.......",
        ".......pp.......",
        "................",
        "......pppp......",
        "......pppp......",
        "................",
        "................",
        "................",
        "................",
    ), {"p": (190, 120, 240, 255)}),
    "joy": ((
        "................",
        ".....yyyyyy.....",
        "....yyyyyyyy....",
        "...yyykyykyyy...",
        "...yyykyykyyy...",
        "...yyyyyyyyyy...",
        "...yykyyyykyy...",
        "...yyykkkkyyy...",
        "....yyyyyyyy....",
        ".....yyyyyy.....",
        "................",
        "................",
        "................",
        "................",
        "................",
        "................",
    ), {"y": (250, 210, 60, 255), "k": (90, 60, 20, 255)}),
}

EMOTIONS: tuple[str, ...] = tuple(_EMOTIONS)


def _check_grid(name: str, grid: tuple[str, ...], palette: dict[str, Color]) -> None:
    if len(grid) > SIZE or any(len(row) != SIZE for row in grid):
        raise ValueError(f"sprite {name!r}: rows must be {SIZE} characters, at most {SIZE} rows")
    unknown = {c for row in grid for c in row} - set(palette) - {"."}
    if unknown:
        raise ValueError(f"sprite {name!r}: no palette colour for {sorted(unknown)}")


def _compose(*layers: tuple[tuple[str, ...], dict[str, Color]]) -> list[list[Color | None]]:
    """Paint layers in order into a SIZE x SIZE grid of RGBA colours (None: transparent)."""
    pixels: list[list[Color | None]] = [[None] * SIZE for _ in range(SIZE)]
    for grid, palette in layers:
        for y, row in enumerate(grid):
            for x, ch in enumerate(row):
                if ch != ".":
                    pixels[y][x] = palette[ch]
    return pixels


def _outlined(pixels: list[list[Color | None]]) -> list[list[Color | None]]:
    """Add a dark one-pixel outline around the figure, so sprites read on any background."""
    out = [row[:] for row in pixels]
    for y in range(SIZE):
        for x in range(SIZE):
            if pixels[y][x] is not None:
                continue
            for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                nx, ny = x + dx, y + dy
                if 0 <= nx < SIZE and 0 <= ny < SIZE and pixels[ny][nx] is not None:
                    out[y][x] = OUTLINE
                    break
    return out


def sprite_pixels() -> dict[str, list[list[Color | None]]]:
    """Every sprite by file stem ("npc_farmer", "player", "loc_well", "emo_grief", ...) as RGBA rows."""
    sprites: dict[str, list[list[Color | None]]] = {}
    for role, (hair, tunic, pants, overlay, extra) in _ROLE_LOOKS.items():
        body = _CHILD if role == "child" else _BODY
        palette = {"h": hair, "s": _SKIN, "e": _EYE, "m": _MOUTH, "t": tunic, "p": pants, "b": _BOOTS}
        _check_grid(f"npc_{role}", body, palette)
        layers = [(body, palette)]
        if overlay is not None:
            _check_grid(f"npc_{role} overlay", overlay, extra)
            layers.append((overlay, extra))
        sprites[f"npc_{role}"] = _outlined(_compose(*layers))
    player_palette = {"g": (200, 160, 40, 255), "y": (250, 214, 80, 255), "h": (60, 40, 30, 255), "s": _SKIN,
                      "e": _EYE, "m": _MOUTH, "t": (40, 160, 200, 255), "r": (180, 30, 40, 255),
                      "p": (50, 50, 70, 255), "b": _BOOTS}
    raider_palette = {"m": (60, 50, 50, 255), "d": (150, 120, 100, 255), "e": (240, 60, 40, 255),
                      "t": (90, 40, 40, 255), "p": (50, 40, 40, 255), "b": _BOOTS, "x": (190, 190, 200, 255)}
    grave_palette = {"g": (150, 150, 158, 255), "l": (90, 90, 98, 255), "e": (80, 120, 60, 255)}
    for name, grid, palette in (("player", _PLAYER, player_palette), ("raider", _RAIDER, raider_palette),
                                ("grave", _GRAVE, grave_palette)):
        _check_grid(name, grid, palette)
        sprites[name] = _outlined(_compose((grid, palette)))
    for kind, (grid, palette) in _LOCATIONS.items():
        _check_grid(f"loc_{kind}", grid, palette)
        sprites[f"loc_{kind}"] = _compose((grid, palette))
    for emotion, (grid, palette) in _EMOTIONS.items():
        _check_grid(f"emo_{emotion}", grid, palette)
        sprites[f"emo_{emotion}"] = _outlined(_compose((grid, palette)))
    return sprites


def to_surface(pixels: list[list[Color | None]]) -> pygame.Surface:
    """A SIZE x SIZE per-pixel-alpha surface (no display needed)."""
    import pygame

    surface = pygame.Surface((SIZE, SIZE), pygame.SRCALPHA)
    for y, row in enumerate(pixels):
        for x, color in enumerate(row):
            if color is not None:
                surface.set_at((x, y), color)
    return surface

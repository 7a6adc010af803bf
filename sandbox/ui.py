"""What the sandbox's screen shows besides the village: the UI state the app edits and the renderer draws, and
the key help. Its own module so that the app (input) and the renderer (drawing) both import it, not each other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox.model import PERSONALITY_LADDER, TEMPERATURE_LADDER

# (keys, what they do): the help overlay and docs/sandbox.md list exactly these.
HELP: tuple[tuple[str, str], ...] = (
    ("Space", "pause / resume"),
    ("N or .", "advance one tick (pauses)"),
    ("1 / 2 / 3", "speed 1x / 4x / 16x"),
    ("[ / ]", f"sampling temperature down / up: {', '.join(f'{t:g}' for t in TEMPERATURE_LADDER)} "
              "(trained policies only)"),
    ("{ / }", f"personality strength down / up: {', '.join(f'{s:g}' for s in PERSONALITY_LADDER)} "
              "(trained policies only)"),
    ("WASD or arrows", "walk the player"),
    ("Right click", "walk the player to that point"),
    ("Left click", "select the NPC under the cursor (empty ground: deselect)"),
    ("K", "kill the NPC under the cursor (else the selected one)"),
    ("F", "attack (one blow) the NPC under the cursor"),
    ("G", "give a gift to the NPC under the cursor"),
    ("T", "talk with the NPC under the cursor (walks over first if it is far)"),
    ("X", "player stops"),
    ("R", "start a raid"),
    ("O", "social-graph overlay (edges coloured by affinity)"),
    ("V", "names on / off"),
    ("E", "event feed: all / only the selected NPC"),
    ("Mouse wheel / middle drag", "zoom / pan the map (Home: fit)"),
    ("Insert or Ctrl+N", "add an NPC at the cursor"),
    ("Delete", "remove the selected NPC"),
    ("Shift+click", "tie the selected NPC to another (cycle friend/kin/spouse/rival/none)"),
    ("Click / wheel on a bar", "edit a trait or an affinity in the inspector; click the role to change it"),
    ("Ctrl+S / Ctrl+O", "save the world / load a world"),
    ("F5", "save the session so far (replay: village play --replay FILE)"),
    ("Ctrl+R", "restart from tick 0 (same seed)"),
    ("H or F1", "this help"),
    ("Esc", "close help or prompt, deselect"),
    ("Ctrl+Q", "quit"),
)


@dataclass
class Prompt:
    """A one-line text input (a file name) with what to do on Enter."""

    label: str
    text: str
    on_submit: Callable[[str], None]


@dataclass
class UIState:
    selected: int | None = None
    hover: int | None = None
    show_graph: bool = False
    show_help: bool = False
    show_names: bool = True
    feed_filter: bool = False
    inspector_scroll: int = 0
    prompt: Prompt | None = None
    speed: int = 1
    held: set[int] = field(default_factory=set)  # direction keys held down
    mouse: tuple[int, int] = (0, 0)
    panning: bool = False
    running: bool = True

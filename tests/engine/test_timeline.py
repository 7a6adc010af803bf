"""The readable timeline: clock, lines, summary and JSON, on a hand-made log and on a real run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.constants import EventType, Reaction
from engine.events import HOW_FOUND_BODY, HOW_TOLD, HOW_WARNED, HOW_WITNESSED, Event, Message
from engine.timeline import Timeline, clock, run_timeline, summarize, summary_lines, timeline_dict, timeline_lines
from npc_brains.baselines import get_baseline
from worlds import Location, load_world


@pytest.mark.parametrize(("tick", "text"), [(0, "06:00"), (1, "06:10"), (30, "11:00"), (107, "23:50"),
                                            (108, "day 2 00:00"), (252, "day 3 00:00")])
def test_clock(tick: int, text: str) -> None:
    assert clock(tick) == text


NAMES = ["Alda", "Bren", "Cai", "Dora", "player"]


def ev(id_: int, tick: int, type_: EventType, actor: int, target: int, cause: int = -1,
       reaction: Reaction = Reaction.NONE, intensity: float = 0.0, x: float = 21.0, y: float = 27.0) -> Event:
    return Event(id_, 0, tick, type_, actor, target, x, y, cause, int(reaction), intensity)


def msg(tick: int, sender: int, receiver: int, subject: int, culprit: int, how: int) -> Message:
    return Message(0, tick, sender, receiver, subject, culprit, how)


@pytest.fixture
def story() -> Timeline:
    """The player kills Alda at the well; Bren sees it, tells Cai, who warns Dora; Bren mourns and strikes back;
    Cai, seeing the blow, flees from Bren."""
    events = [
        ev(0, 30, EventType.ATTACK, 4, 0),  # the killing blow: folded into the death line
        ev(1, 30, EventType.DEATH, 4, 0),
        ev(2, 31, EventType.REACTION, 1, 0, cause=1, reaction=Reaction.MOURNING, intensity=1.2),
        ev(3, 36, EventType.REACTION, 1, 4, cause=1, reaction=Reaction.REVENGE, intensity=1.5),
        ev(4, 38, EventType.ATTACK, 1, 4, cause=1),
        ev(5, 38, EventType.REACTION, 2, 1, cause=4, reaction=Reaction.FEAR, intensity=0.6),
        ev(6, 40, EventType.REACTION, 2, 3, cause=-1, reaction=Reaction.ALARM, intensity=0.5),
    ]
    messages = [
        msg(30, -1, 1, 0, 4, HOW_WITNESSED),
        msg(34, 1, 2, 0, 4, HOW_TOLD),
        msg(41, 2, 3, 0, -1, HOW_WARNED),
        msg(44, 1, 3, 0, 4, HOW_TOLD),  # Dora already knew: this one names the culprit
    ]
    knows = np.zeros((4, 5), bool)
    knows[1:4, 0] = True
    close = np.zeros((4, 4), bool)
    close[0, [1, 2, 3]] = close[[1, 2, 3], 0] = True
    return Timeline(
        world_id="test", world_name="Testville", policy="scripted", seed=0, ticks=50, n_npcs=4, names=NAMES,
        events=events, messages=messages,
        locations=(Location("Well", "well", 21.0, 27.0, 1.5), Location("Miller House", "home", 14.0, 14.0)),
        knows_death=knows, alive=np.array([False, True, True, True, True]), close=close,
        emotions={k: np.zeros((51, 4), np.float32) for k in ("grief", "anger", "fear", "joy")},
    )


def test_lines_tell_the_story_in_order(story: Timeline) -> None:
    lines = timeline_lines(story)
    assert lines[0] == "tick  30 (11:00) player killed Alda at the Well [death #1]"
    assert lines[1].strip() == "witnessed by Bren"
    assert "tick  31 (11:10) Bren mourning at Alda's body (grief 1.20) [mourning] <- death #1" in lines
    assert "tick  34 (11:40) Cai learned of Alda's death (killed by player) from Bren (told)" in lines
    assert "tick  36 (12:00) Bren takes revenge on player for Alda (anger 1.50) [revenge] <- death #1" in lines
    assert "tick  38 (12:20) Bren struck player (revenge blow) [attack #4] <- death #1" in lines
    assert "tick  38 (12:20) Cai flees from Bren (fear 0.60) [fear] <- attack #4" in lines
    assert "tick  40 (12:40) Cai warns Dora of danger (fear 0.50) [alarm]" in lines
    assert "tick  41 (12:50) Dora learned of Alda's death from Cai (warned)" in lines
    assert "tick  44 (13:20) Dora learned from Bren that player killed Alda" in lines
    assert not any("struck Alda" in line for line in lines)  # the killing blow is the death line
    ticks = [int(line.split()[1]) for line in lines if line.startswith("tick")]
    assert ticks == sorted(ticks)


def test_summary_counts(story: Timeline) -> None:
    s = summarize(story)
    (death,) = s["deaths"]
    assert death["victim"] == "Alda" and death["killer"] == "player" and death["place"] == "at the Well"
    assert death["witnesses"] == ["Bren"]
    assert death["knew_by_end"] == 3 and death["villagers"] == 3 and death["never_learned"] == []
    assert death["learned_by"] == {"witnessed": 1, "told": 1, "warned": 1}
    assert death["news_hops"] == 2  # Bren saw it -> Cai -> Dora
    assert death["close_relations"] == ["Bren", "Cai", "Dora"]
    assert s["reactions"] == {"alarm": 1, "fear": 1, "mourning": 1, "revenge": 1}
    assert s["by_npc"] == {"Bren": {"mourning": 1, "revenge": 1}, "Cai": {"fear": 1, "alarm": 1}}
    assert s["revenge_blows"] == 1
    assert s["chain"] == [1, 4, 5] and s["chain_length"] == 3  # death -> revenge blow -> fear of the avenger
    text = "\n".join(summary_lines(story, s))
    assert "3 of 3 villagers knew by the end" in text
    assert ("longest cause chain: 3 event(s): player killed Alda #1 -> Bren attacked player #4 -> Cai fear of "
            "Bren #5") in text


def test_found_body_and_unseen_death() -> None:
    t = Timeline(
        world_id="t", world_name="T", policy="p", seed=None, ticks=10, n_npcs=2, names=["A", "B", "player"],
        events=[ev(0, 2, EventType.DEATH, 2, 0, x=14.5, y=14.0)],
        messages=[msg(5, -1, 1, 0, -1, HOW_FOUND_BODY)],
        locations=(Location("Miller House", "home", 14.0, 14.0),),
        knows_death=np.array([[False, False, False], [True, False, False]]), alive=np.array([False, True, True]),
        close=np.zeros((2, 2), bool),
    )
    lines = timeline_lines(t)
    assert lines == ["tick   2 (06:20) player killed A at Miller House [death #0]",
                     " " * 20 + "no one saw it",
                     "tick   5 (06:50) B found A's body"]
    assert summarize(t)["deaths"][0]["learned_by"] == {"found the body": 1}
    t.knows_death[1, 0] = False
    assert summarize(t)["deaths"][0]["never_learned"] == ["B"]


def test_json_resolves_names(story: Timeline) -> None:
    data = json.loads(json.dumps(timeline_dict(story)))
    death = next(e for e in data["events"] if e["type"] == "death")
    assert death["actor_name"] == "player" and death["target_name"] == "Alda" and death["clock"] == "11:00"
    assert data["messages"][1] == {"tick": 34, "clock": "11:40", "sender": "Bren", "receiver": "Cai",
                                   "subject": "Alda", "culprit": "player", "how": "told"}
    assert data["summary"]["chain_length"] == 3
    assert data["npcs"] == NAMES[:4] and data["actors"] == ["player"]
    assert len(data["emotions"]["grief"]) == 4 and len(data["emotions"]["grief"][0]) == 51


def test_real_run_records_the_killing_and_reactions() -> None:
    world = load_world("village-v1")
    victim = world.events[0].target
    tl = run_timeline(world, get_baseline("scripted", seed=0), ticks=80, seed=0)
    assert tl.emotions["grief"].shape == (81, len(world.npcs))
    deaths = tl.deaths
    assert [tl.name(d.target) for d in deaths][:1] == [victim]
    assert tl.name(deaths[0].actor) == "player" and deaths[0].tick >= world.events[0].tick
    lines = timeline_lines(tl)
    assert any(f"player killed {victim}" in line for line in lines)
    assert any("] <- death #" in line for line in lines)  # at least one reaction caused by a death
    s = summarize(tl)
    first = s["deaths"][0]
    assert first["knew_by_end"] >= len(first["witnesses"])
    assert first["knew_by_end"] + len(first["never_learned"]) == first["villagers"] == len(world.npcs) - 1
    assert sum(s["reactions"].values()) > 0 and s["chain_length"] >= 2
    assert tl.emotions["grief"][-1].max() > 0  # someone grieves
    json.dumps(timeline_dict(tl))

"""The procedural village generator."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from worlds import (
    ROLES,
    WorldError,
    WorldSpec,
    generate_world,
    load_world,
    save_world,
    social_graph,
    world_from_dict,
    world_to_dict,
)


@cache
def _world(n: int, seed: int = 7) -> WorldSpec:
    return generate_world(n, seed)


@pytest.mark.parametrize("n", [4, 12, 100, 500])
def test_valid_for_sizes(n: int) -> None:
    spec = _world(n)
    assert len(spec.npcs) == n
    assert world_from_dict(world_to_dict(spec)) == spec
    assert spec.events == ()


@pytest.mark.parametrize("n", [4, 12, 100, 500])
def test_households_of_two_to_five_with_their_own_home(n: int) -> None:
    spec = _world(n)
    sizes = Counter(npc.home for npc in spec.npcs)
    homes = {loc.name for loc in spec.locations_of_kind("home")}
    assert set(sizes) == homes
    assert all(2 <= size <= 5 for size in sizes.values()), sizes


@pytest.mark.parametrize("n", [4, 12, 100, 500])
def test_relationship_structure(n: int) -> None:
    spec = _world(n)
    home = {npc.name: npc.home for npc in spec.npcs}
    by_kind = Counter(rel.kind for rel in spec.relationships)
    assert by_kind["kin"] + by_kind["spouse"] > 0
    assert by_kind["friend"] > 0
    assert by_kind["rival"] >= 1
    for rel in spec.relationships:
        same_house = home[rel.a] == home[rel.b]
        if rel.kind in ("kin", "spouse"):
            assert same_house and 0.6 <= rel.affinity <= 0.95
        elif rel.kind == "friend":
            assert not same_house and 0.3 <= rel.affinity <= 0.8
        else:
            assert not same_house and -0.9 <= rel.affinity <= -0.3
    # At most one spouse pair per household.
    spouses_per_home = Counter(home[rel.a] for rel in spec.relationships if rel.kind == "spouse")
    assert max(spouses_per_home.values(), default=0) <= 1
    if n >= 100:
        assert abs(by_kind["rival"] - n / 6) <= n / 12
        assert spouses_per_home  # most households are couples
        assert social_graph(spec).number_of_edges() == len(spec.relationships)


@pytest.mark.parametrize("n", [12, 100, 500])
def test_personalities_vary(n: int) -> None:
    spec = _world(n)
    traits = [npc.traits for npc in spec.npcs]
    assert any(t.bravery >= 0.7 and t.aggression >= 0.7 for t in traits)
    assert any(t.bravery <= 0.3 for t in traits)
    for name in ("bravery", "aggression", "empathy", "sociability", "diligence"):
        values = {getattr(t, name) for t in traits}
        assert len(values) > n // 2, name
    assert {npc.role for npc in spec.npcs} <= set(ROLES)
    assert len({npc.role for npc in spec.npcs}) >= 4


@pytest.mark.parametrize("n", [4, 12, 100, 500])
def test_map_and_places(n: int) -> None:
    spec = _world(n)
    assert spec.width == spec.height
    kinds = Counter(loc.kind for loc in spec.locations)
    for kind in ("well", "tavern", "market", "square", "smithy", "graveyard", "forest_edge"):
        assert kinds[kind] == 1, kind
    assert kinds["field"] == max(1, round(n / 8))
    forest = spec.locations_of_kind("forest_edge")[0]
    assert forest.x in (0.0, spec.width) or forest.y in (0.0, spec.height)

    actors = {a.kind: [] for a in spec.actors}
    for actor in spec.actors:
        actors[actor.kind].append(actor)
    (player,) = actors["player"]
    square = spec.locations_of_kind("square")[0]
    assert abs(player.x - square.x) <= 3 and abs(player.y - square.y) <= 3
    assert len(actors["raider"]) == 2
    for raider in actors["raider"]:
        assert abs(raider.x - forest.x) + abs(raider.y - forest.y) <= forest.radius


def test_map_grows_with_n() -> None:
    assert _world(4).width < _world(100).width < _world(500).width


def test_names_are_readable_and_unique() -> None:
    spec = _world(500)
    names = [npc.name for npc in spec.npcs]
    assert len(set(names)) == len(names)
    assert all(name[0].isupper() and 3 <= len(name) <= 16 for name in names)


def test_deterministic() -> None:
    assert generate_world(30, 11) == generate_world(30, 11)
    assert generate_world(30, 11, world_id="mine").id == "mine"


def test_different_seeds_differ() -> None:
    a, b = generate_world(30, 1), generate_world(30, 2)
    assert a.npcs != b.npcs
    assert a.relationships != b.relationships


@pytest.mark.parametrize("n", [3, 501, 0, -4])
def test_rejects_sizes_out_of_range(n: int) -> None:
    with pytest.raises(ValueError, match="4, 500"):
        generate_world(n, 0)
    with pytest.raises(WorldError):
        generate_world(n, 0)


def test_rejects_bad_arguments() -> None:
    with pytest.raises(WorldError):
        generate_world(True, 0)  # type: ignore[arg-type]
    with pytest.raises(WorldError):
        generate_world(12, -1)
    with pytest.raises(WorldError):
        generate_world(12.5, 0)  # type: ignore[arg-type]
    with pytest.raises(WorldError, match="world.id"):
        generate_world(12, 0, world_id="has spaces")


def test_generated_world_saves_and_loads(tmp_path: Path) -> None:
    spec = _world(12)
    save_world(spec, tmp_path / "gen.toml")
    assert load_world(tmp_path / "gen.toml") == spec

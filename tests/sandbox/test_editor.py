"""World edits: each gives a valid world, or a WorldError naming the problem."""

from __future__ import annotations

import pytest

from sandbox import editor
from worlds import WorldError, load_world, save_world


def test_add_npc_moves_into_a_nearby_home_or_builds_one(village):
    home = village.location("Miller House")
    spec, name = editor.add_npc(village, home.x + 1, home.y, role="smith")
    assert spec.npcs[-1].name == name and spec.npcs[-1].home == "Miller House"
    assert len(spec.locations) == len(village.locations)
    spec2, name2 = editor.add_npc(spec, 40.0, 44.0)
    assert name2 != name
    new_home = spec2.location(spec2.npcs[-1].home)
    assert new_home.kind == "home" and (new_home.x, new_home.y) == (40.0, 44.0)


def test_remove_npc_drops_its_ties_and_events(village):
    spec = editor.remove_npc(village, "Alda")
    assert "Alda" not in spec.npc_names
    assert all("Alda" not in (r.a, r.b) for r in spec.relationships)
    assert all(e.target != "Alda" for e in spec.events)
    with pytest.raises(WorldError, match="Alda"):
        editor.remove_npc(spec, "Alda")


def test_traits_are_clamped_and_roles_checked(village):
    spec = editor.set_trait(village, "Bren", "bravery", 1.7)
    assert spec.npcs[spec.npc_index("Bren")].traits.bravery == 1.0
    with pytest.raises(WorldError, match="courage"):
        editor.set_trait(village, "Bren", "courage", 0.5)
    with pytest.raises(WorldError, match="wizard"):
        editor.set_role(village, "Bren", "wizard")


def test_relationships_cycle_and_replace(village):
    assert editor.relationship(village, "Cai", "Lute") is None
    kinds = []
    spec = village
    for _ in range(5):
        spec, kind = editor.cycle_relationship(spec, "Cai", "Lute")
        kinds.append(kind)
    assert kinds == ["friend", "kin", "spouse", "rival", None]
    spec = editor.set_relationship(village, "Lute", "Alda", "friend", 0.3)  # pair given in the other order
    ties = [r for r in spec.relationships if {r.a, r.b} == {"Alda", "Lute"}]
    assert len(ties) == 1 and ties[0].kind == "friend" and ties[0].affinity == 0.3


def test_edited_world_saves_and_loads_back(village, tmp_path):
    spec, name = editor.add_npc(village, 5.0, 5.0, role="healer")
    spec = editor.set_trait(spec, name, "empathy", 0.95)
    spec = editor.set_relationship(spec, name, "Kara", "friend", 0.7)
    path = tmp_path / "edited.toml"
    save_world(spec, path)
    assert load_world(path) == spec

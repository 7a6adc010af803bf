"""The social graph: a networkx graph for designers and analysis, and the dense matrices the engine uses.

The graph is derived from the spec's relationships, and the matrices from the graph, so there is one
source of truth and nothing is edited twice.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from worlds.spec import RELATION_KINDS, WorldSpec

NO_RELATION = -1


def social_graph(spec: WorldSpec) -> nx.Graph:
    """Nodes are NPC names (with role, home and traits); edges carry `kind` and `affinity`."""
    graph = nx.Graph(world=spec.id)
    for npc in spec.npcs:
        graph.add_node(npc.name, role=npc.role, home=npc.home, **{
            f"trait_{k}": v for k, v in zip(("bravery", "aggression", "empathy", "sociability", "diligence"),
                                             npc.traits.as_tuple(), strict=True)
        })
    for rel in spec.relationships:
        graph.add_edge(rel.a, rel.b, kind=rel.kind, affinity=float(rel.affinity))
    return graph


def relation_matrices(graph: nx.Graph, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Dense (N, N) affinity (float32, symmetric, 0 on no tie) and relation kind (int8, -1 on no tie)."""
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    affinity = np.zeros((n, n), dtype=np.float32)
    kind = np.full((n, n), NO_RELATION, dtype=np.int8)
    for a, b, data in graph.edges(data=True):
        i, j = index[a], index[b]
        affinity[i, j] = affinity[j, i] = data["affinity"]
        kind[i, j] = kind[j, i] = RELATION_KINDS.index(data["kind"])
    return affinity, kind

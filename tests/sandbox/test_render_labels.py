"""Name tags never cover place names, the legend or each other; emotion icons are readable and have a key."""

from __future__ import annotations

import itertools

import numpy as np


def _crowd_at_the_square(app) -> None:
    """Everyone at the square, where the place labels are: the worst case for tags."""
    s = app.model.sim.state
    square = app.model.spec.location("Square")
    n = app.model.sim.N
    s.pos[0, :n] = np.array([square.x, square.y], np.float32) + np.linspace(-1.5, 1.5, n, dtype=np.float32)[:, None]
    app.ui.show_names = True


def test_name_tags_avoid_place_labels_and_each_other(make_app):
    app = make_app(size=(1024, 700))
    _crowd_at_the_square(app)
    app.draw()
    r = app.renderer
    tags = r.label_rects
    assert tags and r.place_labels
    for a, b in itertools.combinations(tags, 2):
        assert not a.colliderect(b), (a, b)
    for tag in tags:
        assert tag.inflate(-4, 0).collidelist(r.place_labels) < 0, tag


def test_emotion_icons_are_big_enough_and_have_a_legend(make_app):
    from sandbox.render import ICON_BASE

    app = make_app()
    app.draw()
    assert app.renderer.legend_rect is None  # nobody feels anything yet: no key to explain
    app.model.sim.state.grief[0, 0] = 1.0
    app.draw()
    legend = app.renderer.legend_rect
    assert legend is not None and app.renderer.map_rect.contains(legend)
    assert ICON_BASE + 4 * app.renderer.sprite_factor >= 20
    for tag in app.renderer.label_rects:
        assert not tag.colliderect(legend)

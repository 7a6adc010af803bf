"""The pygame designer sandbox (`village play`): renders the village and forwards input; no game logic.

Modules (none initialises pygame at import; only app, render and sprites import it):
    app        SandboxApp: input -> fixed-step ticks -> draw
    ui         UIState (what the app edits and the renderer draws) and the key table HELP
    model      SandboxModel: one village, its policy, the command log, the world editor (no pygame)
    clock      FixedStepClock: wall time -> whole ticks (accumulator, capped)
    render     Renderer: map, NPCs, emotions, social graph, day/night tint, inspector, feed, overlays
    inspector  what the inspector shows for one NPC (traits, needs, emotions, knowledge, ties, reactions)
    feed       the event log and news messages as readable lines
    editor     world edits WorldSpec -> WorldSpec (add/remove NPCs, traits, roles, relationships)
    session    recorded sessions and command scripts (TOML/JSON), state digests
    policy     --policy default|mappo|scripted|random|PATH, resolved by npc_brains.load_policy
    pixelart   the sprites as code; assets/make_sprites.py writes them to sandbox/data/sprites/
    sprites    SpriteBank: the PNGs, or the same art drawn in memory
Docs: docs/sandbox.md.
"""

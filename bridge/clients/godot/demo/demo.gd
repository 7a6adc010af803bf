# The village as sprites: click an NPC to have the player kill it; the others react (the label under each
# NPC shows its reaction, its target and its bark). Needs `village serve --ws 127.0.0.1:8765` running.
# Headless (tests): VILLAGE_WS_URL, VILLAGE_DEMO_AUTOKILL=<name> kills that NPC once the session is up,
# VILLAGE_DEMO_QUIT_S=<seconds> quits; every reaction is also printed as a DEMO line.
extends Node2D

const Bridge = preload("res://addons/village_bridge/village_bridge.gd")
const SCALE = 20.0  # pixels per world unit
const COLORS = {"none": Color(0.8, 0.8, 0.8), "idle": Color(0.8, 0.8, 0.8), "mourning": Color(0.4, 0.5, 1.0),
				"revenge": Color(1.0, 0.25, 0.2), "fear": Color(1.0, 0.9, 0.2), "consoling": Color(0.5, 1.0, 0.6),
				"alarm": Color(1.0, 0.6, 0.1), "gloating": Color(0.8, 0.3, 0.9)}

export var url = "ws://127.0.0.1:8765"
export var world_file = ""  # a world TOML; empty: the repository's worlds/data/village-v1.toml
export var step_every_s = 0.3

var bridge
var session = ""
var npcs = {}  # name -> {"pos": Vector2, "dest": Vector2, "alive": bool, "reaction": String, "label": Label}
var _state_id = -1
var _step_pending = false
var _since_step = 0.0
var _autokill = ""
var _quit_at = -1.0


func _ready() -> void:
	bridge = Bridge.new()
	add_child(bridge)
	if OS.get_environment("VILLAGE_WS_URL") != "":
		url = OS.get_environment("VILLAGE_WS_URL")
	_autokill = OS.get_environment("VILLAGE_DEMO_AUTOKILL")
	if OS.get_environment("VILLAGE_DEMO_QUIT_S") != "":
		_quit_at = OS.get_ticks_msec() / 1000.0 + float(OS.get_environment("VILLAGE_DEMO_QUIT_S"))
	bridge.url = url
	bridge.connect("connected", self, "_on_connected")
	bridge.connect("session_created", self, "_on_session")
	bridge.connect("reply_received", self, "_on_reply")
	bridge.connect("reactions_received", self, "_on_reactions")
	bridge.connect("request_failed", self, "_on_failed")
	bridge.connect_to_bridge()


func _on_connected(info: Dictionary) -> void:
	var path = world_file
	if path == "":
		path = ProjectSettings.globalize_path("res://").plus_file("../../../worlds/data/village-v1.toml")
	var f = File.new()
	if f.open(path, File.READ) != OK:
		push_error("demo: cannot read the world file " + path)
		return
	bridge.session_create(f.get_as_text(), 1, true)
	f.close()
	print("DEMO connected: policy %s, %d actions" % [info.policy, info.n_actions])


func _on_session(_id: int, sid: String, names: Array, _actors: Array) -> void:
	session = sid
	for name in names:
		var label = Label.new()
		add_child(label)
		npcs[name] = {"pos": Vector2(), "dest": Vector2(), "alive": true, "reaction": "none", "label": label}
	_state_id = bridge.request("session.state", {"session": sid})


func _on_reply(id: int, reply: Dictionary) -> void:
	if id != _state_id or not reply.get("ok", false):
		return
	for row in reply.npcs:
		var npc = npcs[row.npc]
		npc.pos = Vector2(row.pos[0], row.pos[1])
		npc.dest = npc.pos
		npc.alive = row.alive
		npc.label.text = row.npc
	update()
	if _autokill != "" and npcs.has(_autokill):
		kill(_autokill)
		_autokill = ""


func kill(name: String) -> void:
	if session == "" or not npcs[name].alive:
		return
	npcs[name].alive = false
	npcs[name].label.text = name + " (dead)"
	bridge.session_event(session, "death", name, "player")  # witnesses: whoever is within sight
	print("DEMO the player kills " + name)
	update()


func _unhandled_input(event: InputEvent) -> void:
	if event is InputEventMouseButton and event.pressed and event.button_index == BUTTON_LEFT:
		for name in npcs:
			if npcs[name].alive and (npcs[name].pos * SCALE).distance_to(event.position) < 12.0:
				kill(name)
				return


func _process(delta: float) -> void:
	if _quit_at > 0.0 and OS.get_ticks_msec() / 1000.0 > _quit_at:
		get_tree().quit(0)
	_since_step += delta
	if session != "" and not _step_pending and _since_step >= step_every_s:
		_since_step = 0.0
		_step_pending = true
		bridge.session_step(session)
	for name in npcs:  # the bodies live here, in the game: walk a little toward where each mind wants to go
		var npc = npcs[name]
		if npc.alive:
			npc.pos = npc.pos.move_toward(npc.dest, delta * 2.0)
		npc.label.rect_position = npc.pos * SCALE + Vector2(-20, 10)
	update()


func _on_reactions(_sid: String, tick: int, reactions: Array) -> void:
	_step_pending = false
	for r in reactions:
		var npc = npcs.get(r.npc)
		if npc == null or not npc.alive:
			continue
		npc.reaction = r.reaction
		if r.get("dest") != null:
			npc.dest = Vector2(r.dest[0], r.dest[1])
		var text = r.npc
		if not r.reaction in ["none", "idle"]:
			text += "\n%s -> %s" % [r.reaction, str(r.target)]
			if r.has("bark"):
				text += "\n\"%s\"" % r.bark
				print("DEMO tick %d: %s %s %s \"%s\"" % [tick, r.npc, r.reaction, str(r.target), r.bark])
		npc.label.text = text


func _on_failed(_id: int, op: String, code: String, message: String) -> void:
	_step_pending = false
	push_warning("village bridge: %s failed: %s %s" % [op, code, message])


func _draw() -> void:
	for name in npcs:
		var npc = npcs[name]
		var color = COLORS.get(npc.reaction, Color.white) if npc.alive else Color(0.3, 0.3, 0.3)
		draw_circle(npc.pos * SCALE, 8.0, color)

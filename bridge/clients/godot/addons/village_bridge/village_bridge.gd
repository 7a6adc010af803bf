# VillageBridge: a node that talks to `village serve --ws HOST:PORT` (docs/protocol.md) over a WebSocket,
# msgpack in binary frames. Add it to a scene, set `url` (and `token` if the server wants one), call
# `connect_to_bridge()`, then `act()` / `session_create()` / `session_event()` / `session_step()`; answers
# come back as signals. Requests time out after `request_timeout_s`; a dropped connection is reopened with
# exponential backoff and the unanswered requests are sent again with the same id and bytes (the server
# answers a repeated session.step from its replay cache, so a step is never applied twice).
extends Node

const MsgPack = preload("res://addons/village_bridge/msgpack.gd")
const PROTOCOL_VERSION = 1

signal connected(info)  # after a hello whose protocol version matches; info = hello's reply
signal disconnected()
signal reply_received(id, reply)  # every reply, ok or not
signal request_failed(id, op, code, message)  # an error reply, a timeout, or a version mismatch
signal act_received(id, actions)  # PoolIntArray, one flat action per row
signal session_created(id, session, npcs, actors)
signal reactions_received(session, tick, reactions)  # reactions: Array of {npc, action, target, reaction, ...}

export var url = "ws://127.0.0.1:8765"
export var token = ""  # sent as "Authorization: Bearer <token>"
export var client_name = "village-bridge-godot"
export var request_timeout_s = 5.0
export var reconnect_min_s = 0.25
export var reconnect_max_s = 8.0
export var auto_reconnect = true

var info = {}  # hello's reply: obs_dim, n_actions, action_names, reaction_names, limits, ...
var is_ready = false  # connected and hello done

var _ws = WebSocketClient.new()
var _pending = {}  # id -> {"op", "bytes", "deadline", "session"}
var _next_id = 1  # set from a random base in _init (see there)
var _backoff = 0.0
var _retry_at = -1.0
var _want_open = false
var _open = false
var _hello_id = -1
var _inbox = []  # replies decoded during the socket's poll, dispatched after it returns
var _in_socket_poll = false


func _init() -> void:
	# request ids from a random base below 2^51, not from 1: the server remembers creates per connection, and
	# two games (or a restarted one) must never send the same first request
	var rng = RandomNumberGenerator.new()
	rng.randomize()
	_next_id = ((rng.randi() & 0x7FFFF) << 32) | rng.randi()


func _ready() -> void:
	_ws.connect("connection_established", self, "_on_open")
	_ws.connect("connection_closed", self, "_on_closed")
	_ws.connect("connection_error", self, "_on_error")
	_ws.connect("data_received", self, "_on_data")


func connect_to_bridge() -> int:
	_want_open = true
	_backoff = reconnect_min_s
	return _dial()


func close() -> void:
	_want_open = false
	_ws.disconnect_from_host(1000, "bye")


func _dial() -> int:
	var headers = PoolStringArray()
	if token != "":
		headers.append("Authorization: Bearer " + token)
	var err = _ws.connect_to_url(url, PoolStringArray(), false, headers)
	if err != OK:
		_schedule_retry()
	return err


func _now() -> float:
	return OS.get_ticks_msec() / 1000.0


func _process(_delta: float) -> void:
	poll()


# Pump the socket, deliver replies, expire timed-out requests, reconnect. _process calls it every frame;
# call it yourself from a loop that does not return to the engine.
func poll() -> void:
	if _in_socket_poll:
		return  # called from a signal handler inside the socket's poll: the outer poll goes on
	var status = _ws.get_connection_status()
	if status != WebSocketClient.CONNECTION_DISCONNECTED:
		_in_socket_poll = true
		_ws.poll()
		_in_socket_poll = false
	# signals fire out here, never inside the socket's poll: a handler may send or poll again safely
	while not _inbox.empty():
		_dispatch(_inbox.pop_front())
	var now = _now()
	if _retry_at >= 0.0 and now >= _retry_at:
		_retry_at = -1.0
		_dial()
	for id in _pending.keys():
		var p = _pending[id]
		if now > p.deadline:
			_pending.erase(id)
			emit_signal("request_failed", id, p.op, "timeout", "no reply within %.1f s" % request_timeout_s)


func _schedule_retry() -> void:
	if not (_want_open and auto_reconnect):
		return
	_retry_at = _now() + _backoff
	_backoff = min(_backoff * 2.0, reconnect_max_s)


func _on_open(_protocol: String) -> void:
	_open = true
	_backoff = reconnect_min_s
	_ws.get_peer(1).set_write_mode(WebSocketPeer.WRITE_MODE_BINARY)
	_hello_id = _send("hello", {"client": client_name})
	for id in _pending.keys():  # what the last connection left unanswered, same id and bytes
		if id != _hello_id:
			_ws.get_peer(1).put_packet(_pending[id].bytes)


func _on_closed(_was_clean: bool) -> void:
	_lost()


func _on_error() -> void:
	_lost()


func _lost() -> void:
	var was_ready = is_ready
	_open = false
	is_ready = false
	_pending.erase(_hello_id)
	if was_ready:
		emit_signal("disconnected")
	_schedule_retry()


# Send any op of the protocol; returns the request id (replies arrive through the signals).
func request(op: String, fields: Dictionary = {}) -> int:
	return _send(op, fields)


func _send(op: String, fields: Dictionary) -> int:
	var id = _next_id
	_next_id += 1
	var message = {"v": PROTOCOL_VERSION, "id": id, "op": op}
	for key in fields:
		if fields[key] != null:
			message[key] = fields[key]
	var bytes = MsgPack.encode(message)
	_pending[id] = {"op": op, "bytes": bytes, "deadline": _now() + request_timeout_s,
					"session": fields.get("session", "")}
	if _open:
		_ws.get_peer(1).put_packet(bytes)
	return id


# rows x obs_dim observations (row-major, float32); mask: optional Array of bools, rows x n_actions;
# temperature: sample from softmax(logits / T) instead of the server's temperature (null: the server's);
# personality_strength: play each NPC's learned personality S times as strongly (0 to 10, 1 as trained; null: the
# server's strength)
func act(obs: PoolRealArray, rows: int, mask = null, deterministic = false, temperature = null,
		personality_strength = null) -> int:
	var fields = {"obs": MsgPack.f32_array(obs, [rows, obs.size() / max(rows, 1)])}
	if mask != null:
		fields["mask"] = MsgPack.bool_array(mask, [rows, mask.size() / max(rows, 1)])
	if deterministic:
		fields["deterministic"] = true
	if temperature != null:
		fields["temperature"] = float(temperature)
	if personality_strength != null:
		fields["personality_strength"] = float(personality_strength)
	return _send("act", fields)


# temperature: the session's NPCs sample from softmax(logits / T) (null: the server's temperature);
# personality_strength: they play their learned personalities S times as strongly (0 to 10, 1 as trained; null: the
# server's strength)
func session_create(world_toml: String, world_seed = 0, deterministic = false, temperature = null,
		personality_strength = null) -> int:
	var fields = {"world": world_toml, "seed": world_seed, "deterministic": deterministic}
	if temperature != null:
		fields["temperature"] = float(temperature)
	if personality_strength != null:
		fields["personality_strength"] = float(personality_strength)
	return _send("session.create", fields)


func session_create_npcs(npcs: Array, relationships: Array, actors: Array, options: Dictionary = {}) -> int:
	var fields = {"npcs": npcs, "relationships": relationships, "actors": actors}
	for key in options:
		fields[key] = options[key]
	return _send("session.create", fields)


func session_event(session: String, kind: String, target, actor = null, witnesses = null, position = null) -> int:
	return _send("session.event", {"session": session, "type": kind, "target": target, "actor": actor,
								   "witnesses": witnesses, "position": position})


# positions: optional PoolRealArray of x, y per entity (NPCs, then actors) from the game's own bodies
func session_step(session: String, positions = null) -> int:
	var fields = {"session": session}
	if positions != null:
		fields["pos"] = MsgPack.f32_array(positions, [positions.size() / 2, 2])
	return _send("session.step", fields)


func session_close(session: String) -> int:
	return _send("session.close", {"session": session})


func _on_data() -> void:
	var peer = _ws.get_peer(1)
	while peer.get_available_packet_count() > 0:
		var decoded = MsgPack.decode(peer.get_packet())
		if not decoded.ok or typeof(decoded.value) != TYPE_DICTIONARY:
			push_warning("village bridge: undecodable reply: " + decoded.error)
			continue
		_inbox.append(decoded.value)


func _dispatch(reply: Dictionary) -> void:
	var id = reply.get("id")
	var p = _pending.get(id)
	if p == null:
		return  # a reply to a request that has timed out already
	_pending.erase(id)
	emit_signal("reply_received", id, reply)
	if not reply.get("ok", false):
		var err = reply.get("error", {})
		emit_signal("request_failed", id, p.op, err.get("code", "?"), err.get("message", ""))
		return
	match p.op:
		"hello":
			if reply.get("protocol") != PROTOCOL_VERSION:
				emit_signal("request_failed", id, "hello", "unsupported_version",
							"the server speaks protocol %s, this add-on %d" % [str(reply.get("protocol")), PROTOCOL_VERSION])
				close()
				return
			info = reply
			is_ready = true
			emit_signal("connected", info)
		"act":
			emit_signal("act_received", id, MsgPack.read_array(reply.actions))
		"session.create":
			emit_signal("session_created", id, reply.session, reply.npcs, reply.actors)
		"session.step":
			emit_signal("reactions_received", p.session, reply.tick, reply.reactions)

# Headless test of the add-on: godot3-server --path bridge/clients/godot -s res://tests/run_tests.gd
# Environment: VILLAGE_CODEC_CASES (a file of "name hex" lines, msgpack-python's encoding of each case
# below), VILLAGE_WS_URL (a running `village serve --ws`), VILLAGE_WORLD (a world file), VILLAGE_BENCH_N.
# Prints CODEC_ENC / CODEC_DEC / OK / FAIL / BENCH lines and quits with 0 only when every check held.
extends SceneTree

const MsgPack = preload("res://addons/village_bridge/msgpack.gd")
const Bridge = preload("res://addons/village_bridge/village_bridge.gd")

var bridge
var failures = 0
var started_ms = 0


func _initialize() -> void:
	started_ms = OS.get_ticks_msec()
	bridge = Bridge.new()
	root.add_child(bridge)
	call_deferred("_run")


func _idle(_delta: float) -> bool:
	# a bound, not a speed check: a loaded CI machine may take minutes (VILLAGE_WATCHDOG_S overrides it)
	var limit_s := int(OS.get_environment("VILLAGE_WATCHDOG_S")) if OS.has_environment("VILLAGE_WATCHDOG_S") else 240
	if OS.get_ticks_msec() - started_ms > limit_s * 1000:
		print("FAIL watchdog: the test did not finish within %d s" % limit_s)
		quit(1)
	return false


func check(ok: bool, what: String) -> void:
	if ok:
		print("OK " + what)
	else:
		failures += 1
		print("FAIL " + what)


func codec_cases() -> Dictionary:
	var str8 = ""
	for _i in range(40):
		str8 += "a"
	var str16 = ""
	for _i in range(200):
		str16 += "é"
	var bin16 = PoolByteArray()
	for i in range(300):
		bin16.append(i % 256)
	var array16 = []
	for i in range(20):
		array16.append(i)
	return {
		"u127": 127, "u128": 128, "u255": 255, "u256": 256, "u32767": 32767, "u32768": 32768,
		"u65535": 65535, "u65536": 65536, "u2^31": 2147483648, "u2^32": 4294967296, "u2^62": 4611686018427387904,
		"n-1": -1, "n-32": -32, "n-33": -33, "n-128": -128, "n-129": -129, "n-32769": -32769,
		"n-2^31-1": -2147483649, "f64": 0.1, "f64big": -1.5e300, "f64int": 2.0, "nil": null, "true": true,
		"false": false, "str_empty": "", "str_fix": "hi", "str8": str8, "str16": str16, "bin8": PoolByteArray([0, 1, 2, 255]),
		"bin16": bin16, "array16": array16,
		"nested": {"a": [1, -1, {"b": null, "c": true}], "d": 2.5, "e": {"f": [[], {}]}},
		"f32array": MsgPack.f32_array(PoolRealArray([0.5, -2.0, 3.25]), [3]),
	}


func deep_equal(a, b) -> bool:
	if typeof(a) != typeof(b):
		return false
	match typeof(a):
		TYPE_ARRAY:
			if a.size() != b.size():
				return false
			for i in range(a.size()):
				if not deep_equal(a[i], b[i]):
					return false
			return true
		TYPE_DICTIONARY:
			if a.size() != b.size():
				return false
			for key in a:
				if not b.has(key) or not deep_equal(a[key], b[key]):
					return false
			return true
	return a == b


func test_codec() -> void:
	var path = OS.get_environment("VILLAGE_CODEC_CASES")
	var expected = {}
	var f = File.new()
	if path != "" and f.open(path, File.READ) == OK:
		while not f.eof_reached():
			var line = f.get_line().strip_edges()
			if line != "":
				var parts = line.split(" ")
				expected[parts[0]] = parts[1]
		f.close()
	var cases = codec_cases()
	for name in cases:
		var enc = MsgPack.encode(cases[name])
		print("CODEC_ENC %s %s" % [name, enc.hex_encode()])
		if expected.has(name):
			var bytes = _unhex(expected[name])
			var dec = MsgPack.decode(bytes)
			var same = dec.ok and deep_equal(dec.value, cases[name])
			print("CODEC_DEC %s %s" % [name, "ok" if same else "differs: " + dec.error + " " + str(dec.value)])
	# malformed input is an error, never a crash
	for bad in ["c1", "dc0005", "a5616263", "d9", "cb3ff0", "c7010000", "9191919191"]:
		var dec = MsgPack.decode(_unhex(bad))
		check(not dec.ok and dec.error != "", "codec refuses %s (%s)" % [bad, dec.error])
	var ints = MsgPack.read_array({"dtype": "int32", "shape": [2], "data": _unhex("01000000ffffffff")})
	check(typeof(ints) == TYPE_INT_ARRAY and ints.size() == 2 and ints[0] == 1 and ints[1] == -1, "int32 array read")


func _unhex(text: String) -> PoolByteArray:
	var out = PoolByteArray()
	for i in range(0, text.length(), 2):
		out.append(("0x" + text.substr(i, 2)).hex_to_int())
	return out


func wait_reply(id: int):
	while true:
		var got = yield(bridge, "reply_received")
		if got[0] == id:
			return got[1]


func call_op(id: int):
	var reply = yield(wait_reply(id), "completed")
	yield(self, "idle_frame")  # carry on in a frame of our own, not inside the signal that brought the reply
	return reply


func _run() -> void:
	test_codec()
	var url = OS.get_environment("VILLAGE_WS_URL")
	if url == "":
		print("SKIP network: VILLAGE_WS_URL is not set")
		quit(1 if failures else 0)
		return
	bridge.url = url
	bridge.token = OS.get_environment("VILLAGE_WS_TOKEN")
	bridge.connect_to_bridge()
	var info = yield(bridge, "connected")
	check(info.protocol == 1 and info.obs_dim > 0 and info.n_actions > 0, "hello: protocol %d, obs_dim %d, %d actions" % [info.protocol, info.obs_dim, info.n_actions])

	# act(16), and its round trip from GDScript (send, then poll until the reply has been decoded)
	var obs = PoolRealArray()
	obs.resize(16 * info.obs_dim)
	for i in range(obs.size()):
		obs[i] = 0.0
	var id = bridge.act(obs, 16, null, true)
	var reply = yield(call_op(id), "completed")
	var actions = MsgPack.read_array(reply.get("actions"))
	check(reply.ok and actions != null and actions.size() == 16, "act(16): %s" % str(actions))
	# a request's own sampling temperature: the trained policy samples at it; 0 is out of range
	reply = yield(call_op(bridge.act(obs, 16, null, false, 0.5)), "completed")
	check(reply.ok and MsgPack.read_array(reply.get("actions")).size() == 16, "act at temperature 0.5")
	reply = yield(call_op(bridge.act(obs, 16, null, false, 0)), "completed")
	check(not reply.ok and reply.error.code == "bad_request", "act at temperature 0 is a bad_request")
	# a request's own personality strength: the trained policy plays its personalities at it; 0 to 10 is the range
	reply = yield(call_op(bridge.act(obs, 16, null, false, null, 2)), "completed")
	check(reply.ok and MsgPack.read_array(reply.get("actions")).size() == 16, "act at personality strength 2")
	reply = yield(call_op(bridge.act(obs, 16, null, false, null, 11)), "completed")
	check(not reply.ok and reply.error.code == "bad_request", "act at personality strength 11 is a bad_request")
	var n = int(OS.get_environment("VILLAGE_BENCH_N")) if OS.get_environment("VILLAGE_BENCH_N") != "" else 200
	var times = []
	for _i in range(n):
		var t0 = OS.get_ticks_usec()
		var rid = bridge.act(obs, 16, null, true)
		while bridge._pending.has(rid):
			bridge.poll()
		times.append(OS.get_ticks_usec() - t0)
	times.sort()
	print("BENCH godot_act16_us n=%d p50=%d p99=%d" % [n, times[n / 2], times[int(n * 0.99)]])

	# a session on village-v1: a death pushed with witnesses, steps until mourning and revenge come back
	var f = File.new()
	f.open(OS.get_environment("VILLAGE_WORLD"), File.READ)
	var world = f.get_as_text()
	f.close()
	reply = yield(call_op(bridge.session_create(world, 1, true, null, 11)), "completed")
	check(not reply.ok and reply.error.code == "bad_request", "session.create at personality strength 11 is a bad_request")
	id = bridge.session_create(world, 1, true)
	reply = yield(call_op(id), "completed")
	check(reply.ok and reply.npcs.size() == 12, "session.create: %d NPCs, actors %s" % [reply.get("npcs", []).size(), str(reply.get("actors"))])
	var sid = reply.session
	var witnesses = ["Bren", "Cai", "Dora", "Edric", "Fenna"]
	# the player kills Alda where he stands (village-v1 puts him at 26, 24), so the body lies by the killer
	id = bridge.session_event(sid, "death", "Alda", "player", witnesses, [25.0, 23.0])
	reply = yield(call_op(id), "completed")
	check(reply.ok and reply.event == 1, "session.event death of Alda by the player at (25, 23), witnesses %s" % str(witnesses))
	var mourned = false
	var revenged = false
	var barks = 0
	for _tick in range(12):
		id = bridge.session_step(sid)
		reply = yield(call_op(id), "completed")
		if not reply.ok:
			check(false, "session.step: " + str(reply.error))
			break
		for r in reply.reactions:
			if r.reaction == "mourning":
				mourned = true
				check(r.target == "Alda", "tick %d: %s mourns, target %s" % [reply.tick, r.npc, r.target])
			elif r.reaction == "revenge":
				revenged = true
				check(r.target == "player", "tick %d: %s seeks revenge, target %s" % [reply.tick, r.npc, r.target])
			if r.has("bark"):
				barks += 1
		if mourned and revenged:
			break
	check(mourned, "somebody mourned Alda")
	check(revenged, "somebody sought revenge on the player")
	check(barks > 0, "reactions came with barks (%d)" % barks)
	id = bridge.session_close(sid)
	reply = yield(call_op(id), "completed")
	check(reply.ok, "session.close")
	id = bridge.request("session.step", {"session": sid})
	reply = yield(call_op(id), "completed")
	check(not reply.ok and reply.error.code == "not_found", "a closed session is not_found")
	print("DONE failures=%d" % failures)
	quit(1 if failures else 0)

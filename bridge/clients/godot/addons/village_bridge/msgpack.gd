# MessagePack for GDScript 3 (Godot 3.2+), the subset the village bridge speaks: nil, bool, int (every
# width, always the smallest encoding, as msgpack-python writes it), float (float64 out; float32 and
# float64 in), str (fixstr, str8/16/32, UTF-8), bin (PoolByteArray), arrays and maps, nested.
# Extension types are refused. Arrays of the bridge protocol ({dtype, shape, data}) are built and read
# with the helpers at the end (little-endian, as the protocol says).
extends Reference

const MAX_DEPTH = 64


static func encode(value) -> PoolByteArray:
	var buf = StreamPeerBuffer.new()
	buf.big_endian = true
	_write(buf, value)
	return buf.data_array


# -> {"ok": bool, "value": the decoded value, "error": String}
static func decode(bytes: PoolByteArray) -> Dictionary:
	var buf = StreamPeerBuffer.new()
	buf.big_endian = true
	buf.data_array = bytes
	var state = {"error": ""}
	var value = _read(buf, state, 0)
	if state.error == "" and buf.get_available_bytes() > 0:
		state.error = "%d trailing bytes after the value" % buf.get_available_bytes()
	if state.error != "":
		return {"ok": false, "value": null, "error": state.error}
	return {"ok": true, "value": value, "error": ""}


static func _write(buf: StreamPeerBuffer, value) -> void:
	match typeof(value):
		TYPE_NIL:
			buf.put_u8(0xc0)
		TYPE_BOOL:
			buf.put_u8(0xc3 if value else 0xc2)
		TYPE_INT:
			_put_int(buf, value)
		TYPE_REAL:
			buf.put_u8(0xcb)
			buf.put_double(value)
		TYPE_STRING:
			var b = value.to_utf8()
			var n = b.size()
			if n < 32:
				buf.put_u8(0xa0 | n)
			elif n < 256:
				buf.put_u8(0xd9)
				buf.put_u8(n)
			elif n < 65536:
				buf.put_u8(0xda)
				buf.put_u16(n)
			else:
				buf.put_u8(0xdb)
				buf.put_u32(n)
			buf.put_data(b)
		TYPE_RAW_ARRAY:
			var n = value.size()
			if n < 256:
				buf.put_u8(0xc4)
				buf.put_u8(n)
			elif n < 65536:
				buf.put_u8(0xc5)
				buf.put_u16(n)
			else:
				buf.put_u8(0xc6)
				buf.put_u32(n)
			buf.put_data(value)
		TYPE_ARRAY, TYPE_INT_ARRAY, TYPE_REAL_ARRAY, TYPE_STRING_ARRAY:
			var n = value.size()
			if n < 16:
				buf.put_u8(0x90 | n)
			elif n < 65536:
				buf.put_u8(0xdc)
				buf.put_u16(n)
			else:
				buf.put_u8(0xdd)
				buf.put_u32(n)
			for item in value:
				_write(buf, item)
		TYPE_DICTIONARY:
			var n = value.size()
			if n < 16:
				buf.put_u8(0x80 | n)
			elif n < 65536:
				buf.put_u8(0xde)
				buf.put_u16(n)
			else:
				buf.put_u8(0xdf)
				buf.put_u32(n)
			for key in value:
				_write(buf, key)
				_write(buf, value[key])
		_:
			push_error("msgpack: cannot encode a value of type %d; sent as nil" % typeof(value))
			buf.put_u8(0xc0)


static func _put_int(buf: StreamPeerBuffer, value: int) -> void:
	if value >= 0:
		if value < 128:
			buf.put_u8(value)
		elif value < 256:
			buf.put_u8(0xcc)
			buf.put_u8(value)
		elif value < 65536:
			buf.put_u8(0xcd)
			buf.put_u16(value)
		elif value < 4294967296:
			buf.put_u8(0xce)
			buf.put_u32(value)
		else:
			buf.put_u8(0xcf)
			buf.put_u64(value)
	elif value >= -32:
		buf.put_8(value)
	elif value >= -128:
		buf.put_u8(0xd0)
		buf.put_8(value)
	elif value >= -32768:
		buf.put_u8(0xd1)
		buf.put_16(value)
	elif value >= -2147483648:
		buf.put_u8(0xd2)
		buf.put_32(value)
	else:
		buf.put_u8(0xd3)
		buf.put_64(value)


static func _need(buf: StreamPeerBuffer, state: Dictionary, n: int) -> bool:
	if state.error != "":
		return false
	if buf.get_available_bytes() < n:
		state.error = "truncated: %d bytes needed at offset %d, %d left" % [n, buf.get_position(), buf.get_available_bytes()]
		return false
	return true


static func _read(buf: StreamPeerBuffer, state: Dictionary, depth: int):
	if depth > MAX_DEPTH:
		state.error = "nested deeper than %d" % MAX_DEPTH
		return null
	if not _need(buf, state, 1):
		return null
	var b = buf.get_u8()
	if b <= 0x7f:
		return b
	if b >= 0xe0:
		return b - 256
	if (b & 0xf0) == 0x80:
		return _get_map(buf, state, b & 0x0f, depth)
	if (b & 0xf0) == 0x90:
		return _get_array(buf, state, b & 0x0f, depth)
	if (b & 0xe0) == 0xa0:
		return _get_str(buf, state, b & 0x1f)
	match b:
		0xc0:
			return null
		0xc2:
			return false
		0xc3:
			return true
		0xc4, 0xc5, 0xc6:
			var n = _get_len(buf, state, b - 0xc4)
			if not _need(buf, state, n):
				return null
			return buf.get_data(n)[1] if n > 0 else PoolByteArray()
		0xca:
			if _need(buf, state, 4):
				return buf.get_float()
		0xcb:
			if _need(buf, state, 8):
				return buf.get_double()
		0xcc:
			if _need(buf, state, 1):
				return buf.get_u8()
		0xcd:
			if _need(buf, state, 2):
				return buf.get_u16()
		0xce:
			if _need(buf, state, 4):
				return buf.get_u32()
		0xcf:
			if _need(buf, state, 8):
				return buf.get_u64()  # above 2^63 it wraps: GDScript's int is int64
		0xd0:
			if _need(buf, state, 1):
				return buf.get_8()
		0xd1:
			if _need(buf, state, 2):
				return buf.get_16()
		0xd2:
			if _need(buf, state, 4):
				return buf.get_32()
		0xd3:
			if _need(buf, state, 8):
				return buf.get_64()
		0xd9, 0xda, 0xdb:
			return _get_str(buf, state, _get_len(buf, state, b - 0xd9))
		0xdc, 0xdd:
			return _get_array(buf, state, _get_len(buf, state, b - 0xdb), depth)
		0xde, 0xdf:
			return _get_map(buf, state, _get_len(buf, state, b - 0xdd), depth)
		_:
			state.error = "unsupported msgpack type byte 0x%02x at offset %d" % [b, buf.get_position() - 1]
	return null


# width: 0 -> u8, 1 -> u16, 2 -> u32
static func _get_len(buf: StreamPeerBuffer, state: Dictionary, width: int) -> int:
	var size = [1, 2, 4][width]
	if not _need(buf, state, size):
		return 0
	if width == 0:
		return buf.get_u8()
	if width == 1:
		return buf.get_u16()
	return buf.get_u32()


static func _get_str(buf: StreamPeerBuffer, state: Dictionary, n: int):
	if not _need(buf, state, n):
		return null
	if n == 0:
		return ""
	return buf.get_data(n)[1].get_string_from_utf8()


static func _get_array(buf: StreamPeerBuffer, state: Dictionary, n: int, depth: int):
	if state.error != "" or not _need(buf, state, n):  # every element takes at least a byte
		return null
	var out = []
	out.resize(n)
	for i in range(n):
		out[i] = _read(buf, state, depth + 1)
		if state.error != "":
			return null
	return out


static func _get_map(buf: StreamPeerBuffer, state: Dictionary, n: int, depth: int):
	if state.error != "" or not _need(buf, state, 2 * n):
		return null
	var out = {}
	for _i in range(n):
		var key = _read(buf, state, depth + 1)
		var value = _read(buf, state, depth + 1)
		if state.error != "":
			return null
		out[key] = value
	return out


# ------------------------------------------------------------------------------------ protocol arrays
# Godot 3's PoolRealArray holds float32 and PoolIntArray int32, and var2bytes writes them as an 8-byte
# header (type, count) then little-endian elements: the protocol's layout, converted without a loop.

static func f32_array(values: PoolRealArray, shape: Array) -> Dictionary:
	return {"dtype": "float32", "shape": shape, "data": var2bytes(values).subarray(8, 8 + 4 * values.size() - 1) if values.size() > 0 else PoolByteArray()}


static func bool_array(values: Array, shape: Array) -> Dictionary:
	var data = PoolByteArray()
	data.resize(values.size())
	for i in range(values.size()):
		data[i] = 1 if values[i] else 0
	return {"dtype": "bool", "shape": shape, "data": data}


# An int32 or float32 array map -> PoolIntArray / PoolRealArray (null if it is something else).
static func read_array(array):
	if typeof(array) != TYPE_DICTIONARY or not array.has("dtype") or typeof(array.get("data")) != TYPE_RAW_ARRAY:
		return null
	var data: PoolByteArray = array.data
	var kind = {"int32": TYPE_INT_ARRAY, "float32": TYPE_REAL_ARRAY}.get(array.dtype, -1)
	if kind == -1 or data.size() % 4 != 0:
		return null
	var head = StreamPeerBuffer.new()
	head.big_endian = false
	head.put_32(kind)
	head.put_32(data.size() / 4)
	var bytes = head.data_array
	bytes.append_array(data)
	return bytes2var(bytes)

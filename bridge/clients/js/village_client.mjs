// village_client.mjs - JavaScript/TypeScript client of the village NPC bridge (ZeroMQ + msgpack).
//
//   npm install            (in bridge/clients/js: zeromq 6 + @msgpack/msgpack 3)
//   import { VillageBridgeClient } from "./village_client.mjs";
//   const bridge = new VillageBridgeClient("tcp://127.0.0.1:5555");
//   const info = await bridge.hello();
//
// Node.js only (the npm `zeromq` package is a native addon); a browser game talks to a small Node relay.
// Types: village_client.d.ts. Protocol: docs/protocol.md.
//
// Lazy Pirate: a Request socket with a receive timeout per attempt; on silence the same request (same id,
// same bytes) is re-sent on the same socket, `retries` times (relaxed: a REQ socket may send again without
// a reply; correlate: a late reply to an earlier attempt is dropped; libzmq reconnects to a restarted
// server by itself). The server answers a retried session.create/event/step from its replay cache, and
// remembers creates per connection; request ids start from a random base, so two games (or a restarted
// one) never share a session. One request at a time per client (REQ); create several for concurrency.
import { Request } from "zeromq";
import { encode, decode } from "@msgpack/msgpack";

export const PROTOCOL_VERSION = 1;

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

const TYPED = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array,
  uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, bool: Uint8Array,
};

export class BridgeError extends Error {
  constructor(code, message, id = null) {
    super(`${code}: ${message}`);
    this.name = "BridgeError";
    this.code = code;
    this.detail = message;
    this.id = id;
  }
}

/** Encode a typed array as {dtype, shape, data: <bin, little-endian>}. */
export function encodeArray(typed, shape, dtype) {
  if (!LITTLE_ENDIAN) throw new Error("this client assumes a little-endian host");
  const name = dtype ?? Object.keys(TYPED).find((k) => typed instanceof TYPED[k]);
  const count = shape.reduce((a, b) => a * b, 1);
  if (typed.length !== count) throw new Error(`array of ${typed.length} items does not fit shape [${shape}]`);
  return { dtype: name, shape, data: new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength) };
}

/** Decode an array map into a typed array (copying, so the result is aligned). */
export function decodeArray(value) {
  const Ctor = TYPED[value.dtype];
  if (!Ctor) throw new BridgeError("bad_reply", `unsupported dtype ${value.dtype}`);
  const bytes = new Uint8Array(value.data);  // an aligned copy (a Buffer's slice() would be a view)
  return { dtype: value.dtype, shape: value.shape, data: new Ctor(bytes.buffer, 0, bytes.byteLength / Ctor.BYTES_PER_ELEMENT) };
}

export class VillageBridgeClient {
  constructor(endpoint, { timeoutMs = 2000, retries = 3, curve = null } = {}) {
    this.endpoint = endpoint;
    this.timeoutMs = timeoutMs;
    this.retries = retries;
    this.curve = curve;  // {serverPublicKey, publicKey, secretKey} (Z85 strings) or null
    // ids from a random base below 2^51: exact as JavaScript numbers, and unlike any other client's
    this.nextId = Math.floor(Math.random() * 2 ** 51);
    this.reconnects = 0;
    this.socket = null;
    this.connect();
  }

  connect() {
    // send bounded too: a REQ socket with no live peer (a failed CURVE handshake) waits in send
    const options = { receiveTimeout: this.timeoutMs, sendTimeout: this.timeoutMs, linger: 0, relaxed: true,
      correlate: true };
    if (this.curve) {
      options.curveServerKey = this.curve.serverPublicKey;
      options.curvePublicKey = this.curve.publicKey;
      options.curveSecretKey = this.curve.secretKey;
    }
    this.socket = new Request(options);
    this.socket.connect(this.endpoint);
  }

  /** Send `op` with `fields`; resolves to the reply's result fields, or rejects with BridgeError. */
  async request(op, fields = {}) {
    const id = ++this.nextId;
    const message = { v: PROTOCOL_VERSION, id, op };
    for (const [key, value] of Object.entries(fields)) if (value !== undefined && value !== null) message[key] = value;
    const body = encode(message);
    for (let attempt = 0; attempt <= this.retries; attempt++) {
      try {
        await this.socket.send(body);
        const [frame] = await this.socket.receive();
        const reply = decode(frame);
        if (!reply || typeof reply !== "object" || !("ok" in reply)) throw new BridgeError("bad_reply", "reply without 'ok'", id);
        if (!reply.ok) throw new BridgeError(reply.error?.code ?? "unknown", reply.error?.message ?? "", reply.id);
        const { v, id: _id, ok, ...result } = reply;
        return result;
      } catch (err) {
        if (err instanceof BridgeError) throw err;
        if (err?.code !== "EAGAIN") throw err;
        // silence: send the same bytes again on the same (relaxed) socket
        this.reconnects++;
      }
    }
    throw new BridgeError("timeout", `no reply from ${this.endpoint} after ${this.retries + 1} attempts of ${this.timeoutMs} ms`, id);
  }

  async ping() { return (await this.request("ping")).time; }

  async hello(client = "village-bridge-js") { return this.request("hello", { client }); }

  /** obs: Float32Array of rows*obsDim; mask: Uint8Array of rows*nActions (optional); temperature: sample from
   * softmax(logits / T) instead of the server's temperature (optional, not with deterministic); personalityStrength:
   * play each NPC's learned personality S times as strongly (0 to 10, 1 as trained) instead of the server's. */
  async act(obs, rows, obsDim, { mask = null, nActions = 0, deterministic = false, withProbs = false, temperature = null,
                                 personalityStrength = null } = {}) {
    const fields = { obs: encodeArray(obs, [rows, obsDim], "float32") };
    if (mask) fields.mask = encodeArray(mask, [rows, nActions], "uint8");
    if (deterministic) fields.deterministic = true;
    if (withProbs) fields.with_probs = true;
    if (temperature !== null) fields.temperature = temperature;
    if (personalityStrength !== null) fields.personality_strength = personalityStrength;
    const result = await this.request("act", fields);
    return { actions: decodeArray(result.actions).data, probs: result.probs ? decodeArray(result.probs).data : null, policy: result.policy };
  }

  /** options: session.create's fields as the protocol names them, but personalityStrength (sent as
   * personality_strength): its NPCs play their learned personalities S times as strongly (0 to 10, 1 as trained). */
  async sessionCreate({ personalityStrength = null, ...options }) {
    if (personalityStrength !== null) options.personality_strength = personalityStrength;
    return this.request("session.create", options);
  }

  async sessionEvent(session, type, { actor = null, target, position = null, witnesses = null } = {}) {
    return this.request("session.event", { session, type, actor, target, position, witnesses });
  }

  /** pos: Float32Array (E*2), health: Float32Array (E), alive: Uint8Array (E); all optional. */
  async sessionStep(session, { pos = null, health = null, alive = null, entities = 0 } = {}) {
    const fields = { session };
    if (pos) fields.pos = encodeArray(pos, [entities, 2], "float32");
    if (health) fields.health = encodeArray(health, [entities], "float32");
    if (alive) fields.alive = encodeArray(alive, [entities], "uint8");
    return this.request("session.step", fields);
  }

  async sessionState(session, npc = null) { return this.request("session.state", { session, npc }); }

  async sessionClose(session) { return this.request("session.close", { session }); }

  async reload(policy = null) { return this.request("reload", { policy }); }

  async stats() { return this.request("stats"); }

  close() { this.socket?.close(); this.socket = null; }
}

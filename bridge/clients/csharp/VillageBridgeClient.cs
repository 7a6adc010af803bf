// VillageBridgeClient.cs - C# client of the village NPC bridge for Unity (NetMQ + MessagePack-CSharp).
//
// NOT BUILT OR TESTED in this repository (there is no .NET toolchain in its CI). It is reference source
// written against the protocol in docs/protocol.md; see README.md beside it for how to use it in Unity.
//
// Dependencies: NetMQ 4.x (pure C# ZeroMQ) and MessagePack-CSharp 2.x.
// Lazy Pirate: a RequestSocket; on a timeout the socket is disposed and a new one connects, and the same
// request (same id, same bytes) is re-sent, up to `retries` times. Call from a worker thread, not from
// Unity's main thread; one client per thread.

using System;
using System.Collections.Generic;
using System.Linq;
using MessagePack;
using NetMQ;
using NetMQ.Sockets;

namespace Village.Bridge
{
    public sealed class BridgeException : Exception
    {
        public string Code { get; }
        public BridgeException(string code, string message) : base($"{code}: {message}") { Code = code; }
    }

    public sealed class Reaction
    {
        public string Npc, Action, Target, Kind, Bark;   // Kind = the reaction label ("mourning", ...)
        public bool Alive;
        public double Intensity;
        public long Cause = -1;                          // session event number behind it, -1 none
    }

    public sealed class VillageBridgeClient : IDisposable
    {
        public const int ProtocolVersion = 1;

        private readonly string endpoint;
        private readonly TimeSpan timeout;
        private readonly int retries;
        private readonly string curveServerPublic, curveClientPublic, curveClientSecret;  // Z85, 40 characters
        private RequestSocket socket;
        private long nextId;

        /// Request ids start from a random base below 2^51, not from 1: the server remembers creates per
        /// connection, and two games (or a restarted one) must never send the same first request.
        static long RandomIdBase()
        {
            var bytes = new byte[8];
            using (var rng = System.Security.Cryptography.RandomNumberGenerator.Create()) rng.GetBytes(bytes);
            return (long)(BitConverter.ToUInt64(bytes, 0) >> 13);
        }
        public int Reconnects { get; private set; }

        /// curveServerPublic / curveClientPublic / curveClientSecret: the Z85 keys of `village keys` files
        /// (server.key's public-key, client.key_secret's public-key and secret-key) for a server started with
        /// --curve-secret/--curve-allow; leave them null for a loopback server without CURVE.
        public VillageBridgeClient(string endpoint, int timeoutMs = 2000, int retries = 3,
                                   string curveServerPublic = null, string curveClientPublic = null,
                                   string curveClientSecret = null)
        {
            this.endpoint = endpoint;
            this.timeout = TimeSpan.FromMilliseconds(timeoutMs);
            this.retries = retries;
            this.curveServerPublic = curveServerPublic;
            this.curveClientPublic = curveClientPublic;
            this.curveClientSecret = curveClientSecret;
            nextId = RandomIdBase();
            Connect();
        }

        private void Connect()
        {
            socket = new RequestSocket();
            socket.Options.Linger = TimeSpan.Zero;
            if (curveServerPublic != null)
            {
                // NetMQ 4.0.1+: CurveZMQ with the server's public key and this client's certificate
                socket.Options.CurveServerKey = NetMQCertificate.FromPublicKey(curveServerPublic).PublicKey;
                socket.Options.CurveCertificate = new NetMQCertificate(curveClientSecret, curveClientPublic);
            }
            socket.Connect(endpoint);
        }

        /// Send an op with its fields (values: string, long, double, bool, byte[], lists, dictionaries).
        public Dictionary<object, object> Request(string op, Dictionary<string, object> fields = null)
        {
            long id = ++nextId;
            var message = new Dictionary<string, object> { ["v"] = ProtocolVersion, ["id"] = id, ["op"] = op };
            if (fields != null)
                foreach (var kv in fields)
                    if (kv.Value != null) message[kv.Key] = kv.Value;
            byte[] body = MessagePackSerializer.Serialize(message);
            for (int attempt = 0; attempt <= retries; attempt++)
            {
                socket.SendFrame(body);
                if (socket.TryReceiveFrameBytes(timeout, out byte[] frame))
                {
                    var reply = MessagePackSerializer.Deserialize<Dictionary<object, object>>(frame);
                    if (!(reply.TryGetValue("ok", out var ok) && ok is bool okay))
                        throw new BridgeException("bad_reply", "reply without a boolean 'ok'");
                    if (!okay)
                    {
                        var error = (Dictionary<object, object>)reply["error"];
                        throw new BridgeException((string)error["code"], (string)error["message"]);
                    }
                    return reply;
                }
                // silence: the REQ socket is stuck waiting; drop it and start over (Lazy Pirate)
                socket.Dispose();
                Reconnects++;
                Connect();
            }
            throw new BridgeException("timeout", $"no reply from {endpoint} after {retries + 1} attempts");
        }

        /// {"dtype", "shape", "data"}: little-endian bytes (Unity's platforms are little-endian).
        public static Dictionary<string, object> EncodeArray<T>(T[] data, string dtype, params int[] shape) where T : struct
        {
            var bytes = new byte[Buffer.ByteLength(data)];
            Buffer.BlockCopy(data, 0, bytes, 0, bytes.Length);
            return new Dictionary<string, object> { ["dtype"] = dtype, ["shape"] = shape, ["data"] = bytes };
        }

        public static int[] DecodeInt32(object arrayMap)
        {
            var map = (Dictionary<object, object>)arrayMap;
            var bytes = (byte[])map["data"];
            var result = new int[bytes.Length / 4];
            Buffer.BlockCopy(bytes, 0, result, 0, bytes.Length);
            return result;
        }

        public double Ping() => Convert.ToDouble(Request("ping")["time"]);

        public Dictionary<object, object> Hello(string client = "village-bridge-csharp") =>
            Request("hello", new Dictionary<string, object> { ["client"] = client });

        /// obs: rows*obsDim floats; mask: rows*nActions bytes (0/1) or null; temperature: sample from
        /// softmax(logits / T) instead of the server's temperature (null: the server's; not with deterministic);
        /// personalityStrength: play each NPC's learned personality S times as strongly (0 to 10, 1 as trained;
        /// null: the server's strength).
        public int[] Act(float[] obs, int rows, int obsDim, byte[] mask = null, int nActions = 0, bool deterministic = false,
                         double? temperature = null, double? personalityStrength = null)
        {
            var fields = new Dictionary<string, object> { ["obs"] = EncodeArray(obs, "float32", rows, obsDim) };
            if (mask != null) fields["mask"] = EncodeArray(mask, "uint8", rows, nActions);
            if (deterministic) fields["deterministic"] = true;
            if (temperature.HasValue) fields["temperature"] = temperature.Value;
            if (personalityStrength.HasValue) fields["personality_strength"] = personalityStrength.Value;
            return DecodeInt32(Request("act", fields)["actions"]);
        }

        /// A session from a world file's TOML text; returns the session id. temperature: its NPCs sample from
        /// softmax(logits / T) (null: the server's temperature); personalityStrength: they play their learned
        /// personalities S times as strongly (0 to 10, 1 as trained; null: the server's strength).
        public string SessionCreate(string worldToml, long seed = 0, double? temperature = null,
                                    double? personalityStrength = null)
        {
            var fields = new Dictionary<string, object> { ["world"] = worldToml, ["seed"] = seed };
            if (temperature.HasValue) fields["temperature"] = temperature.Value;
            if (personalityStrength.HasValue) fields["personality_strength"] = personalityStrength.Value;
            return (string)Request("session.create", fields)["session"];
        }

        public long SessionEvent(string session, string type, string actor, string target, string[] witnesses = null)
        {
            var fields = new Dictionary<string, object>
            {
                ["session"] = session, ["type"] = type, ["actor"] = actor, ["target"] = target, ["witnesses"] = witnesses,
            };
            return Convert.ToInt64(Request("session.event", fields)["event"]);
        }

        /// pos: E*2 floats, health: E floats, alive: E bytes; entity order = NPCs then actors. All optional.
        public List<Reaction> SessionStep(string session, float[] pos = null, float[] health = null, byte[] alive = null)
        {
            var fields = new Dictionary<string, object> { ["session"] = session };
            if (pos != null) fields["pos"] = EncodeArray(pos, "float32", pos.Length / 2, 2);
            if (health != null) fields["health"] = EncodeArray(health, "float32", health.Length);
            if (alive != null) fields["alive"] = EncodeArray(alive, "uint8", alive.Length);
            var reply = Request("session.step", fields);
            return ((object[])reply["reactions"]).Cast<Dictionary<object, object>>().Select(r => new Reaction
            {
                Npc = (string)r["npc"],
                Alive = (bool)r["alive"],
                Action = (string)r["action"],
                Target = r["target"] as string,
                Kind = (string)r["reaction"],
                Intensity = Convert.ToDouble(r["intensity"]),
                Cause = r["cause"] == null ? -1 : Convert.ToInt64(r["cause"]),
                Bark = r.TryGetValue("bark", out var bark) ? bark as string : null,
            }).ToList();
        }

        public void SessionClose(string session) =>
            Request("session.close", new Dictionary<string, object> { ["session"] = session });

        public void Dispose()
        {
            socket?.Dispose();
            socket = null;
        }
    }
}

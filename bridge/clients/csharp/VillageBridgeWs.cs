// VillageBridgeWs.cs - a C# client of `village serve --ws` (Unity, any .NET / mono): the bridge protocol in
// msgpack over a WebSocket, with only the framework's System.Net.WebSockets and MsgPackLite.cs (no package).
// Synchronous: call it from a worker thread (never Unity's main thread), one client per thread. Each request
// waits at most `timeoutMs`; a dropped or silent connection is reopened and the same request (same id, same
// bytes) sent again, up to `retries` times; the server answers a repeated session.step from its replay cache.
using System;
using System.Collections.Generic;
using System.IO;
using System.Net.WebSockets;
using System.Threading;

namespace VillageBridge
{
    public sealed class BridgeError : Exception
    {
        public string Code { get; }
        public BridgeError(string code, string message) : base($"{code}: {message}") { Code = code; }
    }

    public sealed class WsReaction
    {
        public string Npc, Action, Target, Kind, Bark;  // Kind = the reaction label ("mourning", ...)
        public bool Alive;
        public double Intensity;
        public long Cause = -1;  // the session event behind it, -1 none
    }

    public sealed class WsStep
    {
        public long Tick;
        public List<WsReaction> Reactions = new List<WsReaction>();
        public List<Dictionary<string, object>> Events = new List<Dictionary<string, object>>();
    }

    public sealed class VillageBridgeWs : IDisposable
    {
        public const int ProtocolVersion = 1;

        readonly Uri url;
        readonly string token;
        readonly int timeoutMs, retries;
        ClientWebSocket ws;
        long nextId;

        /// Request ids start from a random base below 2^51, not from 1: the server remembers creates per
        /// connection, and two games (or a restarted one) must never send the same first request.
        static long RandomIdBase()
        {
            var bytes = new byte[8];
            using (var rng = System.Security.Cryptography.RandomNumberGenerator.Create()) rng.GetBytes(bytes);
            return (long)(BitConverter.ToUInt64(bytes, 0) >> 13);
        }
        public int Reconnects { get; private set; }
        public List<string> Npcs { get; private set; } = new List<string>();
        public List<string> Actors { get; private set; } = new List<string>();

        /// url: ws://HOST:PORT of `village serve --ws`; token: the server's --ws-token (sent as a bearer token).
        public VillageBridgeWs(string url, string token = null, int timeoutMs = 5000, int retries = 3)
        {
            this.url = new Uri(url);
            this.token = token;
            this.timeoutMs = timeoutMs;
            this.retries = retries;
            nextId = RandomIdBase();
            Connect();
        }

        void Connect()
        {
            ws?.Dispose();
            ws = new ClientWebSocket();
            if (!string.IsNullOrEmpty(token)) ws.Options.SetRequestHeader("Authorization", "Bearer " + token);
            using (var cts = new CancellationTokenSource(timeoutMs))
                ws.ConnectAsync(url, cts.Token).GetAwaiter().GetResult();
        }

        byte[] Exchange(byte[] body)
        {
            using (var cts = new CancellationTokenSource(timeoutMs))
            {
                ws.SendAsync(new ArraySegment<byte>(body), WebSocketMessageType.Binary, true, cts.Token)
                  .GetAwaiter().GetResult();
                var buffer = new byte[64 * 1024];
                var frame = new MemoryStream();
                while (true)
                {
                    var got = ws.ReceiveAsync(new ArraySegment<byte>(buffer), cts.Token).GetAwaiter().GetResult();
                    if (got.MessageType == WebSocketMessageType.Close)
                        throw new WebSocketException($"closed by the server ({got.CloseStatus} {got.CloseStatusDescription})");
                    frame.Write(buffer, 0, got.Count);
                    if (got.EndOfMessage) return frame.ToArray();
                }
            }
        }

        /// Send an op with its fields (string, long, double, bool, byte[], lists, dictionaries); the reply map.
        public Dictionary<string, object> Request(string op, Dictionary<string, object> fields = null)
        {
            long id = ++nextId;
            var message = new Dictionary<string, object> { ["v"] = ProtocolVersion, ["id"] = id, ["op"] = op };
            if (fields != null)
                foreach (var kv in fields)
                    if (kv.Value != null) message[kv.Key] = kv.Value;
            byte[] body = MsgPackLite.Encode(message);
            for (int attempt = 0; attempt <= retries; attempt++)
            {
                try
                {
                    if (attempt > 0) { Reconnects++; Connect(); }
                    var reply = MsgPackLite.Decode(Exchange(body)) as Dictionary<string, object>
                                ?? throw new BridgeError("bad_reply", "the reply is not a map");
                    if (!(reply.TryGetValue("ok", out var ok) && ok is bool okay))
                        throw new BridgeError("bad_reply", "reply without a boolean 'ok'");
                    if (!okay)
                    {
                        var error = (Dictionary<string, object>)reply["error"];
                        throw new BridgeError((string)error["code"], (string)error["message"]);
                    }
                    return reply;
                }
                catch (Exception e) when (e is WebSocketException || e is OperationCanceledException || e is IOException)
                {
                    // silence or a dropped connection: reconnect and send the same bytes again
                }
            }
            throw new BridgeError("timeout", $"no reply from {url} after {retries + 1} attempts of {timeoutMs} ms");
        }

        /// {"dtype", "shape", "data"}: little-endian bytes (every Unity target is little-endian).
        public static Dictionary<string, object> EncodeArray<T>(T[] data, string dtype, params int[] shape) where T : struct
        {
            var bytes = new byte[Buffer.ByteLength(data)];
            Buffer.BlockCopy(data, 0, bytes, 0, bytes.Length);
            var dims = new List<object>();
            foreach (var n in shape) dims.Add((long)n);
            return new Dictionary<string, object> { ["dtype"] = dtype, ["shape"] = dims, ["data"] = bytes };
        }

        public static int[] DecodeInt32(object arrayMap)
        {
            var bytes = (byte[])((Dictionary<string, object>)arrayMap)["data"];
            var result = new int[bytes.Length / 4];
            Buffer.BlockCopy(bytes, 0, result, 0, bytes.Length);
            return result;
        }

        public double Ping() => Convert.ToDouble(Request("ping")["time"]);

        public Dictionary<string, object> Hello(string client = "village-bridge-csharp-ws")
        {
            var info = Request("hello", new Dictionary<string, object> { ["client"] = client });
            if (Convert.ToInt64(info["protocol"]) != ProtocolVersion)
                throw new BridgeError("unsupported_version", $"the server speaks protocol {info["protocol"]}, this client {ProtocolVersion}");
            return info;
        }

        /// temperature: sample from softmax(logits / T) instead of the server's temperature (null: the server's);
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

        /// temperature: the session's NPCs sample from softmax(logits / T) (null: the server's temperature);
        /// personalityStrength: they play their learned personalities S times as strongly (0 to 10, 1 as trained;
        /// null: the server's strength).
        public string SessionCreate(string worldToml, long seed = 0, bool deterministic = false, double? temperature = null,
                                    double? personalityStrength = null)
        {
            var fields = new Dictionary<string, object> { ["world"] = worldToml, ["seed"] = seed, ["deterministic"] = deterministic };
            if (temperature.HasValue) fields["temperature"] = temperature.Value;
            if (personalityStrength.HasValue) fields["personality_strength"] = personalityStrength.Value;
            var reply = Request("session.create", fields);
            Npcs = ((List<object>)reply["npcs"]).ConvertAll(o => (string)o);
            Actors = ((List<object>)reply["actors"]).ConvertAll(o => (string)o);
            return (string)reply["session"];
        }

        public long SessionEvent(string session, string type, string actor, string target, string[] witnesses = null)
        {
            var fields = new Dictionary<string, object> { ["session"] = session, ["type"] = type, ["actor"] = actor,
                                                          ["target"] = target };
            if (witnesses != null) fields["witnesses"] = new List<object>(witnesses);
            return Convert.ToInt64(Request("session.event", fields)["event"]);
        }

        /// pos: (entities x 2) float32 positions from the game (NPCs, then actors), or null for the session's own.
        public WsStep SessionStep(string session, float[] pos = null)
        {
            var fields = new Dictionary<string, object> { ["session"] = session };
            if (pos != null) fields["pos"] = EncodeArray(pos, "float32", pos.Length / 2, 2);
            var reply = Request("session.step", fields);
            var step = new WsStep { Tick = Convert.ToInt64(reply["tick"]) };
            foreach (Dictionary<string, object> r in (List<object>)reply["reactions"])
                step.Reactions.Add(new WsReaction
                {
                    Npc = (string)r["npc"], Action = (string)r["action"], Target = r["target"] as string,
                    Kind = (string)r["reaction"], Bark = r.TryGetValue("bark", out var bark) ? bark as string : null,
                    Alive = (bool)r["alive"], Intensity = Convert.ToDouble(r["intensity"]),
                    Cause = r["cause"] == null ? -1 : Convert.ToInt64(r["cause"]),
                });
            foreach (Dictionary<string, object> e in (List<object>)reply["events"]) step.Events.Add(e);
            return step;
        }

        public void SessionClose(string session) =>
            Request("session.close", new Dictionary<string, object> { ["session"] = session });

        public void Dispose()
        {
            if (ws != null && ws.State == WebSocketState.Open)
            {
                try
                {
                    using (var cts = new CancellationTokenSource(1000))
                        ws.CloseAsync(WebSocketCloseStatus.NormalClosure, "bye", cts.Token).GetAwaiter().GetResult();
                }
                catch (Exception) { }  // closing is best effort: the server forgets the connection either way
            }
            ws?.Dispose();
            ws = null;
        }
    }
}

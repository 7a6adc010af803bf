// ExampleWs.cs - the C# WebSocket client against a live bridge: the sequence of bridge/clients/cpp/example.cpp
// (hello, act, a session with a death, close), one line per result (the test suite parses them).
//
//   mcs -out:example_ws.exe MsgPackLite.cs VillageBridgeWs.cs ExampleWs.cs
//   village serve --policy scripted --ws 127.0.0.1:8765 &
//   mono example_ws.exe ws://127.0.0.1:8765 worlds/data/village-v1.toml
using System;
using System.Globalization;
using System.IO;
using System.Linq;
using VillageBridge;

static class ExampleWs
{
    static int Main(string[] args)
    {
        if (args.Length < 2) { Console.Error.WriteLine("usage: example_ws.exe URL WORLD.toml [TOKEN]"); return 2; }
        CultureInfo.DefaultThreadCurrentCulture = CultureInfo.InvariantCulture;
        try
        {
            using (var bridge = new VillageBridgeWs(args[0], args.Length > 2 ? args[2] : null))
            {
                var info = bridge.Hello("village-bridge-csharp-example");
                int obsDim = Convert.ToInt32(info["obs_dim"]), nActions = Convert.ToInt32(info["n_actions"]);
                Console.WriteLine($"hello protocol={info["protocol"]} obs_dim={obsDim} n_actions={nActions} policy={info["policy"]}");

                const int rows = 16;
                var mask = Enumerable.Repeat((byte)1, rows * nActions).ToArray();
                var actions = bridge.Act(new float[rows * obsDim], rows, obsDim, mask, nActions, true);
                Console.WriteLine($"act rows={actions.Length} actions={string.Join(",", actions)}");
                try  // a request's own sampling temperature (the scripted rules have none to sharpen)
                {
                    bridge.Act(new float[rows * obsDim], rows, obsDim, mask, nActions, false, 0.5);
                    Console.WriteLine("temperature accepted");
                }
                catch (BridgeError e) { Console.WriteLine($"temperature error code={e.Code}"); }
                try  // a request's own personality strength (the scripted rules have no learned personality)
                {
                    bridge.Act(new float[rows * obsDim], rows, obsDim, mask, nActions, false, personalityStrength: 2);
                    Console.WriteLine("personality_strength accepted");
                }
                catch (BridgeError e)
                {
                    // Message is "code: message"
                    Console.WriteLine($"personality_strength error code={e.Code} message={e.Message.Substring(e.Code.Length + 2)}");
                }

                string world = File.ReadAllText(args[1]);
                try  // a session's own personality strength: refused alike, and nothing is made of the refused create
                {
                    bridge.SessionCreate(world, personalityStrength: 2);
                    Console.WriteLine("session personality_strength accepted");
                }
                catch (BridgeError e) { Console.WriteLine($"session personality_strength error code={e.Code}"); }
                string session = bridge.SessionCreate(world);
                Console.WriteLine($"session id={session} npcs={bridge.Npcs.Count} actors={bridge.Actors.Count}");
                string victim = bridge.Npcs[0];
                long death = bridge.SessionEvent(session, "death", "player", victim);
                Console.WriteLine($"event death number={death} victim={victim}");

                for (int tick = 0; tick < 10; tick++)
                {
                    var step = bridge.SessionStep(session);
                    foreach (var e in step.Events)
                        Console.WriteLine($"step tick={step.Tick} event={e["type"]} number={e["event"]} actor={e["actor"]} target={e["target"]}");
                    foreach (var r in step.Reactions)
                    {
                        if (r.Npc == victim && tick == 0) Console.WriteLine($"victim {r.Npc} alive={(r.Alive ? 1 : 0)}");
                        if (r.Kind == "none") continue;
                        Console.WriteLine($"reaction tick={step.Tick} npc={r.Npc} reaction={r.Kind} action={r.Action} " +
                                          $"target={r.Target} cause={r.Cause} intensity={r.Intensity}" +
                                          (r.Bark == null ? "" : $" bark=\"{r.Bark}\""));
                    }
                }
                bridge.SessionClose(session);
                Console.WriteLine($"closed {session}");
                try { bridge.SessionStep(session); }
                catch (BridgeError e) { Console.WriteLine($"error code={e.Code}"); }
            }
        }
        catch (Exception e)
        {
            Console.Error.WriteLine($"error: {e.Message}");
            return 1;
        }
        return 0;
    }
}

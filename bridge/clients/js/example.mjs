// example.mjs - the JS client against a live bridge: hello, act, and a session with a death.
//
//   cd bridge/clients/js && npm install
//   village serve --policy scripted &
//   node example.mjs tcp://127.0.0.1:5555 ../../../worlds/data/village-v1.toml
//
// Prints one line per result (the test suite parses them).
import { readFileSync } from "node:fs";
import { VillageBridgeClient, BridgeError } from "./village_client.mjs";

const [endpoint, worldPath] = process.argv.slice(2);
if (!endpoint || !worldPath) {
  console.error("usage: node example.mjs ENDPOINT WORLD.toml");
  process.exit(2);
}

const bridge = new VillageBridgeClient(endpoint, { timeoutMs: 5000, retries: 3 });
try {
  const info = await bridge.hello("village-bridge-js-example");
  console.log(`hello protocol=${info.protocol} obs_dim=${info.obs_dim} n_actions=${info.n_actions} policy=${info.policy}`);

  const rows = 16;
  const obs = new Float32Array(rows * info.obs_dim);
  const mask = new Uint8Array(rows * info.n_actions).fill(1);
  const { actions } = await bridge.act(obs, rows, info.obs_dim, { mask, nActions: info.n_actions, deterministic: true });
  console.log(`act rows=${actions.length} actions=${Array.from(actions).join(",")}`);
  try {  // a request's own sampling temperature (the scripted rules have none to sharpen)
    await bridge.act(obs, rows, info.obs_dim, { mask, nActions: info.n_actions, temperature: 0.5 });
    console.log("temperature accepted");
  } catch (e) {
    if (!(e instanceof BridgeError)) throw e;
    console.log(`temperature error code=${e.code}`);
  }
  try {  // a request's own personality strength (the scripted rules have no learned personality)
    await bridge.act(obs, rows, info.obs_dim, { mask, nActions: info.n_actions, personalityStrength: 2 });
    console.log("personality_strength accepted");
  } catch (e) {
    if (!(e instanceof BridgeError)) throw e;
    console.log(`personality_strength error code=${e.code} message=${e.detail}`);
  }

  const world = readFileSync(worldPath, "utf8");
  try {  // a session's own personality strength: refused alike, and nothing is made of the refused create
    await bridge.sessionCreate({ world, seed: 0, personalityStrength: 2 });
    console.log("session personality_strength accepted");
  } catch (e) {
    if (!(e instanceof BridgeError)) throw e;
    console.log(`session personality_strength error code=${e.code}`);
  }
  const created = await bridge.sessionCreate({ world, seed: 0 });
  console.log(`session id=${created.session} npcs=${created.npcs.length} actors=${created.actors.length}`);
  const victim = created.npcs[0];
  const { event } = await bridge.sessionEvent(created.session, "death", { actor: "player", target: victim });
  console.log(`event death number=${event} victim=${victim}`);

  for (let tick = 0; tick < 10; tick++) {
    const step = await bridge.sessionStep(created.session);
    for (const e of step.events) {
      console.log(`step tick=${step.tick} event=${e.type} number=${e.event} actor=${e.actor} target=${e.target}`);
    }
    for (const r of step.reactions) {
      if (r.npc === victim && tick === 0) console.log(`victim ${r.npc} alive=${r.alive ? 1 : 0}`);
      if (r.reaction === "none") continue;
      console.log(`reaction tick=${step.tick} npc=${r.npc} reaction=${r.reaction} action=${r.action} target=${r.target} cause=${r.cause ?? -1} intensity=${r.intensity}${r.bark ? ` bark="${r.bark}"` : ""}`);
    }
  }
  await bridge.sessionClose(created.session);
  console.log(`closed ${created.session}`);
  try {
    await bridge.sessionStep(created.session);
  } catch (err) {
    if (!(err instanceof BridgeError)) throw err;
    console.log(`error code=${err.code}`);
  }
} catch (err) {
  console.error(`error: ${err.message}`);
  process.exitCode = 1;
} finally {
  bridge.close();
}

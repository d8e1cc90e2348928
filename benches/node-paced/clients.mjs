// One client process of paced.mjs (forked by it; not run by hand). It holds `count` official
// Node SDK clients (`CopilotClient` + `RuntimeConnection.forUri`, one TCP connection each) and
// talks to its parent over the fork IPC channel:
//
//   parent → {cmd:"create"}            first client creates the BYOK session → {ev:"created", sessionId}
//   parent → {cmd:"join", sessionId}   every other client joins it with resumeSession → {ev:"attached"}
//   parent → {cmd:"warmup"}, {cmd:"send", prompt}   an unmeasured turn first → {ev:"warm"} when
//                                   every client saw its session.idle
//   parent → {cmd:"start"}           stream window opens (CPU counted, deadline armed) → {ev:"started"}
//   parent → {cmd:"send", prompt}      first client sends the measured prompt → {ev:"sent"}
//   (every client saw session.idle, or the deadline passed) → {ev:"done", ...results}
//
// Each client records, for every `assistant.message_delta`, its receipt time (the time its
// handler runs, `process.hrtime`, CLOCK_MONOTONIC, in ms) minus each `[i:T]` stamp in the
// delta's text (the fake endpoint's write time, same clock), and which indices i it saw.
import { CopilotClient, RuntimeConnection, approveAll } from "@github/copilot-sdk";
import { performance } from "node:perf_hooks";

const cfg = JSON.parse(process.argv[2]);
const { port, modelPort, count, chunks, first, joinConcurrency, joinTimeoutMs, streamTimeoutMs } = cfg;
// CLOCK_MONOTONIC in ms: one clock for every process on this machine (timeOrigin + now() is
// not: each process fixes its own timeOrigin at start, and they differed by tens of ms here).
const now = () => Number(process.hrtime.bigint()) / 1e6;
// Wall clock minus that clock, to place the server's event `timestamp` (ISO 8601, wall clock,
// ms) on it: splits each latency into endpoint write → server's event and event → receipt.
const wallOffset = (() => {
  const a = now();
  const w = Date.now();
  return w - (a + now()) / 2;
})();
const send = (m) => process.send(m);

const provider = { type: "openai", baseUrl: `http://127.0.0.1:${modelPort}/v1`, apiKey: "sk-fake" };
const sessionOpts = { model: "fake-model", streaming: true, onPermissionRequest: approveAll, provider };
const STAMP = /\[(\d+):(\d+\.\d+)\]/g;

const clients = []; // {client, session, seen: Uint8Array, lat: number[], deltas, dupes, idle, errors}
// Per chunk index, the lowest latency over this process's clients (the first receipt).
const firstLat = new Float64Array(chunks).fill(Infinity);
let phase = null; // "warmup" (an unmeasured turn first), then "measure"
let warmIdle = 0;
let doneCount = 0;
let finished = false;

function track(c) {
  c.session.on((e) => {
    if (e.type === "assistant.message_delta" && phase === "measure") {
      const t = now();
      c.deltas++;
      const text = e.data?.deltaContent ?? "";
      for (const m of text.matchAll(STAMP)) {
        const i = Number(m[1]);
        const l = t - Number(m[2]);
        if (i < chunks && c.seen[i]) c.dupes++;
        else if (i < chunks) {
          c.seen[i] = 1;
          if (l < firstLat[i]) firstLat[i] = l;
        }
        c.lat.push(l);
        const emitted = Date.parse(e.timestamp) - wallOffset;
        if (Number.isFinite(emitted)) {
          c.toEvent.push(emitted - Number(m[2]));
          c.toReceipt.push(t - emitted);
        }
      }
      if (c.firstAt === null) c.firstAt = t;
      c.lastAt = t;
    } else if (e.type === "session.idle" && phase === "warmup" && !c.warmIdle) {
      c.warmIdle = true;
      if (++warmIdle === clients.length) send({ ev: "warm" });
    } else if (e.type === "session.idle" && phase === "measure" && !c.idle) {
      c.idle = true;
      if (++doneCount === clients.length) finish("all idle");
    } else if (e.type === "session.error" || e.type === "session.warning") {
      c.notes.push(`${e.type}: ${JSON.stringify(e.data).slice(0, 300)}`);
    }
  });
}

function newClient() {
  return {
    client: new CopilotClient({ connection: RuntimeConnection.forUri(`127.0.0.1:${port}`) }),
    session: null,
    seen: new Uint8Array(chunks),
    lat: [],
    toEvent: [],
    toReceipt: [],
    deltas: 0,
    dupes: 0,
    idle: false,
    warmIdle: false,
    firstAt: null,
    lastAt: null,
    notes: [],
  };
}

// Rejects after ms: a join the server never answers must not hold the run.
const within = (p, ms, what) =>
  Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: no answer in ${ms / 1000} s`)), ms).unref())]);

async function join(sessionId, c) {
  try {
    await within(c.client.start(), joinTimeoutMs, "start");
    c.session = await within(
      c.client.resumeSession(sessionId, { ...sessionOpts, suppressResumeEvent: true }), joinTimeoutMs, "resumeSession");
  } catch (err) {
    c.client.forceStop().catch(() => {});
    throw err;
  }
  track(c);
}

let cpu0 = null;
function finish(why) {
  if (finished) return;
  finished = true;
  const cpu = process.cpuUsage(cpu0);
  const lat = [];
  const toEvent = [];
  const toReceipt = [];
  let received = 0;
  let dupes = 0;
  let deltas = 0;
  let idle = 0;
  let short = 0;
  let lastAt = 0;
  const notes = [];
  for (const c of clients) {
    for (const x of c.lat) lat.push(x);
    for (const x of c.toEvent) toEvent.push(x);
    for (const x of c.toReceipt) toReceipt.push(x);
    let got = 0;
    for (let i = 0; i < chunks; i++) got += c.seen[i];
    received += got;
    if (got < chunks) short++;
    dupes += c.dupes;
    deltas += c.deltas;
    idle += c.idle ? 1 : 0;
    if (c.lastAt > lastAt) lastAt = c.lastAt;
    for (const n of c.notes) if (notes.length < 5) notes.push(n);
  }
  send({
    ev: "done",
    why,
    uncaught,
    firstUncaught,
    clients: clients.length,
    received,
    dupes,
    deltas,
    idle,
    short,
    lastAt,
    lat,
    toEvent,
    toReceipt,
    firstLat: Array.from(firstLat, (x) => (Number.isFinite(x) ? x : null)),
    cpuUserS: cpu.user / 1e6,
    cpuSysS: cpu.system / 1e6,
    notes,
  });
}

process.on("message", async (m) => {
  try {
    if (m.cmd === "create") {
      const c = newClient();
      await c.client.start();
      c.session = await c.client.createSession(sessionOpts);
      track(c);
      clients.push(c);
      send({ ev: "created", sessionId: c.session.sessionId });
    } else if (m.cmd === "join") {
      const todo = count - clients.length;
      let next = 0;
      let attached = 0;
      let failed = 0;
      let firstError = null;
      const fresh = Array.from({ length: todo }, newClient);
      const worker = async () => {
        while (next < fresh.length) {
          const c = fresh[next++];
          try {
            await join(m.sessionId, c);
          } catch (err) {
            // A refused join is a finding: count it, keep the first message, go on.
            if (failed++ === 0) firstError = String(err?.message ?? err).slice(0, 500);
            continue;
          }
          clients.push(c);
          if (++attached % 25 === 0) send({ ev: "progress", attached });
        }
      };
      await Promise.all(Array.from({ length: Math.min(joinConcurrency, todo) }, worker));
      send({ ev: "attached", attached, failed, firstError, clients: clients.length, uncaught, firstUncaught });
    } else if (m.cmd === "start") {
      // Stream window starts: count CPU from here; arm the deadline.
      cpu0 = process.cpuUsage();
      phase = "measure";
      setTimeout(() => finish("deadline"), streamTimeoutMs).unref();
      send({ ev: "started" });
    } else if (m.cmd === "warmup") {
      phase = "warmup";
      send({ ev: "warming" });
    } else if (m.cmd === "send") {
      if (!first) throw new Error("send: not the first process");
      const t = now();
      await clients[0].session.send({ prompt: m.prompt });
      send({ ev: "sent", at: t, acked: now() });
    }
  } catch (err) {
    send({ ev: "error", cmd: m.cmd, message: String(err?.stack ?? err).slice(0, 2000) });
  }
});
// The SDK lets some socket errors escape as unhandled rejections (an EPIPE from a write to a
// connection the server closed); count them as a finding instead of dying.
let uncaught = 0;
let firstUncaught = null;
const onUncaught = (err) => {
  if (uncaught++ === 0) firstUncaught = String(err?.stack ?? err).slice(0, 800);
  if (uncaught === 1) send({ ev: "uncaught", message: firstUncaught, at: now() });
};
process.on("uncaughtException", onUncaught);
process.on("unhandledRejection", onUncaught);
send({ ev: "ready" });

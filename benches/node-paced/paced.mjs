// Many official Node SDK clients on one session whose deltas come from a model at its pace.
//
//   node paced.mjs --port N --pid PID --model-port MP --model-log FILE [--label NAME]
//                  [--clients K] [--chunks M] [--rate R] [--procs P] [--join-concurrency C]
//                  [--warmup W] [--join-timeout S] [--setup-timeout S] [--stream-slack S]
//
// The server (listening on 127.0.0.1:N, process PID) must already run, and so must
// fake-model.mjs (port MP, logging to FILE) with the same --chunks, --rate and --warmup. This
// forks P client processes (clients.mjs; default max(2, ceil(K / 100)), at most K) holding K
// clients between them, each client its own CopilotClient and TCP connection. The first
// client creates a BYOK session (`provider: {type: "openai", baseUrl: http://127.0.0.1:MP/v1}`,
// `model: "fake-model"`, `streaming: true`); the others join it with `resumeSession(id,
// {streaming: true, suppressResumeEvent: true, same provider})`, C at a time per process
// (default 10). A join that fails or takes over --join-timeout seconds (default 10) is counted
// and the run goes on with the clients that did attach. Then one unmeasured warm-up turn (the
// endpoint streams W chunks at the same rate, default 50; 0 skips it) until every client saw
// its session.idle. Then the first client sends the measured prompt; the endpoint streams M
// chunks at R per second; every client records emit-to-receipt for every delta until it sees
// `session.idle` (or M / R + slack seconds pass, default 60).
//
// Prints one JSON line: K, R, M, deltas received / expected (unique stamps per client),
// duplicates, clients short of M, p50/p99/p99.9/max latency (ms) over every (client, delta),
// the same of the first receipt of each chunk by any client (first_*: the model path and the
// first write, before the rest of the fan-out queues behind it) and where the worst of those
// fall in the stream; each latency split at the server's event `timestamp` (wall clock, ms,
// placed on the monotonic clock per client process) into endpoint write → event (to_event_ms:
// the model path inside the server) and event → receipt (to_receipt_ms: the fan-out, the
// sockets and the client), p50/p99/max of each; the server's CPU seconds (utime + stime of PID and its descendants,
// /proc/PID/stat, from just before the measured prompt to the last client's `session.idle`)
// and per delivered delta (µs), the server's VmRSS before any client, with the creator
// attached (1 s after create), with all attached (1 s after the last join), and VmHWM at the
// end; RSS per joined client = (all − creator) / (K − 1); the client processes' CPU (each,
// and summed), the share of the whole machine's CPU time that was busy during the stream
// window (/proc/stat, all cores), the endpoint's worst timer lateness and the requests it
// saw, and `os.loadavg()` before and after.
import { fork } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const here = path.dirname(fileURLToPath(import.meta.url));
const port = Number(arg("port"));
const pid = Number(arg("pid"));
const modelPort = Number(arg("model-port"));
const modelLog = arg("model-log");
const label = arg("label", `port ${port}`);
const K = Number(arg("clients", "10"));
const M = Number(arg("chunks", "500"));
const R = Number(arg("rate", "100"));
const P = Math.max(1, Math.min(K, Number(arg("procs", String(Math.max(2, Math.ceil(K / 100)))))));
const joinConcurrency = Number(arg("join-concurrency", "10"));
const warmupChunks = Number(arg("warmup", "50"));
const joinTimeoutMs = Number(arg("join-timeout", "10")) * 1000;
const setupTimeoutMs = Number(arg("setup-timeout", "300")) * 1000;
const streamTimeoutMs = Math.round((M / R + Number(arg("stream-slack", "60"))) * 1000);
if (!port || !pid || !modelPort || !modelLog) {
  console.error("usage: node paced.mjs --port N --pid PID --model-port MP --model-log FILE [...]");
  process.exit(2);
}
// CLOCK_MONOTONIC in ms: one clock for every process on this machine (timeOrigin + now() is
// not: each process fixes its own timeOrigin at start, and they differed by tens of ms here).
const now = () => Number(process.hrtime.bigint()) / 1e6;
const round = (x, d = 3) => (x == null ? null : Math.round(x * 10 ** d) / 10 ** d);
const load = () => os.loadavg().map((x) => round(x, 2));
const CLK = 100; // USER_HZ; getconf CLK_TCK is 100 on Linux x86-64

// utime + stime (s) of `root` and every descendant alive now.
function treeCpu(root) {
  const parent = new Map();
  const ticks = new Map();
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = fs.readFileSync(`/proc/${d}/stat`, "utf8");
      const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
      parent.set(Number(d), Number(f[1]));
      ticks.set(Number(d), Number(f[11]) + Number(f[12]));
    } catch {}
  }
  let total = 0;
  let procs = 0;
  for (const [p, t] of ticks) {
    let q = p;
    while (q && q !== root) q = parent.get(q);
    if (q === root) {
      total += t;
      procs++;
    }
  }
  return { s: total / CLK, procs };
}
// Busy and total jiffies of the whole machine (/proc/stat `cpu` line).
function machineCpu() {
  const f = fs.readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number);
  const idle = f[3] + f[4];
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}
function status(key) {
  try {
    const m = fs.readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

const result = { label, K, R, M, procs: P, load_before: load() };
const workers = [];
const listeners = new Set();
function emit(i, m) {
  for (const l of listeners) l(i, m);
}
function waitAll(ev, n, timeoutMs, what) {
  return new Promise((resolve, reject) => {
    const got = new Map();
    const timer = setTimeout(() => {
      listeners.delete(l);
      reject(new Error(`${what}: timed out after ${timeoutMs / 1000} s (${got.size} of ${n} processes answered)`));
    }, timeoutMs);
    const l = (i, m) => {
      if (m.ev === "error") {
        clearTimeout(timer);
        listeners.delete(l);
        reject(new Error(`${what}: process ${i}: ${m.message}`));
      } else if (m.ev === ev) {
        got.set(i, m);
        if (got.size === n) {
          clearTimeout(timer);
          listeners.delete(l);
          resolve([...got.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]));
        }
      }
    };
    listeners.add(l);
  });
}
let progress = 0;
listeners.add((i, m) => {
  if (m.ev === "progress") progress++;
  if (m.ev === "uncaught") {
    result.uncaught_first = result.uncaught_first ?? { process: i, at_s: round((m.at - tStart) / 1000, 2), message: m.message };
  }
});
const tStart = now();

function finish(code) {
  result.load_after = load();
  console.log(JSON.stringify(result));
  for (const w of workers) w.kill("SIGKILL");
  process.exit(code);
}

try {
  result.server_rss_base_kb = status("VmRSS");
  const base = Math.floor(K / P);
  for (let i = 0; i < P; i++) {
    const count = base + (i < K % P ? 1 : 0);
    const cfg = { port, modelPort, count, chunks: M, first: i === 0, joinConcurrency, joinTimeoutMs, streamTimeoutMs };
    const w = fork(path.join(here, "clients.mjs"), [JSON.stringify(cfg)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
    w.on("message", (m) => emit(i, m));
    w.on("exit", (code, sig) => emit(i, { ev: "error", message: `client process exited (${code ?? sig})` }));
    workers.push(w);
  }
  await waitAll("ready", P, 30000, "client processes starting");

  const t0 = now();
  const created = waitAll("created", 1, 60000, "session.create");
  workers[0].send({ cmd: "create" });
  const [{ sessionId }] = await created;
  await new Promise((r) => setTimeout(r, 1000)); // let the session's start-up settle
  result.server_rss_session_kb = status("VmRSS");
  const attachedP = waitAll("attached", P, setupTimeoutMs, `joining ${K - 1} clients`);
  for (const w of workers) w.send({ cmd: "join", sessionId });
  let att;
  try {
    att = await attachedP;
  } catch (err) {
    result.joined_before_timeout = `at least ${progress * 25}`;
    throw err;
  }
  result.setup_s = round((now() - t0) / 1000, 2);
  result.attached = 1 + att.reduce((a, m) => a + m.attached, 0);
  result.join_failed = att.reduce((a, m) => a + m.failed, 0);
  if (result.join_failed) result.join_error = att.find((m) => m.firstError)?.firstError;
  result.uncaught_during_join = att.reduce((a, m) => a + m.uncaught, 0);
  await new Promise((r) => setTimeout(r, 1000)); // let the joins' own notifications drain
  result.server_rss_attached_kb = status("VmRSS");
  if (result.attached > 1) {
    result.rss_per_client_kb = round(
      (result.server_rss_attached_kb - result.server_rss_session_kb) / (result.attached - 1), 2);
  }

  if (warmupChunks > 0) {
    // One unmeasured turn first (the endpoint streams WARMUP chunks at the same rate), so the
    // measured one is not the first that the server, the endpoint and the clients run.
    const warming = waitAll("warming", P, 10000, "warm-up");
    for (const w of workers) w.send({ cmd: "warmup" });
    await warming;
    const warm = waitAll("warm", P, Math.round((warmupChunks / R + 60) * 1000), "warm-up turn");
    workers[0].send({ cmd: "send", prompt: "WARMUP: stream a few stamps." });
    await warm;
    result.warmup_chunks = warmupChunks;
  }
  const started = waitAll("started", P, 10000, "start");
  for (const w of workers) w.send({ cmd: "start" });
  await started;
  const cpu0 = treeCpu(pid);
  const mach0 = machineCpu();
  const done = waitAll("done", P, streamTimeoutMs + 30000, "stream");
  const sent = waitAll("sent", 1, 60000, "session.send");
  const tSend = now();
  workers[0].send({ cmd: "send", prompt: "PACED: stream the stamps." });
  await sent;
  const res = await done;
  const cpu1 = treeCpu(pid);
  const mach1 = machineCpu();
  result.machine_busy = round((mach1.busy - mach0.busy) / (mach1.total - mach0.total), 2);
  result.server_procs = cpu1.procs;
  result.server_hwm_kb = status("VmHWM");

  const lat = new Float64Array(res.reduce((a, m) => a + m.lat.length, 0));
  let k = 0;
  for (const m of res) for (const x of m.lat) lat[k++] = x;
  lat.sort();
  const at = (q) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(q * lat.length))] : null);
  // Per chunk, the first receipt over all clients: the model path before the fan-out.
  const first = [];
  for (let i = 0; i < M; i++) {
    let best = Infinity;
    for (const m of res) if (m.firstLat[i] != null && m.firstLat[i] < best) best = m.firstLat[i];
    if (Number.isFinite(best)) first.push(best);
  }
  // Where the worst first receipts fall in the stream (chunk index: ms), to tell a start-up
  // transient from stalls spread over the stream.
  const firstByChunk = [];
  for (let i = 0; i < M; i++) {
    let best = Infinity;
    for (const m of res) if (m.firstLat[i] != null && m.firstLat[i] < best) best = m.firstLat[i];
    firstByChunk.push([i, best]);
  }
  result.first_worst_chunks = firstByChunk
    .filter((e) => Number.isFinite(e[1])).sort((a, b) => b[1] - a[1]).slice(0, 8)
    .map(([i, x]) => `${i}: ${round(x, 1)}`).join(", ");
  first.sort((a, b) => a - b);
  const atF = (q) => (first.length ? first[Math.min(first.length - 1, Math.floor(q * first.length))] : null);
  const split = (key) => {
    const a = new Float64Array(res.reduce((n, m) => n + m[key].length, 0));
    let j = 0;
    for (const m of res) for (const x of m[key]) a[j++] = x;
    a.sort();
    const q = (p) => (a.length ? round(a[Math.min(a.length - 1, Math.floor(p * a.length))], 1) : null);
    return { p50: q(0.5), p99: q(0.99), max: a.length ? round(a[a.length - 1], 1) : null };
  };
  result.to_event_ms = split("toEvent");
  result.to_receipt_ms = split("toReceipt");
  const received = res.reduce((a, m) => a + m.received, 0);
  Object.assign(result, {
    ended: [...new Set(res.map((m) => m.why))].join(", "),
    expected: result.attached * M,
    received,
    duplicates: res.reduce((a, m) => a + m.dupes, 0),
    delta_events: res.reduce((a, m) => a + m.deltas, 0),
    clients_short: res.reduce((a, m) => a + m.short, 0),
    clients_idle: res.reduce((a, m) => a + m.idle, 0),
    uncaught: res.reduce((a, m) => a + m.uncaught, 0),
    p50_ms: round(at(0.5)),
    p99_ms: round(at(0.99)),
    p999_ms: round(at(0.999)),
    max_ms: round(lat.length ? lat[lat.length - 1] : null),
    first_p50_ms: round(atF(0.5)),
    first_p99_ms: round(atF(0.99)),
    first_max_ms: round(first.length ? first[first.length - 1] : null),
    stream_s: round((Math.max(...res.map((m) => m.lastAt)) - tSend) / 1000, 2),
    server_cpu_s: round(cpu1.s - cpu0.s, 2),
    server_cpu_per_delta_us: received ? round(((cpu1.s - cpu0.s) * 1e6) / received, 2) : null,
    client_cpu_s: res.map((m) => round(m.cpuUserS + m.cpuSysS, 2)),
    client_cpu_s_total: round(res.reduce((a, m) => a + m.cpuUserS + m.cpuSysS, 0), 2),
    notes: res.flatMap((m) => m.notes).slice(0, 5),
  });
  const log = fs.readFileSync(modelLog, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
  const streamDone = log.filter((r) => r.event === "paced stream done").at(-1);
  result.model_requests = log.filter((r) => r.method).map((r) => `${r.method} ${r.path} ${r.kind}`);
  result.model_timer_late_max_ms = streamDone ? round(streamDone.timer_late_max_ms) : null;
  finish(0);
} catch (err) {
  result.error = String(err?.message ?? err);
  finish(1);
}

// A fake OpenAI-compatible model endpoint that streams at a model's pace.
//
//   node fake-model.mjs [--chunks M] [--rate R] [--warmup W] [--log FILE]
//
// Listens on 127.0.0.1, port 0, and prints `listening on port N`. `POST …/chat/completions`
// whose last user message contains the word PACED answers (stream:true) with an SSE stream of
// M `chat.completion.chunk` text deltas, chunk i due at start + i / R seconds (absolute
// schedule, so timer lateness does not accumulate), each written on its own; then a `stop`
// chunk, a usage chunk and `data: [DONE]`. Chunk i's text is `[i:T] `, where T is
// `process.hrtime` (CLOCK_MONOTONIC, system-wide) in ms with µs decimals, taken just before
// the write, so the client processes on this machine can subtract it from their receipt time.
// WARMUP in the last user message gets the same with W chunks (default 50). Any other
// completion request (the runtime may ask for titles and the like) gets a short `ok` reply,
// streamed or not as asked. `GET …/models` lists `fake-model`. Every request's method, path
// and kind is appended to --log (default stderr) as one JSON line.
import http from "node:http";
import fs from "node:fs";
import { performance } from "node:perf_hooks";

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const chunks = Number(arg("chunks", "500"));
const rate = Number(arg("rate", "100"));
const warmupChunks = Number(arg("warmup", "50"));
const logFile = arg("log", null);
// CLOCK_MONOTONIC in ms: one clock for every process on this machine (timeOrigin + now() is
// not: each process fixes its own timeOrigin at start, and they differed by tens of ms here).
const now = () => Number(process.hrtime.bigint()) / 1e6;
const log = (rec) => {
  const line = JSON.stringify({ t: now(), ...rec }) + "\n";
  if (logFile) fs.appendFileSync(logFile, line);
  else process.stderr.write(line);
};

let seq = 0;
const sse = (res, obj) => res.write(`data: ${JSON.stringify(obj)}\n\n`);

function chunk(id, delta, finish) {
  return {
    id,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model: "fake-model",
    choices: [{ index: 0, delta, finish_reason: finish }],
  };
}

function lastUserText(body) {
  const msgs = Array.isArray(body?.messages) ? body.messages : [];
  for (let i = msgs.length - 1; i >= 0; i--) {
    if (msgs[i].role !== "user") continue;
    const c = msgs[i].content;
    if (typeof c === "string") return c;
    if (Array.isArray(c)) return c.map((p) => p?.text ?? "").join("");
  }
  return "";
}

function finish(res, id, chunks) {
  sse(res, chunk(id, {}, "stop"));
  sse(res, {
    id,
    object: "chat.completion.chunk",
    created: Math.floor(Date.now() / 1000),
    model: "fake-model",
    choices: [],
    usage: { prompt_tokens: 10, completion_tokens: chunks, total_tokens: 10 + chunks },
  });
  res.write("data: [DONE]\n\n");
  res.end();
}

function paced(res, id, started, chunks) {
  const interval = 1000 / rate;
  const t0 = performance.now();
  let i = 0;
  let lateMax = 0;
  res.on("close", () => {
    if (i < chunks) log({ event: "client closed the stream", id, sent: i });
  });
  const tick = () => {
    if (res.destroyed) return;
    const lateness = performance.now() - (t0 + i * interval);
    if (lateness > lateMax) lateMax = lateness;
    const content = `[${i}:${now().toFixed(3)}] `;
    sse(res, chunk(id, i === 0 ? { role: "assistant", content } : { content }, null));
    i++;
    if (i < chunks) {
      setTimeout(tick, Math.max(0, t0 + i * interval - performance.now()));
    } else {
      finish(res, id, chunks);
      log({ event: "paced stream done", id, chunks, rate, ms: now() - started, timer_late_max_ms: lateMax });
    }
  };
  tick();
}

const server = http.createServer({ noDelay: true }, (req, res) => {
  const started = now();
  let raw = "";
  req.setEncoding("utf8");
  req.on("data", (d) => (raw += d));
  req.on("end", () => {
    let body = null;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {}
    const path = req.url.split("?")[0];
    if (req.method === "GET" && path.endsWith("/models")) {
      log({ method: req.method, path, kind: "models" });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ object: "list", data: [{ id: "fake-model", object: "model", owned_by: "bench" }] }));
      return;
    }
    if (req.method === "POST" && path.endsWith("/chat/completions")) {
      const id = `chatcmpl-${++seq}`;
      const text = lastUserText(body);
      const n = /\bPACED\b/.test(text) ? chunks : /\bWARMUP\b/.test(text) ? warmupChunks : 0;
      const kind = n === chunks ? "paced" : n ? "warmup" : "short";
      log({ method: req.method, path, kind, id, stream: !!body?.stream });
      if (!body?.stream) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({
          id, object: "chat.completion", created: Math.floor(Date.now() / 1000), model: "fake-model",
          choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
          usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 },
        }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
      res.flushHeaders();
      if (n) paced(res, id, started, n);
      else {
        sse(res, chunk(id, { role: "assistant", content: "ok" }, null));
        finish(res, id, 1);
      }
      return;
    }
    log({ method: req.method, path, kind: "unknown", body: raw.slice(0, 200) });
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message: `fake-model: no route ${req.method} ${path}` } }));
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log(`listening on port ${server.address().port}`);
});

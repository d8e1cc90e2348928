// Request round trip from the official Copilot Node SDK, unmodified, over TCP.
//
//   node latency.mjs --port N [--label NAME] [--requests 500] [--warmup 20]
//
// Connects one CopilotClient to an already running server (RuntimeConnection.forUri), then
// times `client.ping()` one request at a time: from the call to its resolved promise. Prints
// one JSON line: {label, server_version (from `status.get`), requests, p50_ms, p90_ms, p99_ms,
// max_ms, mean_ms, over_20ms}.
import { CopilotClient, RuntimeConnection } from "@github/copilot-sdk";

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

const port = Number(arg("port"));
if (!Number.isInteger(port) || port <= 0) {
  console.error("usage: node latency.mjs --port N [--label NAME] [--requests N] [--warmup N]");
  process.exit(2);
}
const label = arg("label", `port ${port}`);
const requests = Number(arg("requests", "500"));
const warmup = Number(arg("warmup", "20"));

const client = new CopilotClient({ connection: RuntimeConnection.forUri(`127.0.0.1:${port}`) });
await client.start();
const status = await client.getStatus().catch(() => ({}));
for (let i = 0; i < warmup; i++) await client.ping(`warmup ${i}`);

const ms = [];
for (let i = 0; i < requests; i++) {
  const t0 = process.hrtime.bigint();
  await client.ping(`ping ${i}`);
  ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
ms.sort((a, b) => a - b);
const at = (q) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))];
const round = (x) => Math.round(x * 1000) / 1000;
console.log(
  JSON.stringify({
    label,
    server_version: status.version ?? null,
    requests,
    p50_ms: round(at(0.5)),
    p90_ms: round(at(0.9)),
    p99_ms: round(at(0.99)),
    max_ms: round(ms[ms.length - 1]),
    mean_ms: round(ms.reduce((a, b) => a + b, 0) / ms.length),
    over_20ms: ms.filter((x) => x > 20).length,
  }),
);
// Exit without `client.stop()`: against a server that keeps the socket open it waits.
process.exit(0);

#!/usr/bin/env bash
# Many official Node SDK clients on one session whose deltas come from a model at its pace,
# through the model path, against agentwire and against the real Copilot runtime in one run.
#
#   benches/node-paced/run.sh
#
# Knobs (environment):
#   KS="1 10 100 1000" client counts; for each K, agentwire then the real runtime (K = 1 gives
#                      each server's fixed cost of a turn, for the marginal CPU column)
#   R=100              chunks per second from the fake model endpoint
#   M=500              chunks per response
#   WARMUP=50          chunks of the unmeasured turn every run starts with (0: none)
#   PROCS=             client processes (default max(2, ceil(K / 100)), at most K; paced.mjs)
#   REAL=1             REAL=0 skips the real runtime; AGENTWIRE=0 skips agentwire
#   RUN_TIMEOUT=600    seconds before one run (one server, one K) is killed
#   SETUP_TIMEOUT=300  seconds for all K clients to attach
#   LOG_DIR=           if set, each run's server stdout/stderr and endpoint log are kept there
#   AGENTWIRE_BIN      default target/release/agentwire (or $CARGO_TARGET_DIR/release/…),
#                      started as `agentwire --port 0 --no-store`
#
# Every run starts a fresh fake-model.mjs (`--chunks M --rate R`) and a fresh server: agentwire
# as above, the real runtime as the `copilot-runtime` bundled in @github/copilot-sdk-linux-x64
# with `--headless --no-auto-update --no-auto-login --port N` and HOME, COPILOT_HOME and XDG_*
# in a fresh temporary directory. The sessions are BYOK (`provider: {type: "openai", baseUrl:
# the fake endpoint}`), so both servers call the endpoint themselves. The npm packages are
# installed on first use at the versions package.json and package-lock.json pin.
# Prints `uptime` before and after each run and at the end, one JSON line per run (paced.mjs)
# and a Markdown table.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
ks="${KS:-1 10 100 1000}"
rate="${R:-100}"
chunks="${M:-500}"
warmup="${WARMUP:-50}"
run_timeout="${RUN_TIMEOUT:-600}"
setup_timeout="${SETUP_TIMEOUT:-300}"
agentwire_bin="${AGENTWIRE_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/agentwire}"

if [ ! -d "$here/node_modules/@github/copilot-sdk" ]; then
  (cd "$here" && npm install --no-audit --no-fund >&2)
fi
real_bin="$here/node_modules/@github/copilot-sdk-linux-x64/prebuilds/linux-x64/copilot-runtime"
real_version="$(node -p 'require(process.argv[1]).copilotCliVersion' \
  "$here/node_modules/@github/copilot-sdk/package.json")"
if [ "${AGENTWIRE:-1}" != 0 ] && [ ! -x "$agentwire_bin" ]; then
  echo "not an executable: $agentwire_bin (cargo build --release -p agentwire-cli)" >&2
  exit 2
fi

scratch="$(mktemp -d)"
server_pid=""
model_pid=""
stop() {
  for p in "$server_pid" "$model_pid"; do
    if [ -n "$p" ]; then
      kill "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    fi
  done
  server_pid=""
  model_pid=""
}
trap 'stop; rm -rf "$scratch"' EXIT
results="$scratch/results.jsonl"
: >"$results"

# Waits (10 s at most) for a `<prefix> N` line in file $1 and prints N.
port_from() {
  local n=""
  for _ in $(seq 1 100); do
    n="$(sed -n "s/^$2\([0-9][0-9]*\)\$/\1/p" "$1" | head -1)"
    [ -n "$n" ] && { echo "$n"; return 0; }
    sleep 0.1
  done
  return 1
}

start_model() {
  : >"$scratch/model.log"
  node "$here/fake-model.mjs" --chunks "$chunks" --rate "$rate" --warmup "$warmup" --log "$scratch/model.log" \
    >"$scratch/model.out" 2>"$scratch/model.err" &
  model_pid=$!
  model_port="$(port_from "$scratch/model.out" 'listening on port ')" \
    || { echo "fake-model.mjs did not start" >&2; cat "$scratch/model.err" >&2; exit 1; }
}

start_agentwire() {
  "$agentwire_bin" --port 0 --no-store >"$scratch/server.out" 2>"$scratch/server.err" &
  server_pid=$!
  port="$(port_from "$scratch/server.out" 'listening on port ')" \
    || { echo "agentwire did not start" >&2; cat "$scratch/server.err" >&2; exit 1; }
  label="agentwire"
}

start_real() {
  local home="$scratch/home"
  rm -rf "$home"
  mkdir -p "$home/.copilot" "$home/.config" "$home/.local/share" "$home/.local/state" "$home/.cache"
  port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
  env HOME="$home" COPILOT_HOME="$home/.copilot" XDG_CONFIG_HOME="$home/.config" \
    XDG_DATA_HOME="$home/.local/share" XDG_STATE_HOME="$home/.local/state" \
    XDG_CACHE_HOME="$home/.cache" \
    "$real_bin" --headless --no-auto-update --no-auto-login --port "$port" \
    >"$scratch/server.out" 2>"$scratch/server.err" &
  server_pid=$!
  port_from "$scratch/server.out" 'CLI server listening on port ' >/dev/null \
    || { echo "copilot-runtime did not start" >&2; cat "$scratch/server.err" >&2; exit 1; }
  label="copilot-runtime $real_version"
}

# One run: server $1 (agentwire|real), K = $2.
run_one() {
  start_model
  "start_$1"
  echo "uptime before $label K=$2: $(uptime)" >&2
  local procs_arg=()
  [ -n "${PROCS:-}" ] && procs_arg=(--procs "$PROCS")
  local line rc=0
  line="$(timeout -k 5 "$run_timeout" node "$here/paced.mjs" --port "$port" --pid "$server_pid" \
    --model-port "$model_port" --model-log "$scratch/model.log" --label "$label" \
    --clients "$2" --chunks "$chunks" --rate "$rate" --warmup "$warmup" --setup-timeout "$setup_timeout" \
    "${procs_arg[@]}")" || rc=$?
  if [ -z "$line" ]; then
    line="$(node -e 'console.log(JSON.stringify({label:process.argv[1],K:+process.argv[2],R:+process.argv[3],M:+process.argv[4],error:`paced.mjs exited ${process.argv[5]} with no result (killed after ${process.argv[6]} s?)`}))' \
      "$label" "$2" "$rate" "$chunks" "$rc" "$run_timeout")"
  fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    line="$(node -e 'const r=JSON.parse(process.argv[1]);r.server_exited=true;console.log(JSON.stringify(r))' "$line")"
  fi
  echo "$line" | tee -a "$results"
  if [ -n "${LOG_DIR:-}" ]; then
    mkdir -p "$LOG_DIR"
    local tag="$1-K$2-R$rate-M$chunks"
    cp "$scratch/server.out" "$LOG_DIR/$tag.server.out"
    cp "$scratch/server.err" "$LOG_DIR/$tag.server.err"
    cp "$scratch/model.log" "$LOG_DIR/$tag.model.log"
  fi
  if [ -s "$scratch/server.err" ]; then
    echo "($label stderr, last lines:)" >&2
    tail -5 "$scratch/server.err" >&2
  fi
  stop
  echo "uptime after $label K=$2: $(uptime)" >&2
}

echo "uptime before: $(uptime)"
for k in $ks; do
  if [ "${AGENTWIRE:-1}" != 0 ]; then run_one agentwire "$k"; fi
  if [ "${REAL:-1}" != 0 ]; then run_one real "$k"; fi
done
echo "uptime after: $(uptime)"

echo
echo "| server | K | R | M | deltas received / expected | p50 ms | p99 ms | p99.9 ms | p99 split: write → event / event → receipt ms | server CPU s (µs per delta) | marginal µs per delta | peak RSS MiB | RSS per joined client KiB | client CPU s | machine busy | load 1-min |"
echo "|---|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"
node -e '
  const f = (x, d = 1) => (x == null ? "" : Number(x).toFixed(d));
  const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map((l) => JSON.parse(l));
  // Marginal CPU: over the smallest-K run of the same server, (CPU - CPU there) / (deltas - deltas there).
  const base = new Map();
  for (const r of rows) if (!r.error && (!base.has(r.label) || r.K < base.get(r.label).K)) base.set(r.label, r);
  for (const r of rows) {
    if (r.error) {
      console.log(`| ${r.label} | ${r.K} | ${r.R} | ${r.M} | **${r.error}**${r.attached != null ? ` (${r.attached} attached)` : ""} | | | | | | | | | | | ${r.load_before?.[0] ?? ""} |`);
      continue;
    }
    const b = base.get(r.label);
    const marginal = b && r.received > b.received ? ((r.server_cpu_s - b.server_cpu_s) * 1e6) / (r.received - b.received) : null;
    console.log(`| ${r.label} | ${r.K} | ${r.R} | ${r.M} | ${r.received} / ${r.expected}${r.attached < r.K ? ` (**${r.attached} of ${r.K} attached**, ${r.join_failed} joins failed)` : ""}${r.ended !== "all idle" ? ` (${r.ended})` : ""} | ${f(r.p50_ms, 2)} | ${f(r.p99_ms, 2)} | ${f(r.p999_ms, 2)} | ${f(r.to_event_ms?.p99)} / ${f(r.to_receipt_ms?.p99)} | ${f(r.server_cpu_s, 2)} (${f(r.server_cpu_per_delta_us)}) | ${f(marginal)} | ${f(r.server_hwm_kb / 1024)} | ${f(r.rss_per_client_kb)} | ${f(r.client_cpu_s_total, 2)} | ${f(r.machine_busy * 100, 0)} % | ${r.load_before[0]} |`);
  }' "$results"

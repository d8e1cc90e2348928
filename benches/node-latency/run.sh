#!/usr/bin/env bash
# Request round trip (p50/p99) from the official, unmodified Copilot Node SDK over TCP on
# loopback, against agentwire on each runtime and against the real Copilot runtime, in one run.
#
#   benches/node-latency/run.sh [LABEL=BINARY ...]
#
# Each LABEL=BINARY is an agentwire binary to measure (default: one, `agentwire=$AGENTWIRE_BIN`,
# and AGENTWIRE_BIN defaults to target/release/agentwire, or $CARGO_TARGET_DIR/release/agentwire),
# for example `before=/tmp/agentwire-before after=target/release/agentwire`. Every binary is
# started as `BINARY --runtime R --port 0 --no-store` for R in $RUNTIMES (default:
# tokio smol async-std). The real runtime is the `copilot-runtime` bundled in the npm package
# @github/copilot-sdk-linux-x64, started with `--headless --no-auto-update --no-auto-login
# --port N` and HOME, COPILOT_HOME and XDG_* in a fresh temporary directory; REAL=0 skips it.
#
# ACK_VARIANTS=1 also measures ack_variants.py, a minimal Python ping server, once per ACK
# strategy (none, TCP_QUICKACK once at accept, after every write, after every read).
#
# REQUESTS (default 500) pings per server after WARMUP (default 20). The npm packages are
# installed on first use (`npm install` into this directory's node_modules), at the versions
# package.json and package-lock.json pin.
# Prints `uptime` before and after, one JSON line per server and a Markdown table.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
requests="${REQUESTS:-500}"
warmup="${WARMUP:-20}"
runtimes="${RUNTIMES:-tokio smol async-std}"
default_bin="${AGENTWIRE_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/agentwire}"
if [ $# -eq 0 ]; then set -- "agentwire=$default_bin"; fi

if [ ! -d "$here/node_modules/@github/copilot-sdk" ]; then
  (cd "$here" && npm install --no-audit --no-fund >&2)
fi
real_bin="$here/node_modules/@github/copilot-sdk-linux-x64/prebuilds/linux-x64/copilot-runtime"

scratch="$(mktemp -d)"
server_pid=""
stop_server() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
  fi
}
trap 'stop_server; rm -rf "$scratch"' EXIT

results="$scratch/results.jsonl"
: >"$results"

# Times one server listening on 127.0.0.1:$2 under the label $1.
measure() {
  node "$here/latency.mjs" --port "$2" --label "$1" --requests "$requests" --warmup "$warmup" \
    | tee -a "$results"
}

# Starts `$@` and sets $port from its `listening on port N` line (agentwire prints it first,
# and so does ack_variants.py).
start_server() {
  local out="$scratch/stdout"
  : >"$out"
  "$@" >"$out" 2>"$scratch/stderr" &
  server_pid=$!
  port=""
  for _ in $(seq 1 100); do
    port="$(sed -n 's/^listening on port \([0-9]*\)$/\1/p' "$out")"
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  echo "no 'listening on port' from: $*" >&2
  cat "$scratch/stderr" >&2
  return 1
}

echo "uptime before: $(uptime)"
for spec in "$@"; do
  label="${spec%%=*}"
  bin="${spec#*=}"
  [ -x "$bin" ] || { echo "not an executable: $bin" >&2; exit 2; }
  for rt in $runtimes; do
    start_server "$bin" --runtime "$rt" --port 0 --no-store
    measure "$label $rt" "$port"
    stop_server
  done
done

if [ "${ACK_VARIANTS:-0}" != 0 ]; then
  for mode in none once after-write after-read; do
    start_server python3 "$here/ack_variants.py" --mode "$mode"
    measure "ack_variants.py $mode" "$port"
    stop_server
  done
fi

if [ "${REAL:-1}" != 0 ]; then
  home="$scratch/home"
  mkdir -p "$home/.copilot" "$home/.config" "$home/.local/share" "$home/.local/state" "$home/.cache"
  port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
  env HOME="$home" COPILOT_HOME="$home/.copilot" XDG_CONFIG_HOME="$home/.config" \
    XDG_DATA_HOME="$home/.local/share" XDG_STATE_HOME="$home/.local/state" \
    XDG_CACHE_HOME="$home/.cache" \
    "$real_bin" --headless --no-auto-update --no-auto-login --port "$port" \
    >"$scratch/real.out" 2>"$scratch/real.err" &
  server_pid=$!
  for _ in $(seq 1 300); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  version="$(node -p 'require(process.argv[1]).copilotCliVersion' \
    "$here/node_modules/@github/copilot-sdk/package.json")"
  measure "copilot-runtime $version" "$port"
  stop_server
fi
echo "uptime after: $(uptime)"

echo
echo "| server | version | requests | p50 ms | p90 ms | p99 ms | max ms | > 20 ms |"
echo "|---|---|---|---|---|---|---|---|"
node -e '
  for (const line of require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n")) {
    const r = JSON.parse(line);
    console.log(`| ${r.label} | ${r.server_version ?? ""} | ${r.requests} | ${r.p50_ms} | ${r.p90_ms} | ${r.p99_ms} | ${r.max_ms} | ${r.over_20ms} |`);
  }' "$results"

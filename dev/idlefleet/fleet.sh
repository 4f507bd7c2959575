#!/bin/bash
# Sizes the controller on a fleet of idle TWDs (docs/performance.md, "5,000
# TWDs on one controller"). Run from the repository root after `make kube-bins bins`:
#
#   dev/idlefleet/fleet.sh start            devenv (Temporal in a SQLite file) and the controller
#   dev/idlefleet/fleet.sh grow 5000        grow the fleet to 5,000 TWDs (existing ones are kept)
#   dev/idlefleet/fleet.sh manager [BIN]    restart the controller (default .cache/bin/manager)
#   dev/idlefleet/fleet.sh measure LABEL [SECONDS]
#                                           the controller's RSS, live heap and CPU over SECONDS (180)
#   dev/idlefleet/fleet.sh stop
#
# Everything lives in .cache/fleet (FLEET_DIR); results.txt collects the measurements.
set -euo pipefail
root=$(pwd)
D=${FLEET_DIR:-$root/.cache/fleet}
mkdir -p "$D"

# Temporal's per-task-queue metrics held most of the dev server's memory
# (label sets for every version's task queues), and four partitions per
# task queue four times the matching state: neither is what is measured here.
# devenv's forced search-attribute refresh made every list page a
# persistence read, which hit the server's persistence rate limit.
temporal_config=(
	matching.maxDeployments=5200
	system.forceSearchAttributesCacheRefreshOnRead=false
	metrics.breakdownByTaskQueue=false
	metrics.breakdownByPartition=false
	metrics.breakdownByBuildID=false
	matching.numTaskqueueReadPartitions=1
	matching.numTaskqueueWritePartitions=1
)

# stop_process stops the process whose pid is in $D/$1.pid and waits for it.
stop_process() {
	[ -f "$D/$1.pid" ] || return 0
	local pid
	pid=$(cat "$D/$1.pid")
	kill -INT "$pid" 2>/dev/null || true
	while kill -0 "$pid" 2>/dev/null; do sleep 1; done
	rm -f "$D/$1.pid"
}

start_manager() {
	local bin=${1:-$root/.cache/bin/manager}
	stop_process manager
	setsid "$bin" --kubeconfig="$D/env/kubeconfig" --metrics-bind-address=127.0.0.1:18080 \
		--health-probe-bind-address=127.0.0.1:18081 --pprof-bind-address=127.0.0.1:18082 --webhook-port=0 \
		>>"$D/manager.log" 2>&1 &
	echo $! >"$D/manager.pid"
}

case ${1:-} in
start)
	stop_process manager
	stop_process devenv
	rm -f "$D/env/env.json"
	printf -- '--temporal-dynamic-config=%s\n' "${temporal_config[@]}" >"$D/devenv.args"
	printf '#!/bin/sh\nexec sleep 2147483647\n' >"$D/idle-pod"
	chmod +x "$D/idle-pod"
	rm -f "$D"/temporal.db*
	# shellcheck disable=SC2046
	setsid "$root/.cache/bin/devenv" --dir "$D/env" --kube-bin-dir "$root/.cache/kube" --program "idle-pod=$D/idle-pod" \
		--apiserver-port 0 --temporal-port 0 --temporal-ui-port -1 --temporal-pprof-port 18090 \
		--temporal-db "$D/temporal.db" $(cat "$D/devenv.args") >"$D/devenv.log" 2>&1 &
	echo $! >"$D/devenv.pid"
	until [ -f "$D/env/env.json" ]; do
		kill -0 "$(cat "$D/devenv.pid")" 2>/dev/null || { tail "$D/devenv.log"; exit 1; }
		sleep 2
	done
	"$root/.cache/kube/kubectl" --kubeconfig "$D/env/kubeconfig" apply --server-side -k config/crd >/dev/null
	"$root/.cache/kube/kubectl" --kubeconfig "$D/env/kubeconfig" wait --for=condition=Established crd --all >/dev/null
	start_manager
	echo "fleet environment in $D (Temporal pprof on 127.0.0.1:18090, the controller's on :18082)"
	;;
grow)
	go build -o "$D/idlefleet" ./dev/idlefleet
	RAINBOW_ENV_DIR=$D/env "$D/idlefleet" -n "${2:?grow N}" -workers 100 | tee -a "$D/grow.log"
	;;
manager)
	start_manager "${2:-}"
	;;
measure)
	label=${2:?measure LABEL [SECONDS]}
	window=${3:-180}
	pid=$(cat "$D/manager.pid")
	ticks() { awk '{print $14+$15}' "/proc/$pid/stat"; }
	t0=$(ticks) l0=$(cut -d' ' -f1-3 /proc/loadavg)
	sleep "$window"
	t1=$(ticks) l1=$(cut -d' ' -f1-3 /proc/loadavg)
	curl -s 127.0.0.1:18080/metrics >"$D/metrics-$label.txt"
	curl -s "127.0.0.1:18082/debug/pprof/heap?gc=1" >"$D/heap-$label.pb.gz"
	rss=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
	live=$(awk '/^go_gc_heap_live_bytes /{printf "%.1f", $2/1e6}' "$D/metrics-$label.txt")
	twds=$("$root/.cache/kube/kubectl" --kubeconfig "$D/env/kubeconfig" get twd -A --no-headers | wc -l)
	temporal=$(awk '/VmRSS/{print int($2/1024)}' "/proc/$(cat "$D/devenv.pid")/status")
	echo "$label $(date -u +%FT%H:%M) twds=$twds rss_mib=$((rss / 1024)) live_mb=$live" \
		"cpu_s_per_min=$(awk -v a="$t0" -v b="$t1" -v w="$window" 'BEGIN{printf "%.2f", (b-a)/100*60/w}')" \
		"devenv_rss_mib=$temporal load=[$l0]->[$l1]" | tee -a "$D/results.txt"
	;;
stop)
	stop_process manager
	stop_process devenv
	;;
*)
	sed -n '2,12p' "$0"
	exit 2
	;;
esac

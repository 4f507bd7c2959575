#!/usr/bin/env bash
# make demo: starts the local environment (control plane, node agent, Temporal
# with its UI) and shows that it is up. Ctrl-C stops everything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
state="$root/.dev"
bin="$root/.cache/bin"
kubectl="$root/.cache/kube/kubectl"

mkdir -p "$state"
"$bin/devenv" --dir "$state" --kube-bin-dir "$root/.cache/kube" --program-dir "$bin" "$@" 2> >(tee "$state/devenv.log" >&2) &
devenv=$!
cleanup() {
  trap - INT TERM EXIT
  if kill -0 "$devenv" 2>/dev/null; then
    kill -TERM "$devenv" 2>/dev/null || true
    wait "$devenv" 2>/dev/null || true
  fi
}
trap cleanup INT TERM EXIT

echo ">> Waiting for the local environment (control plane, node agent, Temporal)..."
for _ in $(seq 1 1200); do
  [[ -f "$state/env.json" ]] && break
  kill -0 "$devenv" 2>/dev/null || { echo "devenv exited; see $state/devenv.log" >&2; exit 1; }
  sleep 0.1
done
[[ -f "$state/env.json" ]] || { echo "devenv did not become ready in 2 minutes" >&2; exit 1; }

export KUBECONFIG="$state/kubeconfig"
echo
echo ">> The cluster's node (the node agent runs pods as local processes):"
"$kubectl" get nodes -o wide
echo
echo ">> Point your own kubectl at it with:  export KUBECONFIG=$KUBECONFIG"
echo ">> The environment runs until you press Ctrl-C."
wait "$devenv"

#!/usr/bin/env bash
# make demo: starts the local environment (control plane, node agent, Temporal
# with its UI), runs the demo worker on it and shows its pods and its version
# in Temporal. Ctrl-C stops everything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
state="$root/.dev"
bin="$root/.cache/bin"
kubectl="$root/.cache/kube/kubectl"

mkdir -p "$state"
rm -f "$state/env.json"   # a stale one from an earlier run would look ready
# devenv writes straight to the terminal: a pipe here would die with Ctrl-C
# before devenv has stopped its processes.
"$bin/devenv" --dir "$state" --kube-bin-dir "$root/.cache/kube" --program-dir "$bin" "$@" &
devenv=$!
cleanup() {
  trap - INT TERM EXIT
  if kill -0 "$devenv" 2>/dev/null; then
    kill -TERM "$devenv" 2>/dev/null || true
  fi
  wait "$devenv" 2>/dev/null || true
}
trap cleanup INT TERM EXIT

echo ">> Waiting for the local environment (control plane, node agent, Temporal)..."
for _ in $(seq 1 1200); do
  [[ -f "$state/env.json" ]] && break
  kill -0 "$devenv" 2>/dev/null || { echo "devenv exited; see the messages above" >&2; exit 1; }
  sleep 0.1
done
[[ -f "$state/env.json" ]] || { echo "devenv did not become ready in 2 minutes" >&2; exit 1; }

export KUBECONFIG="$state/kubeconfig"
echo
echo ">> Running the demo worker as a plain Deployment (examples/local-environment/demo-worker.yaml)"
"$kubectl" apply -f examples/local-environment/demo-worker.yaml
"$kubectl" rollout status deployment/demo-worker --timeout=2m
"$kubectl" get nodes,pods -o wide
echo
echo ">> Its workers poll Temporal as version default/demo-worker:v1 (see the UI's Deployments page)."
echo ">> Point your own kubectl at the cluster with:  export KUBECONFIG=$KUBECONFIG"
echo ">> The environment runs until you press Ctrl-C."
wait "$devenv"

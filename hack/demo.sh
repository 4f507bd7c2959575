#!/usr/bin/env bash
# make demo: starts the local environment (control plane, node agent, Temporal
# with its UI) and the controller, then runs the demo program (dev/cmd/demo): it
# applies examples/demo, keeps workflows running and rolls out two versions
# with the Progressive strategy, printing the status as it changes. Then
# everything keeps running until Ctrl-C, which stops it all.
#
# DEMO_STORY=autoscaling (make demo-autoscaling) tells the autoscaling story
# instead: examples/autoscaling, an HPA per version on its own backlog, read
# through the controller's external metrics API, which this script registers.
# DEMO_STORY=abort (make demo-abort): examples/demo/abort.yaml rolls out
# under analysis; v3 fails half of its workflows and is aborted on its own.
#
# Logs: .dev/devenv.log (environment), .dev/manager.log (controller).
set -euo pipefail
story_name=${DEMO_STORY:-rollout}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
state="$root/.dev"
bin="$root/.cache/bin"
kubectl="$root/.cache/kube/kubectl"

devenv="" manager="" story=""
alive() { [[ -n "$1" ]] && kill -0 "$1" 2>/dev/null; }
stop() { # pid: SIGTERM (unless already gone), then wait for it
  if alive "$1"; then kill -TERM "$1" 2>/dev/null || true; fi
  [[ -n "$1" ]] && wait "$1" 2>/dev/null || true
}
cleanup() {
  trap - INT TERM EXIT
  echo
  echo ">> Stopping the demo, the controller and the local environment (workers, Temporal, control plane)..."
  stop "$story"
  stop "$manager"
  stop "$devenv"
  echo ">> Stopped."
}
trap 'cleanup; exit 0' INT TERM  # Ctrl-C is how the demo ends
trap cleanup EXIT

mkdir -p "$state"
rm -f "$state/env.json"   # a stale one from an earlier run would look ready
echo ">> Starting the local environment: control plane, node agent, Temporal and its UI (log: .dev/devenv.log)"
# Into a file, not a pipe: a pipe's reader would die with Ctrl-C before
# devenv has stopped its processes. Each Go program here handles Ctrl-C
# itself; cleanup also sends SIGTERM.
"$bin/devenv" --dir "$state" --kube-bin-dir "$root/.cache/kube" --program-dir "$bin" "$@" >"$state/devenv.log" 2>&1 &
devenv=$!
for _ in $(seq 1 1200); do
  [[ -f "$state/env.json" ]] && break
  alive "$devenv" || { echo "devenv exited:" >&2; tail -n 20 "$state/devenv.log" >&2; exit 1; }
  sleep 0.1
done
[[ -f "$state/env.json" ]] || { echo "devenv did not become ready in 2 minutes; see .dev/devenv.log" >&2; exit 1; }
for _ in $(seq 1 20); do grep -q 'Press Ctrl-C' "$state/devenv.log" && break; sleep 0.1; done
sed -n '/Kubernetes API/,/Logs/p' "$state/devenv.log"
echo

export KUBECONFIG="$state/kubeconfig"
echo ">> Installing the CRDs (config/crd) and the webhook configuration of a local controller (dev/webhook)"
"$kubectl" apply --server-side --field-manager=rainbow-demo -k config/crd >/dev/null
# kubectl wait fails outright while a new CRD has no conditions yet.
for i in $(seq 1 60); do
  "$kubectl" wait --for condition=established --timeout=30s crd/temporalworkerdeployments.temporal.io \
    crd/temporalconnections.temporal.io crd/temporalworkerownedresources.temporal.io >/dev/null 2>&1 && break
  (( i < 60 )) || { echo "the CRDs were not established in time" >&2; exit 1; }
  sleep 0.5
done
"$kubectl" apply --server-side --field-manager=rainbow-demo -k dev/webhook >/dev/null

echo ">> Starting the controller (.cache/bin/manager, log: .dev/manager.log)"
# The TemporalWorkerOwnedResource webhook on https://localhost:9443, with a
# certificate the controller makes itself (docs/admission-webhook.md). For
# the autoscaling story the same server serves the external metrics API,
# which the API server reaches at the environment's host address.
metrics_svc=rainbow-local-external-metrics
extra=(--webhook-host 127.0.0.1)
if [[ $story_name == autoscaling ]]; then
  extra=(--webhook-host "" --external-metrics --backlog-interval 5s
    --webhook-extra-dns-names "$metrics_svc.rainbow-system.svc")
fi
"$bin/manager" --kubeconfig "$KUBECONFIG" --metrics-bind-address 0 --health-probe-bind-address 0 \
  "${extra[@]}" --webhook-port 9443 --webhook-cert-dir "$state/webhook-certs" \
  --webhook-cert-rotation --webhook-write-certs --webhook-dns-name localhost \
  --webhook-secret rainbow-system/rainbow-webhook-cert --webhook-configuration-name rainbow-validating-webhook \
  --zap-devel >"$state/manager.log" 2>&1 &
manager=$!
# Until the API server gets the webhook's answers: a server-side dry run of
# a TemporalWorkerOwnedResource without a kind is refused by the webhook.
probe='{"apiVersion":"temporal.io/v1alpha1","kind":"TemporalWorkerOwnedResource","metadata":{"name":"webhook-probe","namespace":"rainbow-system"},"spec":{"workerRef":{"name":"probe"},"object":{"apiVersion":"v1"}}}'
for i in $(seq 1 240); do
  out=$("$kubectl" create --dry-run=server -f - <<<"$probe" 2>&1 || true)
  [[ $out == *"spec.object.kind: Required value"* ]] && break
  alive "$manager" || { echo "the controller exited:" >&2; tail -n 20 "$state/manager.log" >&2; exit 1; }
  (( i < 240 )) || { echo "the controller's webhook did not answer in 2 minutes: $out" >&2; exit 1; }
  sleep 0.5
done

if [[ $story_name == autoscaling ]]; then
  echo ">> Registering the controller's external metrics API (config/components/external-metrics, Service $metrics_svc)"
  hostip=$(sed -n 's/.*"hostIP": *"\([^"]*\)".*/\1/p' "$state/env.json")
  [[ -n $hostip ]] || { echo "the environment has no host address (hostIP in .dev/env.json)" >&2; exit 1; }
  "$kubectl" apply --server-side --field-manager=rainbow-demo -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: $metrics_svc, namespace: rainbow-system}
spec:
  ports: [{name: https, port: 443, targetPort: 9443}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: $metrics_svc
  namespace: rainbow-system
  labels: {kubernetes.io/service-name: $metrics_svc, endpointslice.kubernetes.io/managed-by: rainbow-demo}
addressType: IPv4
endpoints: [{addresses: ["$hostip"], conditions: {ready: true}}]
ports: [{name: https, port: 9443, protocol: TCP}]
EOF
  sed "s/name: rainbow-webhook\$/name: $metrics_svc/" config/components/external-metrics/apiservice.yaml |
    "$kubectl" apply --server-side --field-manager=rainbow-demo -f - >/dev/null
  for i in $(seq 1 120); do
    "$kubectl" get apiservice v1beta1.external.metrics.k8s.io -o 'jsonpath={.status.conditions[?(@.type=="Available")].status}' 2>/dev/null | grep -q True && break
    (( i < 120 )) || { echo "the external metrics API did not become available; see .dev/manager.log" >&2; exit 1; }
    sleep 0.5
  done
fi

"$bin/demo" --env-dir "$state" --examples "$root/examples/demo" --story "$story_name" &
story=$!

# Until Ctrl-C (the trap) or until something stops by itself.
status=0
wait -n "$story" "$manager" "$devenv" || status=$?
if ! alive "$devenv"; then
  echo ">> The local environment stopped; see .dev/devenv.log:" >&2
  tail -n 20 "$state/devenv.log" >&2
  exit 1
fi
if ! alive "$manager"; then
  echo ">> The controller stopped; see .dev/manager.log:" >&2
  tail -n 20 "$state/manager.log" >&2
  exit 1
fi
if (( status != 0 )); then
  echo
  echo ">> The demo did not go as planned (above). The controller's log is .dev/manager.log; the"
  echo ">> environment keeps running so you can look around (export KUBECONFIG=$KUBECONFIG)."
  echo ">> Press Ctrl-C to stop it."
  wait -n "$manager" "$devenv" || true
  exit 1
fi

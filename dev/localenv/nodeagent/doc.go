// Package nodeagent is a stand-in for kubelet and kube-scheduler in the local
// development environment: it registers one Node, binds every unscheduled pod
// (default scheduler) to it and runs the pods' containers as local processes.
//
// Images are not pulled. An image selects a local program by the last element
// of its repository path (without tag or digest): Config.Programs first (by full
// image reference, then by that short name), then an executable of that name in
// Config.SearchPath. The process argv is [program] + container.Args;
// container.Command is ignored because the image, not the pod, picks the
// program. Args get kubelet's $(VAR) expansion.
//
// Environment: the host's PATH and HOME, then the container's envFrom and env
// resolved like kubelet (literal values with $(VAR) expansion, secretKeyRef,
// configMapKeyRef, fieldRef; resourceFieldRef is ignored), then
// RAINBOW_IMAGE=<container image>. Service link variables and in-cluster
// KUBERNETES_SERVICE_* variables are not injected.
//
// Volumes: secret, configMap, emptyDir, downwardAPI and projected volumes
// (without a serviceAccountToken source) are materialized once per pod under
// <RootDir>/pods/<ns>_<name>_<uid>/volumes/<volume>/; hostPath volumes map to
// the host path itself. Because processes have no mount namespace, env values
// (and args, whole or after "--flag=") that equal or start with a mountPath are
// rewritten to the host directory. Projected volumes with a service-account
// token (kube-api-access-*) and other volume types are skipped silently, so
// paths into them are left untouched. Secret and ConfigMap updates are not
// propagated into already materialized volumes.
//
// Processes run with the pod directory as working directory, stdout and stderr
// appended to <podDir>/<container>.log, in their own process group with
// Pdeathsig SIGKILL. When the main process exits, the rest of its process
// group is killed, like a container's cgroup. Pdeathsig only reaches the
// direct child: if the agent itself is SIGKILLed, grandchildren survive.
//
// Status: podIP and hostIP are 127.0.0.1. Probes are not executed: a container
// is ready once its process has been running for one second. Restarts follow
// restartPolicy with CrashLoopBackOff back-off 1s, 2s, 4s ... 30s, reset after
// 60s of running. Init containers run sequentially; restartable init containers
// (sidecars) are started in order and kept running. Scheduling ignores node
// selectors, affinity and resources: there is only one node.
//
// Deletion: a pod with a deletionTimestamp gets SIGTERM on its process groups,
// SIGKILL after the deletion grace period, and is then deleted with grace
// period 0 and a UID precondition, as kubelet does. Volumes are removed; the
// pod directory with the logs is kept. A pod that disappears from the API is
// killed (SIGTERM, SIGKILL after 2s).
//
// Node: registered with Ready=True and a heartbeat every 30s. When Run returns
// the Node object is kept but marked Ready=False (best effort), so that a
// restarted agent simply flips it back.
package nodeagent

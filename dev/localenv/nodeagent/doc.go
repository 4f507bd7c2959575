// Package nodeagent is a stand-in for kubelet and kube-scheduler in the local
// development environment: it registers one Node, binds every unscheduled pod
// (default scheduler) to it and runs the pods' containers as local processes.
//
// Images are not pulled. An image that Config.Images maps to an OCI image
// layout runs from it under runc (see runc.go and docs/local-environment.md):
// its own root file system, user and securityContext, the host's network.
// Any other image selects a local program by the last element
// of its repository path (without tag or digest): Config.Programs first (by full
// image reference, then by that short name), then an executable of that name in
// Config.SearchPath. The process argv is [program] + container.Args;
// container.Command is ignored because the image, not the pod, picks the
// program. Args get kubelet's $(VAR) expansion.
//
// Environment: the host's PATH and HOME, HOSTNAME, the `kubernetes`
// Service's variables (KUBERNETES_SERVICE_HOST and _PORT and the
// KUBERNETES_PORT_* family, naming Config.APIServer: no ClusterIP routes
// here), then the container's envFrom and env resolved like kubelet
// (literal values with $(VAR) expansion, secretKeyRef, configMapKeyRef,
// fieldRef; resourceFieldRef is ignored), then RAINBOW_IMAGE=<container
// image>. Service link variables of other Services are not injected.
//
// Mount and UTS namespaces: when the agent may create them (root), each
// process starts in a mount namespace of its own, with mount propagation
// private, and every volumeMount bind-mounted at its mountPath (secret,
// configMap, downwardAPI and projected volumes read-only), and in a UTS
// namespace whose hostname is the pod's. The helper that sets this up
// between fork and exec is the agent's own binary (see package podexec).
// Nothing else is isolated: the process sees the host's file system
// around its mounts, runs as the agent's user, and mount points that do
// not exist are created (empty) on the host. Without the permission, the
// agent falls back to rewriting paths: env values (and args, whole or after
// "--flag=") that equal or start with a mountPath are rewritten to the
// volume's host directory.
//
// Volumes: secret, configMap, emptyDir, downwardAPI and projected volumes
// (service-account tokens included) are materialized under
// <RootDir>/pods/<ns>_<name>_<uid>/volumes/<volume>/; hostPath volumes map
// to the host path itself. Like kubelet, the files sit in a timestamped
// directory behind a ..data symlink that is swapped atomically, so updates
// reach running processes: Secret and ConfigMap changes as soon as the
// agent's informers see them, tokens (TokenRequest for the pod's service
// account, bound to the pod) at 80% of their lifetime. Other volume types
// are skipped silently.
//
// Network: pods share the node's network namespace, but each pod (unless
// hostNetwork) gets an address of its own from a block of 198.18.0.0/15
// that the agent adds to the loopback interface while it runs. Probes, the
// downward API and EndpointSlices use it. A process that listens on all
// addresses still takes its port for every pod.
//
// Processes run with the pod directory as working directory, stdout and stderr
// appended to <podDir>/<container>.log, in their own process group with
// Pdeathsig SIGKILL. When the main process exits, the rest of its process
// group is killed, like a container's cgroup. Pdeathsig only reaches the
// direct child: if the agent itself is SIGKILLed, grandchildren survive.
//
// Status: hostIP is 127.0.0.1. httpGet, tcpSocket and grpc probes run as with
// kubelet (see probes.go); exec probes run in containers under runc and
// count as succeeding for processes. Without a readiness probe a container
// is ready once its process has been running for one second. Restarts follow restartPolicy with CrashLoopBackOff
// back-off 1s, 2s, 4s ... 30s, reset after 60s of running. Init containers
// run sequentially; restartable init containers (sidecars) are started in
// order and kept running. Scheduling ignores node selectors, affinity and
// resources: there is only one node.
//
// Kubelet API: with Config.KubeletCertFile, the agent serves
// /containerLogs on 127.0.0.1 for `kubectl logs` (see kubelet.go).
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

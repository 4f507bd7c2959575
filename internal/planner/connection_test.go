package planner

import (
	"testing"
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

var (
	serverA  = Server{Address: "temporal-a:7233", NamespaceID: "ns-a"}
	serverA2 = Server{Address: "temporal.example.com:7233", NamespaceID: "ns-a"} // a new name of A
	serverB  = Server{Address: "temporal-b:7233", NamespaceID: "ns-b"}
)

// onServer puts every Deployment on srv, as created with it.
func onServer(srv Server) func(*Input) {
	return func(in *Input) {
		for i := range in.Deployments {
			in.Deployments[i].Server = srv
		}
	}
}

func connectedTo(srv Server) func(*Input) {
	return func(in *Input) { in.Server = srv }
}

// staleConnection marks every Deployment's injected connection stale.
func staleConnection(in *Input) {
	for i := range in.Deployments {
		in.Deployments[i].ConnectionStale = true
	}
}

func TestServerChanges(t *testing.T) {
	runCases(t, cases{
		"same server: nothing to sync": {
			in:   with(base(), rolledOut, onServer(serverA), connectedTo(serverA)),
			want: ready(expect{Requeue: time.Minute}),
		},
		"a new address of the same server: every version rolls to it, draining ones included; the current target is not Ready meanwhile": {
			in: with(base(), rolledOut, onServer(serverA), connectedTo(serverA2), staleConnection, func(in *Input) {
				setVersion(in, version("v1", draining))
			}),
			want: expect{Sync: []SyncDeployment{{Name: "worker-v1", BuildID: "v1", Roll: true}, {Name: "worker-v2", BuildID: "v2", Roll: true}},
				Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPollers, Progressing: condTrue,
				Requeue: 30 * time.Second, Events: []string{EventSyncConnection, EventSyncConnection}},
		},
		"only the Deployment settings changed: synced without a roll": {
			in: with(base(), rolledOut, onServer(serverA), connectedTo(serverA), func(in *Input) {
				in.Deployments[0].SettingsStale = true
			}),
			want: ready(expect{Sync: []SyncDeployment{{Name: "worker-v1", BuildID: "v1"}}, Requeue: time.Minute}),
		},
		"a Deployment made before namespace IDs were recorded, same address: the ID is recorded": {
			in:   with(base(), rolledOut, onServer(Server{Address: serverA.Address}), connectedTo(serverA)),
			want: ready(expect{Sync: []SyncDeployment{{Name: "worker-v1", BuildID: "v1"}, {Name: "worker-v2", BuildID: "v2"}}, Requeue: time.Minute}),
		},
		"another server: the target's workers stay where they are, and the rollout says why": {
			in: with(base(), rolledOut, onServer(serverA), connectedTo(serverB), staleConnection, func(in *Input) {
				// Server B has never seen this worker.
				in.Temporal = &TemporalState{Exists: false}
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalServerChanged, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{v1alpha1.ReasonTemporalServerChanged}, Message: "Roll out a new version"},
		},
		"another server without its namespace ID, and an address that changed: not moved": {
			in: with(base(), rolledOut, onServer(Server{Address: serverA.Address}), connectedTo(Server{Address: serverB.Address}), staleConnection, func(in *Input) {
				in.Temporal = &TemporalState{Exists: false}
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonTemporalServerChanged, Progressing: condFalse, Requeue: 30 * time.Second,
				Events: []string{v1alpha1.ReasonTemporalServerChanged}},
		},
		"a new version on the new server: the old server's version keeps its workers": {
			in: with(base(), onServer(serverA), connectedTo(serverB), func(in *Input) {
				in.Spec.TargetBuildID = "v3"
				in.Deployments = append(in.Deployments, Deployment{BuildID: "v3", Name: "worker-v3", Replicas: 3, Available: true, Server: serverB})
				// On server B only v3 exists, and it is current: v1 and v2
				// look never registered there.
				in.Temporal = &TemporalState{Exists: true, ManagerIdentity: me, LastModifierIdentity: me, CurrentBuildID: "v3",
					Versions: []TemporalVersion{version("v3", current)}}
			}),
			want: ready(expect{Requeue: time.Minute, Message: "Deployments [worker-v1 worker-v2] use the previous Temporal server"}),
		},
		"a Deployment another action touches is synced next time": {
			in: with(base(), onServer(serverA), connectedTo(serverA2), staleConnection, func(in *Input) {
				in.Deployments[1].Replicas = 1 // the target scales to spec.replicas first
			}),
			want: expect{Scale: []Scale{{Name: "worker-v2", BuildID: "v2", Replicas: 3, Reason: ScaleToSpec}},
				Sync:    []SyncDeployment{{Name: "worker-v1", BuildID: "v1", Roll: true}},
				Routing: &Routing{Op: SetCurrent, BuildID: "v2"}, Ready: condFalse, Reason: v1alpha1.ReasonWaitingForPromotion, Progressing: condTrue,
				Requeue: time.Second, Events: []string{EventScale, EventPromote, EventSyncConnection}},
		},
		"deleting: a version on the old server is waited on like an undrained one": {
			in: with(deleting(), onServer(serverA), connectedTo(serverB), func(in *Input) {
				in.Temporal = &TemporalState{Exists: false}
			}),
			want: expect{Ready: condFalse, Reason: v1alpha1.ReasonDeleting, Progressing: condTrue, Requeue: 15 * time.Second,
				Message: "versions [v1 v2] to drain"},
		},
	})
}

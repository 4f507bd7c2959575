package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/faultproxy"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TemporalProxy puts a fault proxy between the scenario and Temporal and
// points the TemporalConnection "temporal" at it (call it before NewRollout,
// which then finds the connection). The controller and the TWD's workers
// reach Temporal through it; the scenario's own clients do not.
func (s *Scenario) TemporalProxy() *faultproxy.Temporal {
	s.Helper()
	p, err := faultproxy.NewTemporal(s.Env.Info.TemporalAddress)
	if err != nil {
		s.Fatal(err)
	}
	s.Cleanup(p.Close)
	p.Capture = faultproxy.RoutingWrite
	conn := &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Name: harness.ConnectionName, Namespace: s.Namespace},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: p.Addr()},
	}
	if err := s.Env.Kube.Create(context.Background(), conn); err != nil {
		s.Fatal(err)
	}
	return p
}

// KubeProxy puts a fault proxy, seeded from the scenario, in front of the
// API server, and returns it with the flag that points a controller at
// it.
func (s *Scenario) KubeProxy() (*faultproxy.Kube, string) {
	s.Helper()
	k, err := faultproxy.NewKube(s.Env.REST, uint64(s.Seed))
	if err != nil {
		s.Fatal(err)
	}
	s.Cleanup(k.Close)
	path := filepath.Join(s.Env.Info.Dir, s.Namespace+"-kubeconfig")
	if err := k.WriteKubeconfig(path, ""); err != nil {
		s.Fatal(err)
	}
	return k, "--kubeconfig=" + path
}

// callsBetween counts the calls of method (a suffix) that started in
// [from, to) and how many of them failed.
func callsBetween(calls []faultproxy.Call, method string, from, to time.Time) (all, failed int) {
	for _, c := range calls {
		if strings.HasSuffix(c.Method, "/"+method) && !c.Start.Before(from) && c.Start.Before(to) {
			all++
			if c.Code != 0 {
				failed++
			}
		}
	}
	return all, failed
}

// firstOK is the first call of method that started after from and
// succeeded.
func firstOK(calls []faultproxy.Call, method string, from time.Time) (faultproxy.Call, bool) {
	var best faultproxy.Call
	found := false
	for _, c := range calls {
		if strings.HasSuffix(c.Method, "/"+method) && c.Start.After(from) && c.Code == 0 && (!found || c.Start.Before(best.Start)) {
			best, found = c, true
		}
	}
	return best, found
}

// DeploymentChange is a change of a version Deployment's spec or metadata
// (not its status), as a watch saw it.
type DeploymentChange struct {
	At   time.Time
	Name string
	What string
}

// DeploymentWatch records every change to the spec or metadata of the
// scenario's Deployments: what the controller (or anyone) wrote, as
// opposed to the status kube-controller-manager keeps.
type DeploymentWatch struct {
	mu      sync.Mutex
	changes []DeploymentChange
}

// WatchDeployments starts recording Deployment changes until the test ends.
func (s *Scenario) WatchDeployments() *DeploymentWatch {
	s.Helper()
	dw := &DeploymentWatch{}
	note := func(d *appsv1.Deployment, what string) {
		dw.mu.Lock()
		dw.changes = append(dw.changes, DeploymentChange{At: time.Now(), Name: d.Name, What: what})
		dw.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := harness.InformDeployments(ctx, s.Env.Clients, s.Namespace, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { note(obj.(*appsv1.Deployment), "created") },
		UpdateFunc: func(oldObj, newObj any) {
			prev, d := oldObj.(*appsv1.Deployment), newObj.(*appsv1.Deployment)
			switch {
			case prev.Generation != d.Generation:
				note(d, fmt.Sprintf("spec changed (generation %d to %d)", prev.Generation, d.Generation))
			case !equality.Semantic.DeepEqual(prev.Labels, d.Labels) || !equality.Semantic.DeepEqual(prev.Annotations, d.Annotations):
				note(d, "labels or annotations changed")
			case prev.DeletionTimestamp == nil && d.DeletionTimestamp != nil:
				note(d, "deletion started")
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if d, ok := obj.(*appsv1.Deployment); ok {
				note(d, "deleted")
			}
		},
	})
	if err != nil {
		cancel()
		s.Fatalf("watch Deployments: %v", err)
	}
	s.Cleanup(func() { cancel(); wait() })
	return dw
}

// Between returns the changes seen in [from, to).
func (dw *DeploymentWatch) Between(from, to time.Time) []DeploymentChange {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	return within(dw.changes, func(c DeploymentChange) time.Time { return c.At }, from, to)
}

// within keeps the items whose time is in [from, to).
func within[T any](items []T, at func(T) time.Time, from, to time.Time) []T {
	var out []T
	for _, it := range items {
		if t := at(it); !t.Before(from) && t.Before(to) {
			out = append(out, it)
		}
	}
	return out
}

// deploymentWrites are the controller's writes to Deployments (and their
// scale subresource) in [from, to), from the Kubernetes proxy's record.
func deploymentWrites(reqs []faultproxy.Request, from, to time.Time) []faultproxy.Request {
	var out []faultproxy.Request
	for _, r := range reqs {
		if r.Resource == "deployments" && r.Write() && !r.Start.Before(from) && r.Start.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// writesPerDeployment counts successful writes per Deployment name.
func writesPerDeployment(reqs []faultproxy.Request) map[string]int {
	n := map[string]int{}
	for _, r := range reqs {
		if r.Code < 300 {
			n[r.Name]++
		}
	}
	return n
}

// conditionsSay reads Ready and Progressing, for logs and assertions.
func conditionsSay(twd *v1alpha1.TemporalWorkerDeployment) (ready, progressing metav1.Condition) {
	if c := meta.FindStatusCondition(twd.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		ready = *c
	}
	if c := meta.FindStatusCondition(twd.Status.Conditions, v1alpha1.ConditionProgressing); c != nil {
		progressing = *c
	}
	return ready, progressing
}

// staleRoutingWrites checks, from both proxies' records, that no routing
// write to Temporal came from a plan that a failed Kubernetes write had
// invalidated: between any write to Kubernetes that failed or whose
// answer was lost, and a later routing write, the controller must have
// read Temporal again (observed anew, in a new pass). It returns one
// line per offending routing write, and how many routing writes and failed
// Kubernetes writes it looked at.
func staleRoutingWrites(reqs []faultproxy.Request, calls []faultproxy.Call) (stale []string, routes, failed int) {
	type event struct {
		at   time.Time
		kind string // "failed-write", "describe", "route"
		what string
	}
	var evs []event
	for _, r := range reqs {
		if r.Write() && r.Namespace != "" && r.Resource != "events" && r.Resource != "leases" && r.Sub != "status" && (r.Code >= 300 || r.Fault != "") && r.Code != 404 {
			failed++
			evs = append(evs, event{r.Start, "failed-write", fmt.Sprintf("%s %s/%s %s -> %d %s", r.Verb, r.Resource, r.Name, r.Sub, r.Code, r.Fault)})
		}
	}
	for _, c := range calls {
		switch {
		case (strings.HasSuffix(c.Method, "/DescribeWorkerDeployment") || strings.HasSuffix(c.Method, "/DescribeWorkerDeploymentVersion")) && c.Code == 0:
			// A pass may describe only the target (its last Describe's
			// conflict token still guards the write): a read of either
			// kind starts a new pass, with a new look at Kubernetes.
			evs = append(evs, event{c.Start, "describe", ""})
		case faultproxy.RoutingWrite(c.Method):
			routes++
			evs = append(evs, event{c.Start, "route", c.Method[strings.LastIndex(c.Method, "/")+1:]})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	var pending *event
	for i := range evs {
		switch e := evs[i]; e.kind {
		case "failed-write":
			pending = &evs[i]
		case "describe":
			pending = nil
		case "route":
			if pending != nil {
				stale = append(stale, fmt.Sprintf("%s at %s after %s at %s with no Describe between",
					e.what, e.at.Format("15:04:05.000"), pending.what, pending.at.Format("15:04:05.000")))
			}
		}
	}
	return stale, routes, failed
}

package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/dev/faultproxy"
	"github.com/rainbow-deploy/rainbow/internal/workload"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// crossCheckAfter is how long the controller trusts a summary that shows a
// version draining before it describes the version itself
// (drain.drainageCrossCheckAfter in internal/planner/drain).
const crossCheckAfter = 5 * time.Minute

// TestStaleDrainageSummary replays the stale summary seen under load in the
// soak and the benchmark: once v2 is current, every DescribeWorkerDeployment
// the controller gets says v1 is DRAINING, whatever Temporal says, while v1
// itself (DescribeWorkerDeploymentVersion) reports DRAINED. v1's workers
// must go only after v1's own DRAINED report came through, and then they
// and the version must go, while the summary still lies.
func TestStaleDrainageSummary(t *testing.T) {
	if !run.Full {
		t.Skip("the controller describes a version the summary keeps draining only after 5 minutes, so this scenario takes over 6; run it with -chaos.full")
	}
	t.Parallel()
	s := run.Scenario(t, "stale-drainage-summary")
	p := s.TemporalProxy()
	// Keep v1's own reports, to tell when the controller had its word.
	p.Capture = func(m string) bool {
		return faultproxy.RoutingWrite(m) || strings.HasSuffix(m, "/DescribeWorkerDeploymentVersion")
	}
	s.StartController()
	tw := s.NewRollout("orders") // AllAtOnce, sunset delays of 2 s and 3 s
	tw.Create(tw.Spec("v1"))
	v1 := tw.BuildIDOf("v1")
	tw.WaitCurrent(4*time.Minute, v1)
	traffic := s.StartTraffic(tw.TaskQueue)
	inv := s.WatchInvariants(tw, traffic)
	removal := s.watchRemoval(v1, p)
	// Pinned workflows on v1, so that it really drains for a while.
	time.Sleep(20 * time.Second)

	stale := &staleSummary{v1: v1}
	p.Set(faultproxy.TemporalFault{Rewrite: stale.rewrite, Match: func(m string) bool {
		return strings.HasSuffix(m, "/DescribeWorkerDeployment")
	}})
	v2 := tw.SetImage("v2")
	stale.setV2(v2)
	s.Eventually(4*time.Minute, "Temporal routes to "+v2, func() (bool, string) {
		cur, ramp, pct, err := tw.Routing(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return cur == v2, fmt.Sprintf("current=%s ramping=%s@%g%%", cur, ramp, pct)
	})
	// From here on the controller reads v1 as draining.
	fault := s.Fault("stale-drainage-summary")
	tw.WaitCurrent(4*time.Minute, v2)

	var realDrained time.Time // when Temporal's own summary said DRAINED
	s.Eventually(12*time.Minute, "v1's Deployment deleted and v1 deleted from Temporal, the summary still rewritten", func() (bool, string) {
		gone, dep := removal.deploymentGone()
		resp, err := s.Env.Temporal.WorkflowService().DescribeWorkerDeployment(context.Background(), &workflowservice.DescribeWorkerDeploymentRequest{
			Namespace: s.Env.Info.TemporalNamespace, DeploymentName: tw.DeploymentName(),
		})
		if err != nil {
			return false, err.Error()
		}
		vs := summaryOf(resp, v1)
		if vs.GetDrainageInfo().GetStatus() == enumspb.VERSION_DRAINAGE_STATUS_DRAINED && realDrained.IsZero() {
			realDrained = time.Now()
		}
		n, _ := stale.seen()
		return gone && vs == nil, fmt.Sprintf("Deployment: %s; Temporal's summary of v1: %s/%s; %d responses rewritten",
			dep, vs.GetStatus(), vs.GetDrainageInfo().GetStatus(), n)
	})
	took := fault.Converged()
	p.Pass()

	// Never on a guess: v1's own DRAINED report came through before its
	// workers were removed.
	at, what, before := removal.seen()
	if at.IsZero() {
		s.Fatalf("v1's Deployment is gone but its removal was not seen")
	}
	drained := drainedReports(s, before, v1)
	if len(drained) == 0 {
		s.Violation("v1 %s at %s with no DescribeWorkerDeploymentVersion of v1 through the proxy reporting it DRAINED before", what, at.Format(time.TimeOnly))
	}
	n, last := stale.seen()
	if !last.After(at) {
		s.Errorf("the last rewritten summary came at %s, not after v1 was %s at %s: the scenario did not hold the stale summary", last.Format(time.TimeOnly), what, at.Format(time.TimeOnly))
	}
	since := stale.drainingSince()
	if !since.IsZero() && len(drained) > 0 && at.Sub(since) < crossCheckAfter {
		s.Errorf("v1 %s %s after its deactivation, before the summary had shown it draining for %s: something other than the cross-check overruled the summary",
			what, at.Sub(since).Round(time.Second), crossCheckAfter)
	}
	truth := "not seen"
	if !realDrained.IsZero() {
		truth = fmt.Sprintf("%s after v2 became current", realDrained.Sub(fault.at).Round(time.Second))
	}
	first := "none"
	if len(drained) > 0 {
		first = fmt.Sprintf("%s after v2 became current (DRAINED reports of v1 before the removal: %d)", drained[0].Start.Sub(fault.at).Round(time.Second), len(drained))
	}
	s.Note("v1 %s %s after v2 became current (%s after Temporal's last_deactivation_time of v1, %s); its own first DRAINED report through the proxy %s; Temporal's real summary said DRAINED %s; v1 deleted from Temporal %s after v2 became current; %d summaries rewritten",
		what, at.Sub(fault.at).Round(time.Second), at.Sub(since).Round(time.Second), since.Format(time.TimeOnly), first, truth, took.Round(time.Second), n)
	if since.IsZero() {
		s.Errorf("Temporal sent no last_deactivation_time for v1: the scenario's timings have no reference")
	}

	counts := traffic.Finish(s.Length(3*time.Minute, 5*time.Minute))
	s.Logf("workflows: %+v", counts)
	waitOnlyVersion(s, v2)
	s.Logf("invariant checks: %v", inv.Finish())
}

// staleSummary rewrites DescribeWorkerDeployment responses so that, once
// v2 is current, v1's summary says DRAINING, its drainage too, with the
// times Temporal sent.
type staleSummary struct {
	v1 string

	mu        sync.Mutex
	v2        string
	rewritten int
	last      time.Time
	since     time.Time // v1's last_deactivation_time, as sent
}

func (st *staleSummary) setV2(b string) {
	st.mu.Lock()
	st.v2 = b
	st.mu.Unlock()
}

func (st *staleSummary) rewrite(_ string, resp []byte) []byte {
	st.mu.Lock()
	v2 := st.v2
	st.mu.Unlock()
	var m workflowservice.DescribeWorkerDeploymentResponse
	if v2 == "" || proto.Unmarshal(resp, &m) != nil ||
		m.GetWorkerDeploymentInfo().GetRoutingConfig().GetCurrentDeploymentVersion().GetBuildId() != v2 {
		return resp
	}
	vs := summaryOf(&m, st.v1)
	if vs == nil {
		return resp
	}
	vs.Status = enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINING
	if vs.DrainageInfo == nil {
		// A summary without drainage yet: draining since its deactivation.
		vs.DrainageInfo = &deploymentpb.VersionDrainageInfo{LastChangedTime: vs.GetLastDeactivationTime(), LastCheckedTime: timestamppb.Now()}
	}
	vs.DrainageInfo.Status = enumspb.VERSION_DRAINAGE_STATUS_DRAINING
	out, err := proto.Marshal(&m)
	if err != nil {
		return resp
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.rewritten++
	st.last = time.Now()
	if t := vs.GetLastDeactivationTime(); t != nil {
		st.since = t.AsTime()
	}
	return out
}

// seen is how many responses were rewritten and when the last one was.
func (st *staleSummary) seen() (int, time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.rewritten, st.last
}

func (st *staleSummary) drainingSince() time.Time {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.since
}

func summaryOf(resp *workflowservice.DescribeWorkerDeploymentResponse, build string) *deploymentpb.WorkerDeploymentInfo_WorkerDeploymentVersionSummary {
	for _, vs := range resp.GetWorkerDeploymentInfo().GetVersionSummaries() {
		if vs.GetDeploymentVersion().GetBuildId() == build {
			return vs
		}
	}
	return nil
}

// drainedReports are the calls of DescribeWorkerDeploymentVersion of build
// that answered DRAINED (the version's status and its drainage, as the
// controller requires both).
func drainedReports(s *Scenario, calls []faultproxy.Call, build string) []faultproxy.Call {
	var out []faultproxy.Call
	for _, c := range calls {
		if !strings.HasSuffix(c.Method, "/DescribeWorkerDeploymentVersion") || c.Code != 0 {
			continue
		}
		var req workflowservice.DescribeWorkerDeploymentVersionRequest
		var resp workflowservice.DescribeWorkerDeploymentVersionResponse
		if err := proto.Unmarshal(c.Request, &req); err != nil {
			s.Errorf("captured DescribeWorkerDeploymentVersion request: %v", err)
			continue
		}
		if err := proto.Unmarshal(c.Response, &resp); err != nil {
			s.Errorf("captured DescribeWorkerDeploymentVersion response: %v", err)
			continue
		}
		info := resp.GetWorkerDeploymentVersionInfo()
		if req.GetDeploymentVersion().GetBuildId() == build &&
			info.GetStatus() == enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED &&
			info.GetDrainageInfo().GetStatus() == enumspb.VERSION_DRAINAGE_STATUS_DRAINED {
			out = append(out, c)
		}
	}
	return out
}

// removalWatch records the first time a version's Deployment lost its
// workers (scaled to zero, or deleted) and the Temporal calls that had
// ended by then: a call the controller's write depended on is among them.
type removalWatch struct {
	mu    sync.Mutex
	at    time.Time
	what  string
	calls []faultproxy.Call
	gone  bool
	state string
}

func (s *Scenario) watchRemoval(build string, p *faultproxy.Temporal) *removalWatch {
	s.Helper()
	rw := &removalWatch{state: "not seen yet"}
	see := func(obj any, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		d, ok := obj.(*appsv1.Deployment)
		if !ok || d.Labels[workload.LabelBuildID] != build {
			return
		}
		n := ptr.Deref(d.Spec.Replicas, 1)
		var what string
		switch {
		case deleted:
			what = "deleted"
		case d.DeletionTimestamp != nil:
			what = "being deleted"
		case n == 0:
			what = "scaled to zero"
		}
		rw.mu.Lock()
		defer rw.mu.Unlock()
		if what != "" && rw.at.IsZero() {
			rw.at, rw.what, rw.calls = time.Now(), what, p.Calls()
		}
		rw.gone = deleted
		rw.state = fmt.Sprintf("%s replicas=%d", d.Name, n)
		if what != "" {
			rw.state += " " + what
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	wait, err := harness.InformDeployments(ctx, s.Env.Clients, s.Namespace, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { see(obj, false) },
		UpdateFunc: func(_, obj any) { see(obj, false) },
		DeleteFunc: func(obj any) { see(obj, true) },
	})
	if err != nil {
		cancel()
		s.Fatalf("watch Deployments: %v", err)
	}
	s.Cleanup(func() { cancel(); wait() })
	return rw
}

// seen is the first removal and the calls ended by then.
func (rw *removalWatch) seen() (time.Time, string, []faultproxy.Call) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.at, rw.what, rw.calls
}

// deploymentGone reports whether the Deployment was deleted, and its last
// state seen.
func (rw *removalWatch) deploymentGone() (bool, string) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.gone, rw.state
}

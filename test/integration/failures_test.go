package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/workload"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// TestMissingConnectionThenBadSecret: a TWD naming a connection that does
// not exist creates nothing and says so; a connection whose Secret is
// missing is AuthSecretInvalid; fixing the connection lets the rollout go.
func TestMissingConnectionThenBadSecret(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	r := &rollout{&harness.Rollout{T: tt, Name: "noconn", TaskQueue: tt.TaskQueue("noconn")}}
	r.Create(r.Spec("v1"))
	got := r.waitCondition(time.Minute, v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonTemporalConnectionNotFound)
	if c := findCondition(got, v1alpha1.ConditionReady); !strings.Contains(c.Message, "temporal") || c.Status != metav1.ConditionFalse {
		t.Fatalf("Ready does not name the missing connection: %+v", c)
	}
	if d := r.deployment(r.BuildID()); d != nil {
		t.Fatalf("a Deployment was created without a connection: %s", d.Name)
	}
	r.waitEvent(time.Minute, v1alpha1.ReasonTemporalConnectionNotFound)

	conn := &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Name: "temporal", Namespace: r.Namespace},
		Spec: v1alpha1.TemporalConnectionSpec{
			HostPort:        r.Env.Info.TemporalAddress,
			APIKeySecretRef: &v1alpha1.SecretKeyReference{Name: "temporal-api-key", Key: "key"},
		},
	}
	if err := r.Env.Kube.Create(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	got = r.waitCondition(time.Minute, v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonAuthSecretInvalid)
	if c := findCondition(got, v1alpha1.ConditionReady); !strings.Contains(c.Message, "temporal-api-key") {
		t.Fatalf("AuthSecretInvalid does not name the Secret: %q", c.Message)
	}
	r.waitEvent(time.Minute, v1alpha1.ReasonAuthSecretInvalid)

	// The dev server is plaintext: drop the API key to fix the connection.
	for {
		var c v1alpha1.TemporalConnection
		if err := r.Env.Kube.Get(context.Background(), crclient.ObjectKeyFromObject(conn), &c); err != nil {
			t.Fatal(err)
		}
		c.Spec.APIKeySecretRef = nil
		if err := r.Env.Kube.Update(context.Background(), &c); err == nil {
			break
		} else if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	r.WaitCurrent(5*time.Minute, r.BuildID())
}

// TestTemporalOutageScalesNothingDown: while Temporal is unreachable the
// controller keeps every version running, even one it would otherwise
// retire at once, reports why, and finishes the rollout when Temporal
// returns.
func TestTemporalOutageScalesNothingDown(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	proxy := startProxy(t, tt.Env.Info.TemporalAddress)
	r := &rollout{&harness.Rollout{T: tt, Name: "outage", TaskQueue: tt.TaskQueue("outage")}}
	conn := &v1alpha1.TemporalConnection{
		ObjectMeta: metav1.ObjectMeta{Name: "temporal", Namespace: r.Namespace},
		Spec:       v1alpha1.TemporalConnectionSpec{HostPort: proxy.addr},
	}
	if err := r.Env.Kube.Create(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
	const scaledownDelay = 20 * time.Second
	twd := r.Spec("v1")
	twd.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: time.Hour}
	twd.Spec.Sunset.DeleteDelay = &metav1.Duration{Duration: 0}
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)
	v2 := r.SetImage("v2")
	r.WaitCurrent(5*time.Minute, v2)
	// v1 has no open workflow: once Temporal reports it drained, it is due
	// for scale-down scaledownDelay later, which falls into the outage: the
	// delay is an hour until the outage starts (a loaded machine may see
	// the drain only after scaledownDelay), and scaledownDelay from then.
	drained := r.waitFor(drainBound, v1+" Drained", func(t *v1alpha1.TemporalWorkerDeployment) bool {
		for _, v := range t.Status.DeprecatedVersions {
			if v.BuildID == v1 && v.Status == v1alpha1.VersionDrained && v.DrainedSince != nil {
				return true
			}
		}
		return false
	})
	var due time.Time
	for _, v := range drained.Status.DeprecatedVersions {
		if v.BuildID == v1 {
			due = v.DrainedSince.Add(scaledownDelay)
		}
	}

	proxy.stop()
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = harness.DemoImage("v3")
		t.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: scaledownDelay}
	})
	v3 := r.BuildID()
	// For the first minute the rollout waits for Temporal (no CD tool
	// fails it), then it is reported as an outage.
	r.waitFor(time.Minute, "Progressing=True with reason WaitingForTemporal, not Stalled", func(t *v1alpha1.TemporalWorkerDeployment) bool {
		c := findCondition(t, v1alpha1.ConditionProgressing)
		return c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonWaitingForTemporal && strings.Contains(c.Message, "TemporalConnection") &&
			hasCondition(t, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonWaitingForTemporal)
	})
	r.holdsWorkers(max(15*time.Second, time.Until(due)+10*time.Second), v1)
	r.waitOutageReason()
	if !hasCondition(r.Get(), v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonTemporalStateFetchFailed) {
		t.Fatalf("an outage past the bound is not Stalled: %s", describe(r.Get()))
	}
	if cur := r.Get().Status.CurrentVersion; cur == nil || cur.BuildID != v2 {
		t.Fatalf("the current version changed during the outage: %s", describe(r.Get()))
	}

	proxy.start()
	r.WaitCurrent(3*time.Minute, v3)

	// Deleting the TWD during an outage waits, workers and all, until the
	// controller can clean up Temporal.
	proxy.stop()
	if err := r.Env.Kube.Delete(context.Background(), r.Get()); err != nil {
		t.Fatal(err)
	}
	got := r.waitOutageReason()
	if c := findCondition(got, v1alpha1.ConditionReady); !strings.Contains(c.Message, "deletion waits") {
		t.Fatalf("Ready does not say the deletion waits: %q", c.Message)
	}
	r.holdsWorkers(10*time.Second, v3)
	proxy.start()
	r.waitGone(drainBound)
}

// waitOutageReason waits for Progressing to report that Temporal cannot be
// reached.
func (r *rollout) waitOutageReason() *v1alpha1.TemporalWorkerDeployment {
	r.Helper()
	got := r.waitFor(3*time.Minute, "an outage reason on Ready and Progressing", func(t *v1alpha1.TemporalWorkerDeployment) bool {
		c := findCondition(t, v1alpha1.ConditionProgressing)
		return c.Status == metav1.ConditionFalse &&
			(c.Reason == v1alpha1.ReasonTemporalStateFetchFailed || c.Reason == v1alpha1.ReasonTemporalClientCreationFailed)
	})
	r.Logf("during the outage: %s", describe(got))
	return got
}

// deleteAndWait deletes the TWD and waits until its finalizer let it go.
func (r *rollout) deleteAndWait() {
	r.Helper()
	if err := r.Env.Kube.Delete(context.Background(), r.Get()); err != nil {
		r.Fatal(err)
	}
	r.waitGone(drainBound)
}

// waitGone waits until the TWD's finalizer let it go.
func (r *rollout) waitGone(timeout time.Duration) {
	r.Helper()
	r.Eventually(timeout, "the TWD gone after Temporal cleanup", func() (bool, string) {
		var twd v1alpha1.TemporalWorkerDeployment
		err := r.Env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: r.Namespace, Name: r.Name}, &twd)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, describe(&twd)
	})
}

// TestDeletingTheTWDRemovesItFromTemporal: the finalizer moves routing
// off, removes the Deployments, then the versions and the worker
// deployment from Temporal, and only then lets the object go.
func TestDeletingTheTWDRemovesItFromTemporal(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "deletion")
	v1 := r.Create(r.Spec("v1"))
	r.WaitCurrent(5*time.Minute, v1)
	r.deleteAndWait()
	if d := r.deployment(v1); d != nil {
		t.Fatalf("Deployment %s outlived its TWD", d.Name)
	}
	_, err := r.Env.Temporal.WorkflowService().DescribeWorkerDeployment(context.Background(), &workflowservice.DescribeWorkerDeploymentRequest{
		Namespace: r.Env.Info.TemporalNamespace, DeploymentName: r.DeploymentName(),
	})
	var nf *serviceerror.NotFound
	if !errors.As(err, &nf) {
		t.Fatalf("the worker deployment is still in Temporal after the TWD was deleted: %v", err)
	}
}

// proxy forwards TCP to Temporal and can be cut, to simulate an outage
// for the controller and the workers alike.
type proxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, addr: ln.Addr().String(), target: target}
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("restart proxy on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

// stop closes the listener and every forwarded connection.
func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestConnectionChangeRollsRunningVersions: a changed TemporalConnection
// reaches the running version's pods by a rolling update, without a new
// build ID, and the version stays current.
func TestConnectionChangeRollsRunningVersions(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "reconnect")
	v1 := r.Create(r.Spec("v1"))
	r.WaitCurrent(5*time.Minute, v1)
	before := r.deployment(v1)

	// The same server under another name: the workers' address changes.
	_, port, err := net.SplitHostPort(r.Env.Info.TemporalAddress)
	if err != nil {
		t.Fatal(err)
	}
	newAddr := net.JoinHostPort("localhost", port)
	r.setConnectionAddress(newAddr)
	r.Eventually(2*time.Minute, "the Deployment of "+v1+" rolled to the new address", func() (bool, string) {
		d := r.deployment(v1)
		if d == nil {
			return false, "no Deployment"
		}
		var addr string
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "TEMPORAL_ADDRESS" {
				addr = e.Value
			}
		}
		rolled := d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == 1 && d.Status.Replicas == 1 && d.Status.AvailableReplicas == 1
		return addr == newAddr && rolled, fmt.Sprintf("address %s, %s", addr, deploymentState(d))
	})
	if d := r.deployment(v1); d.UID != before.UID {
		t.Fatal("the Deployment was replaced instead of rolled")
	}
	r.WaitCurrent(3*time.Minute, v1)
	if got := r.hello(); !strings.Contains(got, v1) {
		t.Fatalf("after the connection change Hello ran on %q, want %s", got, v1)
	}
}

// TestConnectionToAnotherServerMovesNoWorkers: a version whose workers were
// given another Temporal server (here: its Deployment records a foreign
// namespace ID, as if the connection had pointed elsewhere when it was
// created) keeps its workers and its address when the connection changes;
// the rollout says why and how to go on, and a new version starts on the
// connection's server while the old one is left running.
func TestConnectionToAnotherServerMovesNoWorkers(t *testing.T) {
	parallel(t)
	r := newRollout(env.NewTest(t), "otherserver")
	v1 := r.Create(r.Spec("v1"))
	r.WaitCurrent(5*time.Minute, v1)
	d := r.deployment(v1)
	if d.Annotations[workload.AnnotationNamespaceID] == "" {
		t.Fatalf("Deployment %s does not record its Temporal namespace ID: %v", d.Name, d.Annotations)
	}
	patched := d.DeepCopy()
	patched.Annotations[workload.AnnotationNamespaceID] = "another-server-namespace-id"
	if err := r.Env.Kube.Patch(context.Background(), patched, crclient.MergeFrom(d)); err != nil {
		t.Fatal(err)
	}
	got := r.waitCondition(time.Minute, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonTemporalServerChanged)
	if c := findCondition(got, v1alpha1.ConditionReady); !strings.Contains(c.Message, "Roll out a new version") {
		t.Fatalf("the condition does not say how to go on: %q", c.Message)
	}

	// A new address for the connection reaches no worker of the old server.
	_, port, err := net.SplitHostPort(r.Env.Info.TemporalAddress)
	if err != nil {
		t.Fatal(err)
	}
	r.setConnectionAddress(net.JoinHostPort("localhost", port))
	v2 := r.SetImage("v2")
	r.WaitCurrent(3*time.Minute, v2)
	got = r.waitFor(time.Minute, "the note on the old server's Deployment", func(twd *v1alpha1.TemporalWorkerDeployment) bool {
		return strings.Contains(findCondition(twd, v1alpha1.ConditionReady).Message, "previous Temporal server")
	})
	if st := versionStatus(got, v1); st != v1alpha1.VersionUnknown {
		t.Fatalf("version %s is %q, want Unknown: its workflows live on a server the controller does not read", v1, st)
	}
	r.holdsWorkers(10*time.Second, v1)
	after := r.deployment(v1)
	if !equality.Semantic.DeepEqual(after.Spec.Template, d.Spec.Template) {
		t.Fatalf("the old server's Deployment %s was changed: its pods would have moved", after.Name)
	}
}

// setConnectionAddress changes the test's TemporalConnection hostPort.
func (r *rollout) setConnectionAddress(addr string) {
	r.Helper()
	for {
		var c v1alpha1.TemporalConnection
		if err := r.Env.Kube.Get(context.Background(), crclient.ObjectKey{Namespace: r.Namespace, Name: "temporal"}, &c); err != nil {
			r.Fatal(err)
		}
		c.Spec.HostPort = addr
		err := r.Env.Kube.Update(context.Background(), &c)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			r.Fatal(err)
		}
	}
}

// Package demo tells the story `make demo` shows: a TemporalWorkerDeployment
// running the demo worker is rolled out twice with the Progressive strategy
// while workflows run against it. The first version becomes current; the
// second ramps through its steps and becomes current; the first drains while
// a pinned workflow started on it finishes there, is scaled to zero and is
// deleted. Each change of the status is printed as it happens.
//
// dev/cmd/demo runs it against `make demo`'s environment; the integration tests
// run it, with short steps and delays, against theirs.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// Files the demo applies, in Options.Dir.
const (
	ConnectionFile = "connection.yaml"
	WorkerFile     = "worker.yaml"
)

const (
	taskQueueEnv     = "DEMO_TASK_QUEUE"
	defaultTaskQueue = "rainbow-demo"
	pollEvery        = 500 * time.Millisecond
	trafficWindow    = 10 * time.Second
	// pinnedLimit ends the pinned workflow by itself if the demo stops
	// before it sends the finish signal.
	pinnedLimit = 10 * time.Minute
)

// Options configure a run. Kube, Temporal, Dir and Out are required.
type Options struct {
	Kube client.Client
	// Temporal is a client of the Temporal namespace the workers poll.
	Temporal sdkclient.Client
	// Dir holds ConnectionFile and WorkerFile.
	Dir string
	// OwnedFiles are TemporalWorkerOwnedResources for the TWD, applied
	// right after it (dev/cmd/demo: examples/twor-hpa.yaml, an HPA per version).
	OwnedFiles []string
	Out        io.Writer

	// Overrides of the files, for an environment on other ports or names.
	Namespace         string // Kubernetes namespace of both objects
	TemporalAddress   string // the connection's hostPort
	TemporalNamespace string // the TWD's workerOptions.temporalNamespace
	TaskQueue         string // the workers' DEMO_TASK_QUEUE
	// Customize changes the TemporalWorkerDeployment before it is created
	// (the tests shorten its steps and delays).
	Customize func(*v1alpha1.TemporalWorkerDeployment)

	// SecondTag is the image tag of the second version (default "v2").
	SecondTag string
	// HelloEvery starts a short Hello workflow this often (default 1s).
	HelloEvery time.Duration
	// Look is how long the first version runs alone before the second is
	// rolled out (default 5s).
	Look time.Duration
	// DrainHold is how long the pinned workflow keeps the first version
	// Draining before the demo sends it the finish signal (default 20s).
	DrainHold time.Duration
	// PinnedTick makes the pinned workflow run an activity this often
	// (default 5s).
	PinnedTick time.Duration

	// Linger keeps the workflows running and the status printing after
	// the story, until ctx ends; Run then returns nil.
	Linger bool
	// TemporalUI and Kubeconfig are printed at the end, when set.
	TemporalUI, Kubeconfig string
}

func (o *Options) defaults() error {
	if o.Kube == nil || o.Temporal == nil || o.Dir == "" || o.Out == nil {
		return errors.New("demo: Kube, Temporal, Dir and Out are required")
	}
	if o.SecondTag == "" {
		o.SecondTag = "v2"
	}
	if o.HelloEvery == 0 {
		o.HelloEvery = time.Second
	}
	if o.Look == 0 {
		o.Look = 5 * time.Second
	}
	if o.DrainHold == 0 {
		o.DrainHold = 20 * time.Second
	}
	if o.PinnedTick == 0 {
		o.PinnedTick = 5 * time.Second
	}
	return nil
}

// Milestone is a step of the story and when it happened.
type Milestone struct {
	At   time.Duration
	What string
}

// Result is what the story saw.
type Result struct {
	// First and Second are the two versions' build IDs.
	First, Second string
	// Ramps are the ramp percentages the second version was seen at.
	Ramps []int32
	// DrainingWhilePinned: the first version was Draining while the pinned
	// workflow still ran on it.
	DrainingWhilePinned bool
	// Pinned is the pinned workflow's result: the builds it started and
	// finished on.
	Pinned demoworker.LongResult
	// HPAs are the HPAs seen, by build ID.
	HPAs map[string]string
	// Hellos counts completed Hello workflows by the build that ran them.
	Hellos        map[string]int
	HelloFailures int
	Milestones    []Milestone
}

// Load reads the demo's TemporalConnection and TemporalWorkerDeployment
// from dir.
func Load(dir string) (*v1alpha1.TemporalConnection, *v1alpha1.TemporalWorkerDeployment, error) {
	return loadFiles(dir, WorkerFile)
}

// load reads ConnectionFile and workerFile from o.Dir, with o's overrides.
func load(o Options, workerFile string) (*v1alpha1.TemporalConnection, *v1alpha1.TemporalWorkerDeployment, error) {
	conn, twd, err := loadFiles(o.Dir, workerFile)
	if err != nil {
		return nil, nil, err
	}
	if o.Namespace != "" {
		conn.Namespace, twd.Namespace = o.Namespace, o.Namespace
	}
	if o.TemporalAddress != "" {
		conn.Spec.HostPort = o.TemporalAddress
	}
	if o.TemporalNamespace != "" {
		twd.Spec.WorkerOptions.TemporalNamespace = o.TemporalNamespace
	}
	if o.TaskQueue != "" {
		c := &twd.Spec.Template.Spec.Containers[0]
		c.Env = append(removeEnv(c.Env, taskQueueEnv), corev1.EnvVar{Name: taskQueueEnv, Value: o.TaskQueue})
	}
	if o.Customize != nil {
		o.Customize(twd)
	}
	return conn, twd, nil
}

func newStory(o Options, twd *v1alpha1.TemporalWorkerDeployment) *story {
	s := &story{
		o:         o,
		start:     time.Now(),
		key:       client.ObjectKeyFromObject(twd),
		taskQueue: taskQueueOf(twd),
		seen:      map[types.UID]bool{},
		builds:    map[string]bool{},
		history:   map[string][]v1alpha1.VersionStatus{},
		res:       &Result{HPAs: map[string]string{}},
		hellos:    &hellos{total: map[string]int{}, window: map[string]int{}},
		checks:    map[string]string{},
	}
	s.trafficAt = s.start
	s.imageNow = twd.Spec.Template.Spec.Containers[0].Image
	s.idPrefix = fmt.Sprintf("%s-%s", twd.Name, s.start.Format("150405"))
	return s
}

func loadFiles(dir, workerFile string) (*v1alpha1.TemporalConnection, *v1alpha1.TemporalWorkerDeployment, error) {
	conn := &v1alpha1.TemporalConnection{}
	twd := &v1alpha1.TemporalWorkerDeployment{}
	for file, obj := range map[string]any{ConnectionFile: conn, workerFile: twd} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, nil, err
		}
		if err := yaml.UnmarshalStrict(data, obj); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, file), err)
		}
	}
	if len(twd.Spec.Template.Spec.Containers) == 0 {
		return nil, nil, fmt.Errorf("%s: the template has no container", filepath.Join(dir, workerFile))
	}
	if twd.Spec.WorkerOptions.ConnectionRef.Name != conn.Name {
		return nil, nil, fmt.Errorf("%s uses connection %q but %s is %q", workerFile, twd.Spec.WorkerOptions.ConnectionRef.Name, ConnectionFile, conn.Name)
	}
	return conn, twd, nil
}

// Run tells the story. It returns an error naming what did not happen in
// time, or ctx's error when ctx ends first (also with Linger, before the
// story is over).
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	conn, twd, err := load(o, WorkerFile)
	if err != nil {
		return nil, err
	}
	owned, err := loadOwned(o.OwnedFiles, twd)
	if err != nil {
		return nil, err
	}
	s := newStory(o, twd)
	s.owned = owned
	defer s.stopWorkflows()
	err = s.tell(ctx, conn, twd)
	s.res.HPAs = s.hpas
	s.res.Hellos, s.res.HelloFailures = s.hellos.counts()
	if err != nil {
		if ctx.Err() != nil {
			return s.res, ctx.Err()
		}
		return s.res, err
	}
	if o.Linger {
		_, err := s.wait(ctx, 0, "Ctrl-C", func(snapshot) (bool, string) { return false, "" })
		s.res.Hellos, s.res.HelloFailures = s.hellos.counts()
		if ctx.Err() != nil {
			return s.res, nil
		}
		return s.res, err
	}
	return s.res, nil
}

type story struct {
	o         Options
	start     time.Time
	key       client.ObjectKey
	taskQueue string
	idPrefix  string

	last      string             // the status line printed last
	seen      map[types.UID]bool // Events printed
	builds    map[string]bool    // every build ID seen, for short names
	history   map[string][]v1alpha1.VersionStatus
	trafficAt time.Time
	ramps     []ramp
	imageNow  string // the image the spec asks for
	// The last look at Temporal's view of a version.
	temporalAt   time.Time
	temporalSeen string
	res          *Result
	owned        []*v1alpha1.TemporalWorkerOwnedResource
	hpas         map[string]string // HPA names seen, by build ID

	hellos     *hellos
	stopHellos context.CancelFunc
	workflows  sync.WaitGroup
	pinned     *pinnedRun

	rolling string            // the build being rolled out, for the timeline
	checks  map[string]string // the analysis line printed last, by check
	// aborts are the notes of the AnalysisFailed Events printed.
	aborts []string
}

func (s *story) tell(ctx context.Context, conn *v1alpha1.TemporalConnection, twd *v1alpha1.TemporalWorkerDeployment) error {
	o := s.o
	first := imageTag(twd.Spec.Template.Spec.Containers[0].Image)
	s.say("")
	s.say("The demo: TemporalWorkerDeployment %s/%s runs the demo worker, one Deployment per version.", twd.Namespace, twd.Name)
	s.say("It rolls out %s, then %s with the %s strategy (%s), while workflows run on it.", first, o.SecondTag, twd.Spec.Rollout.Strategy, describeRollout(twd))
	s.say("Drained versions are scaled to zero %s after Temporal reports them drained, and deleted %s later.",
		durationOr(twd.Spec.Sunset.ScaledownDelay, "1h"), durationOr(twd.Spec.Sunset.DeleteDelay, "24h"))
	s.say("Lines starting with \"status\" show each version (Temporal status, ramp, pods) and the Ready and")
	s.say("Progressing conditions; \"event\" lines are the controller's Events; \"traffic\" counts Hello workflows by version.")

	v1, err := s.createFirst(ctx, conn, twd)
	if err != nil {
		return err
	}
	if err := s.waitHPA(ctx, v1); err != nil {
		return err
	}

	s.startWorkflows(ctx)
	s.say("starting a Hello workflow every %s, and the long workflow %s (pinned: it stays on the version it starts on)", o.HelloEvery, s.pinned.id)
	build, err := s.queryPinned(ctx)
	if err != nil {
		return err
	}
	if build != v1 {
		return fmt.Errorf("the pinned workflow started on %s, want %s", build, v1)
	}
	s.say("pinned workflow %s runs on %s (its build-id query says %s)", s.pinned.id, s.name(build), build)
	if _, err := s.sleep(ctx, o.Look); err != nil {
		return err
	}

	v2, err := s.rollOut(ctx, twd, v1, o.SecondTag, nil)
	if err != nil {
		return err
	}
	s.res.Second = v2
	s.res.Ramps = s.rampsOf(v2)
	s.milestone(s.name(v2)+" current", "%s is current after ramping %s. New workflows start on %s.", s.name(v2), percents(s.res.Ramps), s.name(v2))
	if err := s.waitHPA(ctx, v2); err != nil {
		return err
	}

	select {
	case <-s.pinned.done:
		s.say("the pinned workflow already finished, so %s has nothing to drain", s.name(v1))
	default:
		if _, err := s.wait(ctx, time.Minute, s.name(v1)+" to be Draining", func(sn snapshot) (bool, string) {
			return s.went(v1, v1alpha1.VersionDraining), ""
		}); err != nil {
			return err
		}
		build, err := s.queryPinned(ctx)
		if err != nil {
			return err
		}
		s.res.DrainingWhilePinned = build == v1
		s.milestone(s.name(v1)+" draining", "%s is Draining: pinned workflow %s still runs on it (build-id query: %s), so %s keeps its pods.",
			s.name(v1), s.pinned.id, s.name(build), s.name(v1))
		if _, err := s.sleep(ctx, o.DrainHold); err != nil {
			return err
		}
		s.say("sending the %q signal to the pinned workflow", demoworker.FinishSignal)
		if err := o.Temporal.SignalWorkflow(ctx, s.pinned.id, s.pinned.runID, demoworker.FinishSignal, nil); err != nil {
			return fmt.Errorf("signal the pinned workflow: %w", err)
		}
	}
	if _, err := s.wait(ctx, time.Minute, "the pinned workflow to finish", func(snapshot) (bool, string) {
		return s.pinned.finished(), ""
	}); err != nil {
		return err
	}
	if s.pinned.err != nil {
		return fmt.Errorf("the pinned workflow failed: %w", s.pinned.err)
	}
	s.res.Pinned = s.pinned.res
	if s.pinned.res.StartedOn != v1 || s.pinned.res.FinishedOn != v1 {
		return fmt.Errorf("the pinned workflow started on %s and finished on %s, want %s throughout", s.pinned.res.StartedOn, s.pinned.res.FinishedOn, v1)
	}
	s.milestone("pinned workflow finished", "The pinned workflow finished on %s, where it started: it never moved to %s.", s.name(v1), s.name(v2))

	// Temporal's view first: the controller polls draining versions only
	// about once a minute, so its status may show Drained later.
	if _, err := s.wait(ctx, 2*time.Minute, "Temporal to report "+s.name(v1)+" drained", func(sn snapshot) (bool, string) {
		if s.went(v1, v1alpha1.VersionDrained) || sn.replicas(v1) <= 0 {
			return true, ""
		}
		drained, seen := s.drainedInTemporal(ctx, twd, v1)
		return drained, seen
	}); err != nil {
		return err
	}
	s.milestone(s.name(v1)+" drained", "Temporal reports %s Drained: no open workflow needs it. The controller notices on its next look"+
		" (about once a minute for draining versions) and keeps the pods until scaledownDelay (%s) after the drain, for queries.",
		s.name(v1), durationOr(twd.Spec.Sunset.ScaledownDelay, "1h"))
	if _, err := s.wait(ctx, 2*time.Minute+durationOf(twd.Spec.Sunset.ScaledownDelay), s.name(v1)+" to be scaled to zero", func(sn snapshot) (bool, string) {
		return sn.replicas(v1) <= 0, ""
	}); err != nil {
		return err
	}
	s.milestone(s.name(v1)+" scaled to zero", "%s is scaled to zero; its Deployment is deleted after deleteDelay (%s).", s.name(v1), durationOr(twd.Spec.Sunset.DeleteDelay, "24h"))
	if _, err := s.wait(ctx, time.Minute+durationOf(twd.Spec.Sunset.DeleteDelay), "the Deployment of "+s.name(v1)+" to be deleted", func(sn snapshot) (bool, string) {
		return sn.replicas(v1) < 0, ""
	}); err != nil {
		return err
	}
	gone := ""
	if s.hpas[v1] != "" {
		gone = " So is its HPA."
	}
	s.milestone(s.name(v1)+" Deployment deleted", "The Deployment of %s is deleted; the version goes from Temporal once its pollers are forgotten.%s", s.name(v1), gone)
	if _, err := s.wait(ctx, 2*time.Minute, s.name(v1)+" to be removed from Temporal", func(sn snapshot) (bool, string) {
		return sn.twd != nil && sn.version(v1) == nil, ""
	}); err != nil {
		return err
	}
	s.milestone(s.name(v1)+" removed from Temporal", "%s is gone from Temporal too: only %s is left.", s.name(v1), s.name(v2))
	s.summary()
	return nil
}

// createFirst applies the connection and the TWD (and its owned resources)
// and waits for the first version to become current.
func (s *story) createFirst(ctx context.Context, conn *v1alpha1.TemporalConnection, twd *v1alpha1.TemporalWorkerDeployment) (string, error) {
	s.milestone("", "Applying TemporalConnection %s/%s (Temporal at %s)", conn.Namespace, conn.Name, conn.Spec.HostPort)
	if err := s.applyConnection(ctx, conn); err != nil {
		return "", err
	}
	if _, err := s.wait(ctx, time.Minute, "TemporalConnection "+conn.Name+" Ready (is the controller running?)", func(snapshot) (bool, string) {
		got := &v1alpha1.TemporalConnection{}
		if err := s.o.Kube.Get(ctx, client.ObjectKeyFromObject(conn), got); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil {
			return false, "no Ready condition yet"
		}
		return c.Status == "True", fmt.Sprintf("Ready %s %s: %s", c.Status, c.Reason, c.Message)
	}); err != nil {
		return "", err
	}
	s.say("connection %s is Ready: the controller reached Temporal", conn.Name)

	s.milestone("", "Applying TemporalWorkerDeployment %s/%s with image %s", twd.Namespace, twd.Name, twd.Spec.Template.Spec.Containers[0].Image)
	if err := s.createTWD(ctx, twd); err != nil {
		return "", err
	}
	for _, or := range s.owned {
		s.milestone("", "Applying TemporalWorkerOwnedResource %s/%s: a %s for every version with running workers", or.Namespace, or.Name, kindOf(or))
		if err := s.createOwned(ctx, or); err != nil {
			return "", err
		}
	}
	snap, err := s.wait(ctx, 3*time.Minute, "the first version to become current", func(sn snapshot) (bool, string) {
		t := sn.target()
		return t != "" && sn.status(t) == v1alpha1.VersionCurrent && sn.ready(), ""
	})
	if err != nil {
		return "", err
	}
	v1 := snap.target()
	s.res.First = v1
	s.milestone(s.name(v1)+" current", "%s (build ID %s) is current: new workflows start on it. The first version needs no ramp.", s.name(v1), v1)
	return v1, nil
}

// rollOut changes the image tag (and sets env, if given), waits for the
// controller to see the new version and, unless env is set, for it to
// become current; it returns the new build ID.
func (s *story) rollOut(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment, prev, tag string, env *corev1.EnvVar) (string, error) {
	what := ""
	if env != nil {
		what = fmt.Sprintf(" and setting %s=%s", env.Name, env.Value)
	}
	s.milestone("", "Rolling out %s: changing the image to %s%s", tag, setTag(twd.Spec.Template.Spec.Containers[0].Image, tag), what)
	if err := s.setImageTag(ctx, tag, env); err != nil {
		return "", err
	}
	snap, err := s.wait(ctx, time.Minute, "the controller to see the new image", func(sn snapshot) (bool, string) {
		return sn.target() != "" && sn.target() != prev, ""
	})
	if err != nil {
		return "", err
	}
	next := snap.target()
	s.rolling = next
	s.say("the new template is version %s (build ID %s); it gets its own Deployment", s.name(next), next)
	if env != nil {
		return next, nil
	}
	var total time.Duration
	for _, st := range twd.Spec.Rollout.Steps {
		total += st.PauseDuration.Duration
	}
	if _, err := s.wait(ctx, 2*time.Minute+total, s.name(next)+" to become current", func(sn snapshot) (bool, string) {
		return sn.target() == next && sn.status(next) == v1alpha1.VersionCurrent && sn.ready(), ""
	}); err != nil {
		return "", err
	}
	return next, nil
}

// summary prints the timeline and where to look next.
func (s *story) summary() {
	out := s.timeline()
	if s.o.TemporalUI != "" {
		out("Temporal UI: %s/namespaces/%s/workflows (the pinned workflow is %s)", strings.TrimRight(s.o.TemporalUI, "/"), s.o.TemporalNamespace, s.pinned.id)
	}
	if s.o.Kubeconfig != "" {
		out("kubectl:     export KUBECONFIG=%s", s.o.Kubeconfig)
		out("             .cache/kube/kubectl -n %s get twd,deployments,pods", s.key.Namespace)
		out("plugin:      .cache/bin/kubectl-rainbow -n %s status %s --watch   (pause, resume, promote, abort, undo: docs/kubectl-plugin.md)", s.key.Namespace, s.key.Name)
		out("dashboard:   .cache/bin/kubectl-rainbow -n %s dashboard   (the same live in a browser, with buttons: docs/dashboard.md)", s.key.Namespace)
	}
	if s.o.Linger {
		out("")
		out("Everything keeps running, and Hello workflows keep starting. Try a rollout of your own:")
		out("  .cache/kube/kubectl -n %s patch twd %s --type=json \\", s.key.Namespace, s.key.Name)
		out("    -p '[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"%s\"}]'", setTag(s.imageNow, "v3"))
		out("Its progress shows here. Press Ctrl-C to stop everything.")
		out("")
	}
}

// timeline prints the milestones and the Hello workflows' counts, and
// returns a printer for what follows.
func (s *story) timeline() func(format string, args ...any) {
	hellos, failed := s.hellos.counts()
	out := func(format string, args ...any) { fmt.Fprintf(s.o.Out, format+"\n", args...) }
	out("\n==> Done in %s. Timeline:", strings.TrimSpace(clock(time.Since(s.start))))
	for _, m := range s.res.Milestones {
		out("    %s  %s", clock(m.At), m.What)
	}
	builds := make([]string, 0, len(hellos))
	n := 0
	for b, c := range hellos {
		builds = append(builds, fmt.Sprintf("%s ×%d", s.name(b), c))
		n += c
	}
	sort.Strings(builds)
	out("    Hello workflows: %d completed (%s), %d failed.", n, strings.Join(builds, ", "), failed)
	out("")
	return out
}

// wait observes every pollEvery until check passes, printing what changes.
// A zero timeout waits until ctx ends.
func (s *story) wait(ctx context.Context, timeout time.Duration, what string, check func(snapshot) (done bool, seen string)) (snapshot, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var last snapshot
	var lastErr error
	seen := ""
	for {
		snap, err := s.observe(ctx)
		if err != nil {
			lastErr = err
		} else {
			last = snap
			done, sn := check(snap)
			if done {
				return snap, nil
			}
			seen = sn
		}
		if ctx.Err() != nil {
			return last, ctx.Err()
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %s waiting for %s", timeout, what)
			if seen != "" {
				msg += "\n  last seen: " + seen
			}
			if last.twd != nil {
				msg += "\n  status: " + last.line(s.name)
				for _, c := range last.twd.Status.Conditions {
					msg += fmt.Sprintf("\n  %s %s %s: %s", c.Type, c.Status, c.Reason, c.Message)
				}
			}
			if lastErr != nil {
				msg += "\n  last error: " + lastErr.Error()
			}
			return last, errors.New(msg)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollEvery):
		}
	}
}

// sleep waits for d while printing what changes.
func (s *story) sleep(ctx context.Context, d time.Duration) (snapshot, error) {
	until := time.Now().Add(d)
	return s.wait(ctx, d+time.Minute, "time to pass", func(snapshot) (bool, string) { return !time.Now().Before(until), "" })
}

// drainedInTemporal asks Temporal, at most every two seconds, whether it
// reports build drained.
func (s *story) drainedInTemporal(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment, build string) (bool, string) {
	if time.Since(s.temporalAt) < 2*time.Second {
		return false, s.temporalSeen
	}
	s.temporalAt = time.Now()
	resp, err := s.o.Temporal.WorkflowService().DescribeWorkerDeploymentVersion(ctx, &workflowservice.DescribeWorkerDeploymentVersionRequest{
		Namespace:         twd.Spec.WorkerOptions.TemporalNamespace,
		DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{DeploymentName: twd.WorkerDeploymentName(), BuildId: build},
	})
	if err != nil {
		s.temporalSeen = "Temporal: " + err.Error()
		return false, s.temporalSeen
	}
	info := resp.GetWorkerDeploymentVersionInfo()
	s.temporalSeen = fmt.Sprintf("Temporal: status %s, drainage %s", info.GetStatus(), info.GetDrainageInfo().GetStatus())
	return info.GetStatus() == enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_DRAINED ||
		info.GetDrainageInfo().GetStatus() == enumspb.VERSION_DRAINAGE_STATUS_DRAINED, s.temporalSeen
}

// observe reads the TWD, its Deployments and Events, and prints what is new.
func (s *story) observe(ctx context.Context) (snapshot, error) {
	snap := snapshot{deps: map[string]*appsv1.Deployment{}}
	twd := &v1alpha1.TemporalWorkerDeployment{}
	switch err := s.o.Kube.Get(ctx, s.key, twd); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return snap, err
	default:
		snap.twd = twd
	}
	var deps appsv1.DeploymentList
	if err := s.o.Kube.List(ctx, &deps, client.InNamespace(s.key.Namespace),
		client.MatchingLabels{workload.LabelWorker: workload.WorkerLabel(s.key.Name)}); err != nil {
		return snap, err
	}
	for i := range deps.Items {
		if b := deps.Items[i].Labels[workload.LabelBuildID]; b != "" {
			snap.deps[b] = &deps.Items[i]
		}
	}
	if len(s.owned) > 0 {
		var hpas autoscalingv2.HorizontalPodAutoscalerList
		if err := s.o.Kube.List(ctx, &hpas, client.InNamespace(s.key.Namespace),
			client.MatchingLabels{workload.LabelWorker: workload.WorkerLabel(s.key.Name)}); err != nil {
			return snap, err
		}
		snap.hpas = map[string]*autoscalingv2.HorizontalPodAutoscaler{}
		for i := range hpas.Items {
			if b := hpas.Items[i].Labels[workload.LabelBuildID]; b != "" && hpas.Items[i].DeletionTimestamp == nil {
				snap.hpas[b] = &hpas.Items[i]
				if s.hpas == nil {
					s.hpas = map[string]string{}
				}
				s.hpas[b] = hpas.Items[i].Name
			}
		}
	}
	for _, v := range snap.versions() {
		s.builds[v.BuildID] = true
	}
	if err := s.printEvents(ctx); err != nil {
		return snap, err
	}
	if snap.twd != nil {
		for _, v := range snap.versions() {
			h := s.history[v.BuildID]
			if v.Status != "" && (len(h) == 0 || h[len(h)-1] != v.Status) {
				s.history[v.BuildID] = append(h, v.Status)
			}
			if v.Status == v1alpha1.VersionRamping && v.RampPercentage != nil {
				s.noteRamp(v.BuildID, *v.RampPercentage)
			}
		}
		if line := snap.line(s.name); line != s.last {
			s.say("status   %s", line)
			s.last = line
		}
		s.printAnalysis(snap)
	}
	s.printTraffic(snap)
	return snap, nil
}

// printAnalysis prints each check's verdict and evidence when it changes.
func (s *story) printAnalysis(snap snapshot) {
	a := snap.twd.Status.Analysis
	if a == nil {
		return
	}
	for _, c := range a.Checks {
		line := fmt.Sprintf("%s %-12s %s", s.name(a.BuildID), c.Result, s.shorten(c.Message))
		if s.checks[c.Name] != line {
			s.checks[c.Name] = line
			s.say("analysis %s", line)
		}
	}
}

// printEvents prints the controller's Events on the TWD not printed yet.
func (s *story) printEvents(ctx context.Context) error {
	var list eventsv1.EventList
	if err := s.o.Kube.List(ctx, &list, client.InNamespace(s.key.Namespace)); err != nil {
		return err
	}
	var fresh []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind != "TemporalWorkerDeployment" || e.Regarding.Name != s.key.Name || s.seen[e.UID] {
			continue
		}
		s.seen[e.UID] = true
		// Events of an earlier run with the same name are not this story's.
		if e.CreationTimestamp.Time.Before(s.start.Add(-2 * time.Second)) {
			continue
		}
		fresh = append(fresh, e)
	}
	sort.SliceStable(fresh, func(i, j int) bool { return eventTime(fresh[i]).Before(eventTime(fresh[j])) })
	for _, e := range fresh {
		kind := ""
		if e.Type != corev1.EventTypeNormal {
			kind = e.Type + " "
		}
		s.say("event    %s%s: %s", kind, e.Reason, s.shorten(e.Note))
		if e.Reason == v1alpha1.ReasonAnalysisFailed {
			s.aborts = append(s.aborts, e.Note)
		}
	}
	return nil
}

func eventTime(e eventsv1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// printTraffic prints where the Hello workflows of the last window ran,
// when traffic is split or a version ramps.
func (s *story) printTraffic(snap snapshot) {
	if time.Since(s.trafficAt) < trafficWindow {
		return
	}
	s.trafficAt = time.Now()
	window, failed := s.hellos.takeWindow()
	ramping := false
	for _, v := range snap.versions() {
		ramping = ramping || v.Status == v1alpha1.VersionRamping
	}
	if len(window) < 2 && !ramping && failed == 0 {
		return
	}
	var parts []string
	for b, n := range window {
		parts = append(parts, fmt.Sprintf("%s ×%d", s.name(b), n))
	}
	sort.Strings(parts)
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("failed ×%d (%s)", failed, s.hellos.lastError()))
	}
	if len(parts) == 0 {
		parts = append(parts, "none completed")
	}
	s.say("traffic  Hello workflows in the last %s: %s", trafficWindow, strings.Join(parts, " · "))
}

// noteRamp records each ramp percentage a build is seen at.
func (s *story) noteRamp(build string, pct int32) {
	for _, p := range s.rampsOf(build) {
		if p == pct {
			return
		}
	}
	s.ramps = append(s.ramps, ramp{build, pct})
	if build == s.rolling {
		s.res.Milestones = append(s.res.Milestones, Milestone{At: time.Since(s.start), What: fmt.Sprintf("%s ramping %d%%", s.name(build), pct)})
	}
}

type ramp struct {
	build string
	pct   int32
}

func (s *story) rampsOf(build string) []int32 {
	var out []int32
	for _, r := range s.ramps {
		if r.build == build {
			out = append(out, r.pct)
		}
	}
	return out
}

// went reports whether build was ever seen with status st.
func (s *story) went(build string, st v1alpha1.VersionStatus) bool {
	for _, h := range s.history[build] {
		if h == st {
			return true
		}
	}
	return false
}

func (s *story) applyConnection(ctx context.Context, conn *v1alpha1.TemporalConnection) error {
	existing := &v1alpha1.TemporalConnection{}
	switch err := s.o.Kube.Get(ctx, client.ObjectKeyFromObject(conn), existing); {
	case apierrors.IsNotFound(err):
		if err := s.o.Kube.Create(ctx, conn); err != nil {
			return fmt.Errorf("create TemporalConnection: %w", err)
		}
		return nil
	case err != nil:
		return err
	default:
		existing.Spec = conn.Spec
		if err := s.o.Kube.Update(ctx, existing); err != nil {
			return fmt.Errorf("update TemporalConnection: %w", err)
		}
		return nil
	}
}

// loadOwned reads the owned resources, which must name the TWD.
func loadOwned(files []string, twd *v1alpha1.TemporalWorkerDeployment) ([]*v1alpha1.TemporalWorkerOwnedResource, error) {
	var out []*v1alpha1.TemporalWorkerOwnedResource
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		or := &v1alpha1.TemporalWorkerOwnedResource{}
		if err := yaml.UnmarshalStrict(data, or); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if or.Spec.WorkerRef.Name != twd.Name {
			return nil, fmt.Errorf("%s names TemporalWorkerDeployment %q, want %q", f, or.Spec.WorkerRef.Name, twd.Name)
		}
		or.Namespace = twd.Namespace
		out = append(out, or)
	}
	return out, nil
}

func kindOf(or *v1alpha1.TemporalWorkerOwnedResource) string {
	var obj struct{ Kind string }
	if err := json.Unmarshal(or.Spec.Object.Raw, &obj); err != nil || obj.Kind == "" {
		return "copy of spec.object"
	}
	return obj.Kind
}

// createOwned creates an owned resource once the one an earlier run left
// is gone (it goes with the earlier TWD).
func (s *story) createOwned(ctx context.Context, or *v1alpha1.TemporalWorkerOwnedResource) error {
	if _, err := s.wait(ctx, 2*time.Minute, "the earlier TemporalWorkerOwnedResource "+or.Name+" to be deleted", func(snapshot) (bool, string) {
		err := s.o.Kube.Get(ctx, client.ObjectKeyFromObject(or), &v1alpha1.TemporalWorkerOwnedResource{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	}); err != nil {
		return err
	}
	if err := s.o.Kube.Create(ctx, or.DeepCopy()); err != nil {
		return fmt.Errorf("create TemporalWorkerOwnedResource %s: %w", or.Name, err)
	}
	return nil
}

// waitHPA waits for build's HPA, when the demo attaches one.
func (s *story) waitHPA(ctx context.Context, build string) error {
	if !slices.ContainsFunc(s.owned, func(or *v1alpha1.TemporalWorkerOwnedResource) bool { return kindOf(or) == "HorizontalPodAutoscaler" }) {
		return nil
	}
	snap, err := s.wait(ctx, time.Minute, "the HPA of "+s.name(build), func(sn snapshot) (bool, string) {
		return sn.hpas[build] != nil, ""
	})
	if err != nil {
		return err
	}
	h := snap.hpas[build]
	s.milestone(s.name(build)+" has its HPA", "%s has its own HorizontalPodAutoscaler %s (minReplicas %d, maxReplicas %d) scaling Deployment %s.",
		s.name(build), h.Name, ptr.Deref(h.Spec.MinReplicas, 1), h.Spec.MaxReplicas, h.Spec.ScaleTargetRef.Name)
	return nil
}

// createTWD creates the TWD, first deleting one left by an earlier run so
// that the story starts from its first version.
func (s *story) createTWD(ctx context.Context, twd *v1alpha1.TemporalWorkerDeployment) error {
	old := &v1alpha1.TemporalWorkerDeployment{}
	switch err := s.o.Kube.Get(ctx, s.key, old); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		s.say("deleting the TemporalWorkerDeployment an earlier run left, to start from the first version")
		if err := s.o.Kube.Delete(ctx, old); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if _, err := s.wait(ctx, 2*time.Minute, "the old TemporalWorkerDeployment to be deleted", func(sn snapshot) (bool, string) {
			return sn.twd == nil, ""
		}); err != nil {
			return err
		}
		s.last = ""
	}
	if err := s.o.Kube.Create(ctx, twd); err != nil {
		return fmt.Errorf("create TemporalWorkerDeployment: %w", err)
	}
	return nil
}

// setImageTag changes the tag of the first container's image, and sets
// env if given, retrying when the controller updated the object meanwhile.
func (s *story) setImageTag(ctx context.Context, tag string, env *corev1.EnvVar) error {
	for i := 0; ; i++ {
		twd := &v1alpha1.TemporalWorkerDeployment{}
		if err := s.o.Kube.Get(ctx, s.key, twd); err != nil {
			return err
		}
		c := &twd.Spec.Template.Spec.Containers[0]
		c.Image = setTag(c.Image, tag)
		if env != nil {
			c.Env = append(removeEnv(c.Env, env.Name), *env)
		}
		err := s.o.Kube.Update(ctx, twd)
		if err == nil {
			s.imageNow = c.Image
			return nil
		}
		if !apierrors.IsConflict(err) || i >= 10 {
			return fmt.Errorf("update TemporalWorkerDeployment: %w", err)
		}
	}
}

// name is the short name of a build ID.
func (s *story) name(build string) string {
	s.builds[build] = true
	return shortNames(s.builds)[build]
}

// shorten replaces build IDs in text with their short names.
func (s *story) shorten(text string) string {
	names := shortNames(s.builds)
	ids := make([]string, 0, len(names))
	for id := range names {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return len(ids[i]) > len(ids[j]) })
	for _, id := range ids {
		text = strings.ReplaceAll(text, id, names[id])
	}
	return text
}

func (s *story) say(format string, args ...any) {
	if format == "" {
		fmt.Fprintln(s.o.Out)
		return
	}
	fmt.Fprintf(s.o.Out, "%s  %s\n", clock(time.Since(s.start)), fmt.Sprintf(format, args...))
}

// milestone prints a step of the story; short, if set, goes in the
// timeline of the summary.
func (s *story) milestone(short, format string, args ...any) {
	if short != "" {
		s.res.Milestones = append(s.res.Milestones, Milestone{At: time.Since(s.start), What: short})
	}
	fmt.Fprintf(s.o.Out, "\n==> %s  %s\n", strings.TrimSpace(clock(time.Since(s.start))), fmt.Sprintf(format, args...))
}

func clock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%2d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

func describeRollout(twd *v1alpha1.TemporalWorkerDeployment) string {
	if twd.Spec.Rollout.Strategy != v1alpha1.StrategyProgressive {
		return "no ramp steps"
	}
	var steps []string
	for _, st := range twd.Spec.Rollout.Steps {
		steps = append(steps, fmt.Sprintf("%d%% for %s", st.RampPercentage, st.PauseDuration.Duration))
	}
	return strings.Join(steps, ", then ") + ", then current"
}

func percents(ps []int32) string {
	if len(ps) == 0 {
		return "(no ramp seen)"
	}
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d%%", p))
	}
	return strings.Join(out, " → ")
}

func durationOf(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

func durationOr(d *metav1.Duration, def string) string {
	if v := durationOf(d); v > 0 {
		return v.String()
	}
	return def
}

func imageTag(image string) string {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return "latest"
}

func setTag(image, tag string) string {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image + ":" + tag
}

func taskQueueOf(twd *v1alpha1.TemporalWorkerDeployment) string {
	for _, e := range twd.Spec.Template.Spec.Containers[0].Env {
		if e.Name == taskQueueEnv && e.Value != "" {
			return e.Value
		}
	}
	return defaultTaskQueue
}

func removeEnv(env []corev1.EnvVar, name string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if e.Name != name {
			out = append(out, e)
		}
	}
	return out
}

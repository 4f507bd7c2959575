package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	sdkclient "go.temporal.io/sdk/client"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// The autoscaling story (`make demo-autoscaling`): the TemporalWorkerDeployment of
// examples/autoscaling/worker.yaml, without spec.replicas, gets an HPA on
// its version's own Temporal backlog (hpa-backlog.yaml, served by the
// controller's external metrics API); a burst of Work workflows queues up
// behind the workers' activity slots, the real HPA controller scales the
// version up, the backlog drains, and the HPA scales it back to one.
const (
	// AutoscalingWorkerFile and AutoscalingHPAFile are in
	// AutoscalingOptions.Dir; the connection is ConnectionFile in
	// AutoscalingOptions.ConnectionDir.
	AutoscalingWorkerFile = "worker.yaml"
	AutoscalingHPAFile    = "hpa-backlog.yaml"
)

// AutoscalingOptions configure the autoscaling story. Kube, Temporal, Dir,
// ConnectionDir and Out are required.
type AutoscalingOptions struct {
	Kube     client.Client
	Temporal sdkclient.Client
	// Dir holds AutoscalingWorkerFile and AutoscalingHPAFile
	// (examples/autoscaling); ConnectionDir holds ConnectionFile
	// (examples/demo).
	Dir, ConnectionDir string
	Out                io.Writer
	// Overrides of the files, as in Options.
	Namespace, TemporalAddress, TemporalNamespace, TaskQueue string
	// Burst is how many Work workflows are started at once (default 24),
	// each holding an activity slot for Hold (default 4s).
	Burst int
	Hold  time.Duration
	// Linger keeps printing after the story, until ctx ends.
	Linger bool
}

// AutoscalingResult is what the autoscaling story saw.
type AutoscalingResult struct {
	BuildID string
	// MostReplicas is the most replicas the version had.
	MostReplicas int32
	// MostBacklog is the largest backlog the HPA read.
	MostBacklog int64
	// ScaledUp is the time from the burst to a second replica, Done to
	// every workflow done, ScaledDown from then to one replica again.
	ScaledUp, Done, ScaledDown time.Duration
}

// RunAutoscaling tells the autoscaling story.
func RunAutoscaling(ctx context.Context, o AutoscalingOptions) (*AutoscalingResult, error) {
	if o.Kube == nil || o.Temporal == nil || o.Dir == "" || o.ConnectionDir == "" || o.Out == nil {
		return nil, errors.New("demo: Kube, Temporal, Dir, ConnectionDir and Out are required")
	}
	o.Burst, o.Hold = cmp.Or(o.Burst, 24), cmp.Or(o.Hold, 4*time.Second)
	conn := &v1alpha1.TemporalConnection{}
	twd := &v1alpha1.TemporalWorkerDeployment{}
	hpa := &v1alpha1.TemporalWorkerOwnedResource{}
	for path, obj := range map[string]any{
		filepath.Join(o.ConnectionDir, ConnectionFile): conn, filepath.Join(o.Dir, AutoscalingWorkerFile): twd,
		filepath.Join(o.Dir, AutoscalingHPAFile): hpa,
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := yaml.UnmarshalStrict(data, obj); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if o.Namespace != "" {
		conn.Namespace, twd.Namespace, hpa.Namespace = o.Namespace, o.Namespace, o.Namespace
	}
	if o.TemporalAddress != "" {
		conn.Spec.HostPort = o.TemporalAddress
	}
	if o.TemporalNamespace != "" {
		twd.Spec.WorkerOptions.TemporalNamespace = o.TemporalNamespace
	}
	c := &twd.Spec.Template.Spec.Containers[0]
	if o.TaskQueue != "" {
		c.Env = append(removeEnv(c.Env, taskQueueEnv), corev1.EnvVar{Name: taskQueueEnv, Value: o.TaskQueue})
	}
	a := &autoscalingStory{o: o, start: time.Now(), twd: twd, res: &AutoscalingResult{BuildID: buildid.Of(&twd.Spec)}}
	return a.res, a.tell(ctx, conn, hpa, taskQueueOf(twd))
}

type autoscalingStory struct {
	o     AutoscalingOptions
	start time.Time
	twd   *v1alpha1.TemporalWorkerDeployment
	res   *AutoscalingResult
	last  string
}

func (a *autoscalingStory) say(format string, args ...any) {
	fmt.Fprintf(a.o.Out, "%6s  %s\n", time.Since(a.start).Round(time.Second), fmt.Sprintf(format, args...))
}

func (a *autoscalingStory) tell(ctx context.Context, conn *v1alpha1.TemporalConnection, hpa *v1alpha1.TemporalWorkerOwnedResource, taskQueue string) error {
	o, twd, build := a.o, a.twd, a.res.BuildID
	a.say("The autoscaling demo: TemporalWorkerDeployment %s/%s has no spec.replicas; %s gives each version an", twd.Namespace, twd.Name, AutoscalingHPAFile)
	a.say("HPA on its own Temporal backlog (the controller's external metric temporal_backlog_count, selected by build ID).")
	for _, obj := range []client.Object{conn, twd} {
		if err := o.Kube.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if err := a.waitFor(ctx, 2*time.Minute, "version "+build+" current", func() (bool, error) {
		got := &v1alpha1.TemporalWorkerDeployment{}
		if err := o.Kube.Get(ctx, client.ObjectKeyFromObject(twd), got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == "True" && got.Status.CurrentVersion != nil && got.Status.CurrentVersion.BuildID == build, nil
	}); err != nil {
		return err
	}
	a.say("version %s is current with 1 replica; applying %s", build, AutoscalingHPAFile)
	if err := o.Kube.Create(ctx, hpa); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	hpaKey := client.ObjectKey{Namespace: twd.Namespace, Name: ownedresource.Name(twd.Name, hpa.Name, build)}
	if err := a.waitFor(ctx, time.Minute, "the HPA reading the backlog", func() (bool, error) {
		var h autoscalingv2.HorizontalPodAutoscaler
		if err := o.Kube.Get(ctx, hpaKey, &h); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, c := range h.Status.Conditions {
			if c.Type == autoscalingv2.ScalingActive && c.Status == "True" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	a.say("HPA %s reads the backlog of %s", hpaKey.Name, build)

	a.say("starting %d Work workflows: each holds one of the worker's %s activity slots for %s", o.Burst, envOf(twd, "DEMO_MAX_CONCURRENT_ACTIVITIES"), o.Hold)
	burst := time.Now()
	done := make(chan error, 1)
	go func() { done <- a.burst(ctx, taskQueue) }()
	phase := "up"
	for {
		a.show(ctx, hpaKey)
		replicas := a.replicas(ctx)
		switch {
		case phase == "up" && replicas >= 2:
			a.res.ScaledUp = time.Since(burst)
			a.say("scaled up %s after the burst", a.res.ScaledUp.Round(time.Second))
			phase = "drain"
		case phase == "drain":
			select {
			case err := <-done:
				if err != nil {
					return err
				}
				a.res.Done = time.Since(burst)
				a.say("every Work workflow is done, %s after the burst", a.res.Done.Round(time.Second))
				phase = "down"
			default:
			}
		case phase == "down" && replicas == 1:
			a.res.ScaledDown = time.Since(burst) - a.res.Done
			a.say("back to 1 replica %s after the backlog was gone (the HPA's scale-down stabilization)", a.res.ScaledDown.Round(time.Second))
			a.say("most replicas %d, largest backlog %d", a.res.MostReplicas, a.res.MostBacklog)
			if !o.Linger {
				return nil
			}
			a.say("everything keeps running (start more Work workflows on task queue %s); Ctrl-C stops it", taskQueue)
			phase = "linger"
		}
		if phase == "up" && time.Since(burst) > 2*time.Minute {
			return fmt.Errorf("the HPA did not scale %s up within 2 minutes of the burst", build)
		}
		if phase == "down" && time.Since(burst)-a.res.Done > 3*time.Minute {
			return fmt.Errorf("the HPA did not scale %s back to 1 within 3 minutes of the backlog's end", build)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// burst starts the Work workflows and waits for all of them.
func (a *autoscalingStory) burst(ctx context.Context, taskQueue string) error {
	var runs []sdkclient.WorkflowRun
	for i := range a.o.Burst {
		run, err := a.o.Temporal.ExecuteWorkflow(ctx, sdkclient.StartWorkflowOptions{
			ID: fmt.Sprintf("%s-work-%s-%d", a.twd.Name, a.start.Format("150405"), i), TaskQueue: taskQueue,
		}, demoworker.WorkWorkflow, demoworker.WorkInput{Sleep: a.o.Hold})
		if err != nil {
			return fmt.Errorf("start Work: %w", err)
		}
		runs = append(runs, run)
	}
	for _, run := range runs {
		if err := run.Get(ctx, nil); err != nil {
			return fmt.Errorf("Work: %w", err)
		}
	}
	return nil
}

func (a *autoscalingStory) replicas(ctx context.Context) int32 {
	var list appsv1.DeploymentList
	if err := a.o.Kube.List(ctx, &list, client.InNamespace(a.twd.Namespace), client.MatchingLabels{workload.LabelBuildID: a.res.BuildID}); err != nil || len(list.Items) == 0 {
		return 0
	}
	return ptr.Deref(list.Items[0].Spec.Replicas, 1)
}

// show prints the version's replicas and what its HPA reads, when they change.
func (a *autoscalingStory) show(ctx context.Context, hpaKey client.ObjectKey) {
	var h autoscalingv2.HorizontalPodAutoscaler
	if err := a.o.Kube.Get(ctx, hpaKey, &h); err != nil {
		return
	}
	replicas := a.replicas(ctx)
	a.res.MostReplicas = max(a.res.MostReplicas, replicas)
	backlog := "?"
	for _, m := range h.Status.CurrentMetrics {
		if m.External != nil && m.External.Current.AverageValue != nil {
			n := m.External.Current.AverageValue.MilliValue() * int64(h.Status.CurrentReplicas) / 1000
			a.res.MostBacklog = max(a.res.MostBacklog, n)
			backlog = fmt.Sprint(n)
		}
	}
	line := fmt.Sprintf("replicas %d (HPA wants %d), backlog %s", replicas, h.Status.DesiredReplicas, backlog)
	if line != a.last {
		a.last = line
		a.say("%s", line)
	}
}

func (a *autoscalingStory) waitFor(ctx context.Context, timeout time.Duration, what string, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := check()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

func envOf(twd *v1alpha1.TemporalWorkerDeployment, name string) string {
	for _, e := range twd.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return "(default)"
}

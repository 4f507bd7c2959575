// Command idlefleet grows a fleet of idle TemporalWorkerDeployments in a
// running devenv, cheaply enough for thousands on one machine, to size the
// controller (docs/performance.md, "5,000 TWDs on one controller").
//
// Each TWD has one replica whose pod runs a program that only sleeps (map
// the image's short name "idle-pod" to one with devenv's --program). The
// Temporal side is played in this process: for each Deployment the
// controller creates, a versioned demo worker polls with the deployment
// name and build ID from the Deployment's pod template until the TWD is
// Ready, then stops (unless -keep-workers), so the dev server never holds
// thousands of long polls. What the controller then holds per TWD is what
// it holds for a real idle one, less the pollers a describe would list.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/internal/workerenv"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

func main() {
	n := flag.Int("n", 200, "TWDs the fleet grows to (w00000, w00001, ...); existing ones are kept")
	ns := flag.String("namespace", "fleet", "Kubernetes namespace of the fleet")
	maxWorkers := flag.Int("workers", 200, "demo workers polling at once")
	keep := flag.Bool("keep-workers", false, "keep each TWD's worker polling once it is Ready (real idle TWDs; costs long polls)")
	image := flag.String("image", "rainbow.local/idle-pod:a1", "the pods' image")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *ns, *n, *maxWorkers, *keep, *image); err != nil {
		fmt.Fprintln(os.Stderr, "idlefleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, ns string, n, maxWorkers int, keep bool, image string) error {
	if os.Getenv("RAINBOW_ENV_DIR") == "" {
		return errors.New("RAINBOW_ENV_DIR must name a running devenv's directory")
	}
	e, err := harness.Start()
	if err != nil {
		return err
	}
	defer e.Stop()
	if err := ensureNamespace(ctx, e, ns); err != nil {
		return err
	}
	c, err := cache.New(e.REST, cache.Options{Scheme: e.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return err
	}
	for _, o := range []crclient.Object{&v1alpha1.TemporalWorkerDeployment{}, &appsv1.Deployment{}} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			return err
		}
	}
	go c.Start(ctx)
	if !c.WaitForCacheSync(ctx) {
		return errors.New("cache not synced")
	}
	start := time.Now()
	if err := createTWDs(ctx, e, c, ns, n, image); err != nil {
		return err
	}
	fmt.Printf("%d TWDs exist in %s (%.0fs)\n", n, ns, time.Since(start).Seconds())

	f := &fleet{temporal: e.Temporal, running: map[types.NamespacedName]*polling{}}
	lastPrint := time.Time{}
	for {
		ready, pending, err := f.step(ctx, c, ns, maxWorkers, keep)
		if err != nil {
			return err
		}
		if time.Since(lastPrint) > 10*time.Second {
			fmt.Printf("%s ready %d/%d, workers polling %d, pending %d\n", time.Since(start).Round(time.Second), ready, n, len(f.running), pending)
			lastPrint = time.Now()
		}
		if ready >= n && (keep || len(f.running) == 0) {
			break
		}
		select {
		case <-ctx.Done():
			f.stopAll()
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	fmt.Printf("all %d Ready after %.0fs\n", n, time.Since(start).Seconds())
	if keep {
		fmt.Println("workers keep polling; Ctrl-C stops them")
		<-ctx.Done()
		f.stopAll()
	}
	return nil
}

func ensureNamespace(ctx context.Context, e *harness.Env, ns string) error {
	err := e.Kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return e.CreateConnection(ctx, ns)
}

// createTWDs creates the missing TWDs of w00000 to w<n-1>, a few at once.
func createTWDs(ctx context.Context, e *harness.Env, c cache.Cache, ns string, n int, image string) error {
	names := make(chan string)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for name := range names {
				// The API's default sunset delays, not the tests' short ones.
				t := e.DemoTWD(ns, name, image, ns+"-"+name, harness.WithSunset(0, 0))
				if err := e.Kube.Create(ctx, t); err != nil && !apierrors.IsAlreadyExists(err) {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		name := fmt.Sprintf("w%05d", i)
		var t v1alpha1.TemporalWorkerDeployment
		if c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &t) == nil {
			continue
		}
		names <- name
	}
	close(names)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

type fleet struct {
	temporal client.Client
	running  map[types.NamespacedName]*polling
}

// polling is one TWD's worker.
type polling struct {
	build string
	w     worker.Worker
}

// step starts workers for the Deployments of TWDs not yet Ready, up to
// max, and stops those whose TWD is Ready with their build current.
func (f *fleet) step(ctx context.Context, c cache.Cache, ns string, maxWorkers int, keep bool) (ready, pending int, err error) {
	var twds v1alpha1.TemporalWorkerDeploymentList
	if err := c.List(ctx, &twds, crclient.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, crclient.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	depOf := map[string]*appsv1.Deployment{} // TWD name -> its newest Deployment
	for i := range deps.Items {
		d := &deps.Items[i]
		if ref := metav1.GetControllerOf(d); ref != nil && ref.Kind == "TemporalWorkerDeployment" {
			depOf[ref.Name] = d
		}
	}
	for i := range twds.Items {
		t := &twds.Items[i]
		key := types.NamespacedName{Namespace: t.Namespace, Name: t.Name}
		cur := t.Status.CurrentVersion
		isReady := meta.IsStatusConditionTrue(t.Status.Conditions, v1alpha1.ConditionReady) && cur != nil
		p := f.running[key]
		if isReady {
			ready++
			if p != nil && !keep && p.build == cur.BuildID {
				p.w.Stop()
				delete(f.running, key)
			}
			continue
		}
		if p != nil {
			continue
		}
		d := depOf[t.Name]
		if d == nil {
			pending++
			continue
		}
		// A real worker polls once its pod runs: a slot spent on a
		// Deployment not yet available would wait on Kubernetes.
		env := envOf(d)
		if env.DeploymentName == "" || env.BuildID == "" || d.Status.AvailableReplicas == 0 || len(f.running) >= maxWorkers {
			pending++
			continue
		}
		w := demoworker.New(f.temporal, env, taskQueueOf(d))
		if err := w.Start(); err != nil {
			return 0, 0, fmt.Errorf("worker for %s: %w", key, err)
		}
		f.running[key] = &polling{build: env.BuildID, w: w}
	}
	return ready, pending, nil
}

func (f *fleet) stopAll() {
	for k, p := range f.running {
		p.w.Stop()
		delete(f.running, k)
	}
}

// envOf is the worker contract the controller put into the pod template.
func envOf(d *appsv1.Deployment) workerenv.Config {
	var cfg workerenv.Config
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, v := range c.Env {
			switch v.Name {
			case workerenv.DeploymentName:
				cfg.DeploymentName = v.Value
			case workerenv.BuildID:
				cfg.BuildID = v.Value
			}
		}
	}
	return cfg
}

func taskQueueOf(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, v := range c.Env {
			if v.Name == "DEMO_TASK_QUEUE" {
				return v.Value
			}
		}
	}
	return ""
}

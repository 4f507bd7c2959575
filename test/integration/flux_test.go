package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/dev/demoworker"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// fluxKustomization holds the fields of Flux's Kustomization
// (kustomize.toolkit.fluxcd.io/v1) the examples use; decoding strictly into
// it catches a misspelt or misplaced field.
type fluxKustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		Interval      string `json:"interval"`
		RetryInterval string `json:"retryInterval"`
		Path          string `json:"path"`
		Prune         bool   `json:"prune"`
		SourceRef     struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"sourceRef"`
		Timeout      string `json:"timeout"`
		Wait         bool   `json:"wait"`
		HealthChecks []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
			Namespace  string `json:"namespace"`
		} `json:"healthChecks"`
		HealthCheckExprs []fluxHealthCheckExpr `json:"healthCheckExprs"`
	} `json:"spec"`
}

type fluxHealthCheckExpr struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Current    string `json:"current"`
	Failed     string `json:"failed"`
	InProgress string `json:"inProgress"`
}

// readFluxKustomization reads an example and checks what Flux would check
// before applying: the kind, durations, the path in this repository.
func readFluxKustomization(t *testing.T, file string) fluxKustomization {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.Root, "examples", "flux", file))
	if err != nil {
		t.Fatal(err)
	}
	var k fluxKustomization
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if k.APIVersion != "kustomize.toolkit.fluxcd.io/v1" || k.Kind != "Kustomization" || k.Spec.SourceRef.Kind != "GitRepository" {
		t.Fatalf("%s: not a Flux Kustomization from a GitRepository: %+v", file, k)
	}
	for _, d := range []string{k.Spec.Interval, k.Spec.RetryInterval, k.Spec.Timeout} {
		if _, err := time.ParseDuration(d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if k.Spec.Path != "./examples/flux/orders" {
		t.Fatalf("%s: spec.path %s, want ./examples/flux/orders", file, k.Spec.Path)
	}
	if k.Spec.Wait && len(k.Spec.HealthChecks) > 0 {
		t.Fatalf("%s: Flux ignores healthChecks when wait is true", file)
	}
	return k
}

// fluxExpr is a CEL expression as Flux's kustomize-controller evaluates
// healthCheckExprs: parsed, not compiled (the object's fields are not
// declared), with the same environment options, on the object's content.
type fluxExpr struct {
	src  string
	prog cel.Program
}

func newFluxExpr(t *testing.T, src string) *fluxExpr {
	t.Helper()
	if src == "" {
		return nil
	}
	e, err := cel.NewEnv(cel.HomogeneousAggregateLiterals(), cel.EagerlyValidateDeclarations(true), cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true), cel.OptionalTypes(), ext.Strings(), ext.Sets(), ext.Encoders())
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := e.Parse(src)
	if iss != nil && iss.Err() != nil {
		t.Fatalf("parse %q: %v", src, iss.Err())
	}
	prog, err := e.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		t.Fatal(err)
	}
	return &fluxExpr{src: src, prog: prog}
}

func (f *fluxExpr) eval(t *testing.T, u *unstructured.Unstructured) (bool, error) {
	t.Helper()
	v, _, err := f.prog.Eval(u.Object)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		t.Fatalf("%q is no boolean: %v", f.src, v)
	}
	return bool(b), nil
}

// fluxStatus is how Flux judges an object with healthCheckExprs: a
// status.observedGeneration behind metadata.generation is InProgress, then
// inProgress, failed and current in this order, else InProgress. An
// expression that cannot be evaluated gives Unknown, and Flux polls again:
// that is the case of an object without status, whose top-level field
// status the expressions cannot even look into.
func fluxStatus(t *testing.T, e fluxHealthCheckExpr, u *unstructured.Unstructured) status.Status {
	t.Helper()
	if obs, ok, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); ok && obs != u.GetGeneration() {
		return status.InProgressStatus
	}
	for _, c := range []struct {
		src string
		st  status.Status
	}{{e.InProgress, status.InProgressStatus}, {e.Failed, status.FailedStatus}, {e.Current, status.CurrentStatus}} {
		x := newFluxExpr(t, c.src)
		if x == nil {
			continue
		}
		ok, err := x.eval(t, u)
		if err != nil {
			if _, hasStatus := u.Object["status"]; hasStatus {
				t.Fatalf("evaluate %q: %v", x.src, err)
			}
			return status.UnknownStatus
		}
		if ok {
			return c.st
		}
	}
	return status.InProgressStatus
}

// TestFluxExampleHealthChecks applies what the Flux example's
// spec.path builds (examples/flux/orders, with kubectl kustomize), and
// judges its healthChecks at every sample as kustomize-controller does:
// with kstatus for orders.yaml, and with the CEL healthCheckExprs of
// orders-cel.yaml. A first rollout and a second one (a commit that changes
// the image) are InProgress until the version is current, then Current; a
// failed gate is Failed for both. It also runs the kubectl snippets of
// docs/cd-tools.md against the object, as written.
func TestFluxExampleHealthChecks(t *testing.T) {
	parallel(t)
	ks := readFluxKustomization(t, "orders.yaml")
	ksCEL := readFluxKustomization(t, "orders-cel.yaml")
	if len(ksCEL.Spec.HealthCheckExprs) != 1 || ksCEL.Spec.HealthCheckExprs[0].Kind != "TemporalWorkerDeployment" {
		t.Fatalf("orders-cel.yaml: healthCheckExprs %+v", ksCEL.Spec.HealthCheckExprs)
	}
	exprs := ksCEL.Spec.HealthCheckExprs[0]
	docBlocksAreInExamples(t)

	built, err := env.Kubectl(nil, "kustomize", strings.TrimPrefix(ks.Spec.Path, "./"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(built), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	for _, hc := range append(ks.Spec.HealthChecks, ksCEL.Spec.HealthChecks...) {
		found := false
		for _, o := range objs {
			found = found || (o.GetAPIVersion() == hc.APIVersion && o.GetKind() == hc.Kind && o.GetName() == hc.Name && o.GetNamespace() == hc.Namespace)
		}
		if !found {
			t.Fatalf("healthChecks names %s %s/%s, which %s does not build", hc.Kind, hc.Namespace, hc.Name, ks.Spec.Path)
		}
	}

	tt := env.NewTest(t)
	r := &rollout{&harness.Rollout{T: tt, Name: "orders", TaskQueue: tt.TaskQueue("orders")}}
	var twd v1alpha1.TemporalWorkerDeployment
	for _, o := range objs {
		o.SetNamespace(r.Namespace)
		switch o.GetKind() {
		case "TemporalConnection":
			if err := unstructured.SetNestedField(o.Object, r.Env.Info.TemporalAddress, "spec", "hostPort"); err != nil {
				t.Fatal(err)
			}
			if err := r.Env.Kube.Create(context.Background(), o); err != nil {
				t.Fatal(err)
			}
		case "TemporalWorkerDeployment":
			if err := runtimeFromUnstructured(o, &twd); err != nil {
				t.Fatal(err)
			}
		}
	}
	twd.Spec.WorkerOptions.TemporalNamespace = r.Env.Info.TemporalNamespace
	setTaskQueue(t, &twd, r.TaskQueue)
	r.Create(&twd)

	// flux judges the healthChecks like kustomize-controller and samples
	// until want; every sample of the TWD is also held to checkConsistent,
	// and the CEL expressions must agree with kstatus except on blocks
	// that clear by themselves, which CEL keeps waiting on.
	flux := func(timeout time.Duration, want status.Status) map[status.Status]bool {
		t.Helper()
		seen := map[status.Status]bool{}
		r.Eventually(timeout, "the Kustomization's health checks "+string(want), func() (bool, string) {
			agg := status.CurrentStatus
			var line []string
			for _, hc := range ks.Spec.HealthChecks {
				u := liveObject(t, hc.Kind, r.Namespace, hc.Name)
				res := kstatusOf(t, u)
				if hc.Kind == "TemporalWorkerDeployment" {
					r.view(hc.Name)
					if c := fluxStatus(t, exprs, u); c != res.Status && res.Status != status.FailedStatus && c != status.UnknownStatus {
						t.Fatalf("healthCheckExprs say %s, kstatus %s (%s)", c, res.Status, res.Message)
					}
				}
				switch {
				case res.Status == status.FailedStatus:
					agg = status.FailedStatus
				case res.Status != status.CurrentStatus && agg != status.FailedStatus:
					agg = status.InProgressStatus
				}
				line = append(line, fmt.Sprintf("%s/%s %s (%s)", hc.Kind, hc.Name, res.Status, res.Message))
			}
			seen[agg] = true
			return agg == want, strings.Join(line, "; ")
		})
		return seen
	}

	// kstatus calls an object without status Current (docs/cd-tools.md
	// says so): a first look right after the apply may pass at once. Flux
	// looks again after the controller wrote status.
	if seen := flux(2*time.Minute, status.CurrentStatus); !seen[status.InProgressStatus] {
		t.Logf("the first rollout was Current at the first look (no status written yet, or already complete)")
		r.Eventually(time.Minute, "the first status", func() (bool, string) {
			return r.Get().Status.ObservedGeneration != 0, describe(r.Get())
		})
		flux(2*time.Minute, status.CurrentStatus)
	}
	v1 := r.BuildID()
	r.WaitCurrent(3*time.Minute, v1)

	// A commit changes the image: InProgress while v2 ramps, then Current.
	r.SetImage("v2")
	if seen := flux(3*time.Minute, status.CurrentStatus); !seen[status.InProgressStatus] {
		t.Fatal("the second rollout never was InProgress")
	}
	r.WaitCurrent(3*time.Minute, r.BuildID())

	// docs/cd-tools.md, kubectl: apply and wait (v3).
	snippets := kubectlSnippets(t)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	raw, err := os.ReadFile(r.Env.Info.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kubeconfig, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Env.Kubectl(nil, "--kubeconfig", kubeconfig, "config", "set-context", "--current", "--namespace", r.Namespace); err != nil {
		t.Fatal(err)
	}
	apply := r.Get()
	apply.ManagedFields, apply.ResourceVersion, apply.Status = nil, "", v1alpha1.TemporalWorkerDeploymentStatus{}
	apply.APIVersion, apply.Kind = v1alpha1.GroupVersion.String(), "TemporalWorkerDeployment"
	apply.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v3"
	manifest, err := yaml.Marshal(apply)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "orders.yaml"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	sh := func(script string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+filepath.Join(r.Env.Root, ".cache", "kube")+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := sh(snippets[0]); err != nil {
		t.Fatalf("the apply-and-wait snippet: %v\n%s", err, out)
	}
	v3 := r.BuildID()
	if got := r.Get(); got.Status.CurrentVersion == nil || got.Status.CurrentVersion.BuildID != v3 {
		t.Fatalf("the snippet returned before %s was current: %s", v3, describe(got))
	}
	// The stop-early snippet passes on a complete rollout...
	if out, err := sh(snippets[1]); err != nil {
		t.Fatalf("the stop-early snippet on a complete rollout: %v\n%s", err, out)
	}

	// ...and fails on a blocked one: a failed gate is Failed for kstatus
	// and for the CEL expressions.
	failing := gateInput(t, true, "smoke test failed")
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v4"
		t.Spec.Rollout.Gate = &v1alpha1.GateWorkflow{WorkflowType: demoworker.GateWorkflow, Input: failing}
	})
	flux(2*time.Minute, status.FailedStatus)
	r.waitCondition(time.Minute, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonGateFailed)
	flux(time.Minute, status.FailedStatus)
	if got := fluxStatus(t, exprs, liveObject(t, "TemporalWorkerDeployment", r.Namespace, r.Name)); got != status.FailedStatus {
		t.Fatalf("healthCheckExprs on a failed gate: %s", got)
	}
	out, err := sh(snippets[1])
	if err == nil || !strings.Contains(out, "smoke test failed") {
		t.Fatalf("the stop-early snippet on a failed gate: %v\n%s", err, out)
	}

	// Manual: the snippet waits until the new version is registered.
	r.Update(func(t *v1alpha1.TemporalWorkerDeployment) {
		t.Spec.Template.Spec.Containers[0].Image = "rainbow.local/demo-worker:v5"
		t.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyManual}
	})
	if out, err := sh(`gen=$(kubectl get twd orders -o jsonpath='{.metadata.generation}')
kubectl wait twd/orders --for=jsonpath='{.status.observedGeneration}'="$gen" --timeout=2m
` + snippets[2]); err != nil {
		t.Fatalf("the Manual snippet: %v\n%s", err, out)
	}
	if tv := r.Get().Status.TargetVersion; tv == nil || tv.BuildID != r.BuildID() || tv.Status != v1alpha1.VersionInactive {
		t.Fatalf("after the Manual snippet: %s", describe(r.Get()))
	}
}

// docBlocksAreInExamples: every YAML block of the Flux section of
// docs/cd-tools.md is part of examples/flux/orders.yaml or orders-cel.yaml,
// which this test checks.
func docBlocksAreInExamples(t *testing.T) {
	t.Helper()
	var files []string
	for _, f := range []string{"orders.yaml", "orders-cel.yaml"} {
		raw, err := os.ReadFile(filepath.Join(env.Root, "examples", "flux", f))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, string(raw))
	}
	blocks := docBlocks(t, "\n## Flux\n", "yaml")
	if len(blocks) == 0 {
		t.Fatal("the Flux section of docs/cd-tools.md has no YAML block")
	}
	for _, b := range blocks {
		if !strings.Contains(files[0], b) && !strings.Contains(files[1], b) {
			t.Fatalf("this block of docs/cd-tools.md is in neither examples/flux/orders.yaml nor orders-cel.yaml:\n%s", b)
		}
	}
}

// docBlocks are the code blocks in lang of the docs/cd-tools.md section
// that starts with heading, up to the next section of the same level.
func docBlocks(t *testing.T, heading, lang string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.Root, "docs", "cd-tools.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, heading)
	if start < 0 {
		t.Fatalf("docs/cd-tools.md has no %q", strings.TrimSpace(heading))
	}
	section := doc[start+len(heading):]
	level := strings.TrimSpace(heading)[:strings.Index(strings.TrimSpace(heading), " ")+1]
	if end := strings.Index(section, "\n"+level); end >= 0 {
		section = section[:end]
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(section, -1) {
		out = append(out, m[1])
	}
	return out
}

// kubectlSnippets are the sh blocks of the "## kubectl" section of
// docs/cd-tools.md: apply and wait, stop early when blocked, Manual.
func kubectlSnippets(t *testing.T) []string {
	t.Helper()
	out := docBlocks(t, "\n## kubectl\n", "sh")
	if len(out) != 3 {
		t.Fatalf("the kubectl section has %d sh blocks, this test knows 3: apply and wait, stop early, Manual", len(out))
	}
	return out
}

package migrate

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/admission"
)

// object reads a manifest as the API server would hand it over.
func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return u
}

// A WorkerDeployment as the incumbent stores it: its CRD's defaults
// filled in, its finalizer, status and kubectl's annotation.
const workerDeployment = `
apiVersion: temporal.io/v1alpha1
kind: WorkerDeployment
metadata:
  name: orders
  namespace: shop
  uid: 6f1c1f0e-0000-4000-8000-000000000001
  resourceVersion: "812"
  generation: 4
  finalizers: [temporal.io/delete-protection]
  labels: {team: payments}
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{}'
    owner: payments@example.com
spec:
  replicas: 3
  progressDeadlineSeconds: 600
  workerOptions:
    connectionRef: {name: prod}
    temporalNamespace: orders-prod
    unsafeCustomBuildID: release-42
  rollout:
    strategy: Progressive
    steps:
    - {rampPercentage: 10, pauseDuration: 5m}
    - {rampPercentage: 50, pauseDuration: 10m}
    gate:
      workflowType: Smoke
      input: {region: eu}
  sunset: {scaledownDelay: 1h, deleteDelay: 24h}
  template:
    metadata:
      labels: {app: orders}
    spec:
      containers:
      - name: worker
        image: registry.example.com/orders:v1.2.3
status:
  targetVersion: {buildID: release-42, status: Current}
`

func TestConvertWorkerDeployment(t *testing.T) {
	res, err := Convert(object(t, workerDeployment))
	if err != nil {
		t.Fatal(err)
	}
	twd, ok := res.Object.(*v1alpha1.TemporalWorkerDeployment)
	if !ok {
		t.Fatalf("converted to %T", res.Object)
	}
	if twd.Kind != "TemporalWorkerDeployment" || twd.APIVersion != "temporal.io/v1alpha1" || twd.Name != "orders" || twd.Namespace != "shop" {
		t.Errorf("type and name = %s %s %s/%s", twd.APIVersion, twd.Kind, twd.Namespace, twd.Name)
	}
	if twd.UID != "" || twd.ResourceVersion != "" || len(twd.Finalizers) > 0 || twd.Status.TargetVersion != nil {
		t.Errorf("carried the stored object's identity, finalizers or status: %+v", twd.ObjectMeta)
	}
	if twd.Labels["team"] != "payments" || twd.Annotations["owner"] != "payments@example.com" || len(twd.Annotations) != 1 {
		t.Errorf("labels %v, annotations %v: want the user's only", twd.Labels, twd.Annotations)
	}
	s := twd.Spec
	if s.WorkerOptions.CustomBuildID != "release-42" || s.WorkerOptions.ConnectionRef.Name != "prod" || s.WorkerOptions.TemporalNamespace != "orders-prod" {
		t.Errorf("workerOptions = %+v", s.WorkerOptions)
	}
	if *s.Replicas != 3 || *s.ProgressDeadlineSeconds != 600 || s.Rollout.Strategy != v1alpha1.StrategyProgressive || len(s.Rollout.Steps) != 2 ||
		s.Rollout.Steps[1].PauseDuration.Duration.Minutes() != 10 || s.Rollout.Gate.WorkflowType != "Smoke" ||
		string(s.Rollout.Gate.Input.Raw) != `{"region":"eu"}` || s.Sunset.DeleteDelay.Hours() != 24 {
		t.Errorf("spec not carried over: %+v", s)
	}
	if s.Template.Spec.Containers[0].Image != "registry.example.com/orders:v1.2.3" || s.Template.Labels["app"] != "orders" {
		t.Errorf("template = %+v", s.Template)
	}
	for _, path := range []string{"spec.progressDeadlineSeconds", "spec.workerOptions.unsafeCustomBuildID", "spec.template"} {
		if !hasNote(res.Notes, path) {
			t.Errorf("no note on %s in %v", path, res.Notes)
		}
	}
}

func TestConvertConnection(t *testing.T) {
	cases := map[string]struct {
		spec  string
		want  v1alpha1.TemporalConnectionSpec
		notes []string
	}{
		"mutual TLS with a server name": {
			spec: `{hostPort: "orders.a1b2c.tmprl.cloud:7233", tls: {serverName: orders.a1b2c.tmprl.cloud}, mutualTLSSecretRef: {name: temporal-mtls}}`,
			want: v1alpha1.TemporalConnectionSpec{HostPort: "orders.a1b2c.tmprl.cloud:7233", TLSServerName: "orders.a1b2c.tmprl.cloud",
				MutualTLSSecretRef: &v1alpha1.SecretReference{Name: "temporal-mtls"}},
		},
		"an API key, optional": {
			spec: `{hostPort: "eu-west-1.aws.api.temporal.io:7233", tls: {}, apiKeySecretRef: {name: temporal-key, key: api-key, optional: true}}`,
			want: v1alpha1.TemporalConnectionSpec{HostPort: "eu-west-1.aws.api.temporal.io:7233",
				APIKeySecretRef: &v1alpha1.SecretKeyReference{Name: "temporal-key", Key: "api-key"}},
			notes: []string{"spec.apiKeySecretRef.optional"},
		},
		"plaintext": {
			spec: `{hostPort: "temporal-frontend.temporal:7233"}`,
			want: v1alpha1.TemporalConnectionSpec{HostPort: "temporal-frontend.temporal:7233"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			res, err := Convert(object(t, "{apiVersion: temporal.io/v1alpha1, kind: Connection, metadata: {name: prod, namespace: shop}, spec: "+c.spec+"}"))
			if err != nil {
				t.Fatal(err)
			}
			conn := res.Object.(*v1alpha1.TemporalConnection)
			got, _ := json.Marshal(conn.Spec)
			want, _ := json.Marshal(c.want)
			if string(got) != string(want) || conn.Kind != "TemporalConnection" || conn.Name != "prod" {
				t.Errorf("%s %s: spec %s, want %s", conn.Kind, conn.Name, got, want)
			}
			if len(res.Notes) != len(c.notes) {
				t.Errorf("notes %v, want on %v", res.Notes, c.notes)
			}
			for _, n := range c.notes {
				if !hasNote(res.Notes, n) {
					t.Errorf("no note on %s in %v", n, res.Notes)
				}
			}
		})
	}
}

// The incumbent's own form of a per-version HPA: the deprecated reference
// field, the {} sentinel, and a user's label in an external metric selector.
const workerResourceTemplate = `
apiVersion: temporal.io/v1alpha1
kind: WorkerResourceTemplate
metadata: {name: orders-hpa, namespace: shop}
spec:
  temporalWorkerDeploymentRef: {name: orders}
  template:
    apiVersion: autoscaling/v2
    kind: HorizontalPodAutoscaler
    spec:
      scaleTargetRef: {}
      minReplicas: 1
      maxReplicas: 10
      metrics:
      - type: Resource
        resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
      - type: External
        external:
          metric:
            name: temporal_slot_utilization
            selector:
              matchLabels: {worker_type: ActivityWorker}
          target: {type: Value, value: 750m}
`

func TestConvertWorkerResourceTemplate(t *testing.T) {
	res, err := Convert(object(t, workerResourceTemplate))
	if err != nil {
		t.Fatal(err)
	}
	twor := res.Object.(*v1alpha1.TemporalWorkerOwnedResource)
	if twor.Kind != "TemporalWorkerOwnedResource" || twor.Name != "orders-hpa" || twor.Spec.WorkerRef.Name != "orders" {
		t.Errorf("%s %s, workerRef %q", twor.Kind, twor.Name, twor.Spec.WorkerRef.Name)
	}
	var obj map[string]any
	if err := json.Unmarshal(twor.Spec.Object.Raw, &obj); err != nil {
		t.Fatal(err)
	}
	if ref, _ := get(obj, "spec.scaleTargetRef"); ref == nil || len(asMap(ref)) != 0 {
		t.Errorf("scaleTargetRef = %v, want the {} sentinel kept", ref)
	}
	if !hasNote(res.Notes, "spec.template.spec.metrics[1].external.metric.selector.matchLabels") || hasNote(res.Notes, "spec.template.spec.metrics[0]") {
		t.Errorf("notes %v: want one on the external metric's selector only", res.Notes)
	}
	// The labels the worker controller added to the selector are written
	// out, next to the user's, and pass Rainbow's admission rules.
	labels, _ := get(obj, "spec.metrics")
	got := asMap(asMap(asMap(asMap(labels.([]any)[1])["external"])["metric"])["selector"])["matchLabels"]
	want := map[string]any{"worker_type": "ActivityWorker", "temporal_worker_deployment_name": "shop_orders",
		"temporal_worker_build_id": "{{ .BuildID }}", "temporal_namespace": "{{ .TemporalNamespace }}"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("matchLabels = %v, want %v", got, want)
	}
	if errs := admission.Validate(twor, nil, admission.DefaultBannedKinds); len(errs) > 0 {
		t.Errorf("the converted object is refused: %v", errs)
	}
	// {} there meant the worker controller's labels alone; in Rainbow it
	// would mean the version's pod labels, so it is written out too.
	res, err = Convert(object(t, strings.Replace(workerResourceTemplate, "matchLabels: {worker_type: ActivityWorker}", "matchLabels: {}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(res.Object.(*v1alpha1.TemporalWorkerOwnedResource).Spec.Object.Raw, &obj)
	labels, _ = get(obj, "spec.metrics")
	if got := asMap(asMap(asMap(asMap(labels.([]any)[1])["external"])["metric"])["selector"])["matchLabels"]; len(asMap(got)) != 3 {
		t.Errorf("matchLabels {} became %v, want the three metric labels", got)
	}
	// The newer reference field converts the same way.
	res, err = Convert(object(t, strings.Replace(workerResourceTemplate, "temporalWorkerDeploymentRef", "workerDeploymentRef", 1)))
	if err != nil || res.Object.(*v1alpha1.TemporalWorkerOwnedResource).Spec.WorkerRef.Name != "orders" {
		t.Errorf("workerDeploymentRef: %v, %v", err, res.Object)
	}
}

func TestConvertRefuses(t *testing.T) {
	cases := map[string]struct {
		manifest string
		want     string
	}{
		"another API version": {
			manifest: "{apiVersion: temporal.io/v1beta1, kind: Connection, metadata: {name: a}, spec: {hostPort: 'a:1'}}",
			want:     `apiVersion "temporal.io/v1beta1"`,
		},
		"a kind the worker controller does not have": {
			manifest: "{apiVersion: temporal.io/v1alpha1, kind: TemporalWorkerDeployment, metadata: {name: a}, spec: {}}",
			want:     "not a kind of the worker controller's",
		},
		"a field Rainbow has no counterpart for": {
			manifest: "{apiVersion: temporal.io/v1alpha1, kind: Connection, metadata: {name: a}, spec: {hostPort: 'a:1', proxy: {url: 'http://p'}}}",
			want:     `unknown field "proxy"`,
		},
		"both worker references": {
			manifest: strings.Replace(workerResourceTemplate, "  temporalWorkerDeploymentRef: {name: orders}", "  temporalWorkerDeploymentRef: {name: orders}\n  workerDeploymentRef: {name: orders}", 1),
			want:     "spec.temporalWorkerDeploymentRef and spec.workerDeploymentRef are both set",
		},
		"a gate input that is no object": {
			manifest: strings.Replace(workerDeployment, "input: {region: eu}", "input: [1, 2]", 1),
			want:     "spec.rollout.gate.input is []interface {}",
		},
		"no spec": {
			manifest: "{apiVersion: temporal.io/v1alpha1, kind: Connection, metadata: {name: a}}",
			want:     "no spec",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Convert(object(t, c.manifest))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// Converting never changes the object it was given: the command prints a
// dry run from the same objects it later converts.
func TestConvertLeavesItsInputAlone(t *testing.T) {
	for _, m := range []string{workerDeployment, workerResourceTemplate} {
		u := object(t, m)
		before, _ := u.MarshalJSON()
		if _, err := Convert(u); err != nil {
			t.Fatal(err)
		}
		after, _ := u.MarshalJSON()
		if string(before) != string(after) {
			t.Errorf("input changed:\n%s\n%s", before, after)
		}
	}
}

func hasNote(notes []Note, path string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n.Path, path) {
			return true
		}
	}
	return false
}

package workload

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/workerenv"
)

func twd() *v1alpha1.TemporalWorkerDeployment {
	return &v1alpha1.TemporalWorkerDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", UID: "uid-1"},
		Spec: v1alpha1.TemporalWorkerDeploymentSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "orders"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "worker", Image: "orders:v1",
					Env: []corev1.EnvVar{{Name: "LOG", Value: "info"}, {Name: workerenv.Address, Value: "user-set:1"}},
				}}},
			},
		},
	}
}

var id = Identity{TemporalNamespace: "prod", DeploymentName: "shop/orders", BuildID: "v1-abc"}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestNewDeployment(t *testing.T) {
	d := NewDeployment(twd(), id, Connection{Address: "temporal:7233"}, ptr.To[int32](3))
	if d.Name != "orders-v1-abc" || d.Namespace != "shop" {
		t.Errorf("name = %s/%s", d.Namespace, d.Name)
	}
	if *d.Spec.Replicas != 3 || d.Spec.Selector.MatchLabels[LabelBuildID] != "v1-abc" {
		t.Errorf("spec = %+v", d.Spec)
	}
	if d.Spec.Template.Labels["app"] != "orders" || d.Spec.Template.Labels[LabelWorker] != "orders" {
		t.Errorf("template labels = %v", d.Spec.Template.Labels)
	}
	ref := d.OwnerReferences[0]
	if ref.UID != "uid-1" || !*ref.Controller || ref.Kind != "TemporalWorkerDeployment" {
		t.Errorf("owner = %+v", ref)
	}
	env := envOf(d.Spec.Template.Spec.Containers[0])
	want := map[string]string{workerenv.Address: "temporal:7233", workerenv.Namespace: "prod", workerenv.DeploymentName: "shop/orders", workerenv.BuildID: "v1-abc", "LOG": "info"}
	for k, v := range want {
		if env[k].Value != v {
			t.Errorf("env %s = %q, want %q", k, env[k].Value, v)
		}
	}
	if len(d.Spec.Template.Spec.Containers[0].Env) != 5 {
		t.Errorf("env has duplicates: %v", d.Spec.Template.Spec.Containers[0].Env)
	}
	if d.Spec.Template.Annotations[AnnotationConnectionHash] == "" {
		t.Error("no connection hash annotation")
	}
}

func TestNewDeploymentLeavesTWDUntouched(t *testing.T) {
	in := twd()
	before := in.DeepCopy()
	NewDeployment(in, id, Connection{Address: "a:1", MutualTLSSecret: "tls"}, nil)
	if !equality.Semantic.DeepEqual(in, before) {
		t.Fatal("NewDeployment modified the TWD")
	}
}

func TestApplyConnectionIsIdempotentAndReplaces(t *testing.T) {
	mtls := Connection{Address: "a:1", MutualTLSSecret: "tls", HasCA: true, ServerName: "temporal.example"}
	d := NewDeployment(twd(), id, mtls, nil)
	once := d.Spec.Template.DeepCopy()
	ApplyConnection(&d.Spec.Template, id, mtls)
	if !equality.Semantic.DeepEqual(once, &d.Spec.Template) {
		t.Fatal("applying the same connection twice changed the template")
	}
	c := d.Spec.Template.Spec.Containers[0]
	env := envOf(c)
	if env[workerenv.TLSClientCert].Value != "/etc/temporal/tls/tls.crt" || env[workerenv.TLSServerCA].Value != "/etc/temporal/tls/ca.crt" || env[workerenv.TLSServerName].Value != "temporal.example" {
		t.Errorf("TLS env = %v", c.Env)
	}
	if len(c.VolumeMounts) != 1 || len(d.Spec.Template.Spec.Volumes) != 1 || d.Spec.Template.Spec.Volumes[0].Secret.SecretName != "tls" {
		t.Errorf("volumes = %v mounts = %v", d.Spec.Template.Spec.Volumes, c.VolumeMounts)
	}
	hashMTLS := d.Spec.Template.Annotations[AnnotationConnectionHash]

	// Switching to an API key removes every trace of mTLS.
	apiKey := Connection{Address: "a:1", APIKey: &v1alpha1.SecretKeyReference{Name: "key", Key: "apiKey"}}
	ApplyConnection(&d.Spec.Template, id, apiKey)
	c = d.Spec.Template.Spec.Containers[0]
	env = envOf(c)
	if _, ok := env[workerenv.TLSClientCert]; ok || len(c.VolumeMounts) != 0 || len(d.Spec.Template.Spec.Volumes) != 0 {
		t.Errorf("mTLS left behind: env=%v mounts=%v volumes=%v", c.Env, c.VolumeMounts, d.Spec.Template.Spec.Volumes)
	}
	if ref := env[workerenv.APIKey].ValueFrom; ref == nil || ref.SecretKeyRef.Name != "key" || env[workerenv.TLS].Value != "true" {
		t.Errorf("API key env = %v", c.Env)
	}
	if d.Spec.Template.Annotations[AnnotationConnectionHash] == hashMTLS {
		t.Error("connection hash did not change")
	}

	// An API key Secret with ca.crt mounts only the CA.
	apiKeyCA := apiKey
	apiKeyCA.HasCA = true
	ApplyConnection(&d.Spec.Template, id, apiKeyCA)
	c = d.Spec.Template.Spec.Containers[0]
	env = envOf(c)
	if vols := d.Spec.Template.Spec.Volumes; len(vols) != 1 || vols[0].Secret.SecretName != "key" ||
		len(vols[0].Secret.Items) != 1 || vols[0].Secret.Items[0].Key != "ca.crt" || len(c.VolumeMounts) != 1 {
		t.Errorf("API key CA volume = %v mounts = %v", vols, c.VolumeMounts)
	}
	if env[workerenv.TLSServerCA].Value != "/etc/temporal/tls/ca.crt" || env[workerenv.TLSClientCert].Value != "" {
		t.Errorf("API key CA env = %v", c.Env)
	}
	ApplyConnection(&d.Spec.Template, id, apiKey)

	// Rotated Secret contents change the hash, so pods restart.
	before := d.Spec.Template.Annotations[AnnotationConnectionHash]
	apiKey.CredentialsVersion = "2"
	ApplyConnection(&d.Spec.Template, id, apiKey)
	if d.Spec.Template.Annotations[AnnotationConnectionHash] == before {
		t.Error("credentials rotation did not change the hash")
	}
}

func TestDeploymentName(t *testing.T) {
	long := strings.Repeat("a", 60)
	cases := map[string]struct{ twd, build, want string }{
		// Names that need no sanitising are pinned: existing Deployments
		// keep their names across an upgrade.
		"short":          {"orders", "v1-abc", "orders-v1-abc"},
		"generated-like": {"orders", "v1-0123456789abcdef", "orders-v1-0123456789abcdef"},
		"long, pinned":   {long, "v1-0123456789abcdef", strings.Repeat("a", 36) + "-34f0cf8cba"},
		// Sanitised names carry a hash of the exact build ID.
		"mixed case":     {"orders", "V1.2_x", ""},
		"hashed if long": {long, "V1.0-0123456789abcdef", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := DeploymentName(tc.twd, tc.build)
			if tc.want != "" && got != tc.want {
				t.Errorf("DeploymentName = %q, want %q", got, tc.want)
			}
			if len(got) > 47 || len(validation.IsDNS1123Label(got)) > 0 {
				t.Errorf("invalid name %q (len %d)", got, len(got))
			}
		})
	}
	if DeploymentName(long, "v1") == DeploymentName(long, "v2") {
		t.Error("long names of different builds collide")
	}
}

// TestDeploymentNamesDoNotCollide: build IDs that differ only in what
// sanitising replaces (case, ".", "_") get distinct Deployment names,
// otherwise the second version's Deployment could never be created.
func TestDeploymentNamesDoNotCollide(t *testing.T) {
	groups := [][]string{
		{"v1.0", "v1-0", "v1_0", "V1.0", "V1-0"},
		{"V1", "v1"},
		{"release.2024.1", "release-2024-1", "release_2024.1"},
	}
	for _, twdName := range []string{"orders", "orders.eu", strings.Repeat("w", 50)} {
		for _, builds := range groups {
			seen := map[string]string{}
			for _, b := range builds {
				name := DeploymentName(twdName, b)
				if other, ok := seen[name]; ok {
					t.Errorf("TWD %s: build IDs %q and %q both map to Deployment %s", twdName, other, b, name)
				}
				seen[name] = b
				if len(name) > 47 || len(validation.IsDNS1123Label(name)) > 0 {
					t.Errorf("invalid name %q (len %d)", name, len(name))
				}
			}
		}
	}
}

func TestWorkerLabel(t *testing.T) {
	for _, n := range []string{"orders", strings.Repeat("x", 200)} {
		if errs := validation.IsValidLabelValue(WorkerLabel(n)); len(errs) > 0 {
			t.Errorf("label for %d-char name: %v", len(n), errs)
		}
	}
}

// TestSelectorLabels: owned resources inject SelectorLabels for
// `matchLabels: null`, so they must be what the Deployment selects.
func TestSelectorLabels(t *testing.T) {
	d := NewDeployment(twd(), id, Connection{Address: "temporal:7233"}, nil)
	want := SelectorLabels("orders", "v1-abc")
	if !reflect.DeepEqual(d.Spec.Selector.MatchLabels, want) {
		t.Errorf("selector = %v, want %v", d.Spec.Selector.MatchLabels, want)
	}
	for k, v := range want {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("pod label %s = %q, want %q", k, d.Spec.Template.Labels[k], v)
		}
	}
	long := strings.Repeat("x", 100)
	if got := SelectorLabels(long, "v1")[LabelWorker]; got != WorkerLabel(long) {
		t.Errorf("worker label of a long name = %q", got)
	}
}

// TestInPlaceUpdateMatchesCreation: updating a Deployment to a changed
// template gives the same pod template a new Deployment would get, and
// keeps what belongs to the running Deployment (replicas, selector).
func TestInPlaceUpdateMatchesCreation(t *testing.T) {
	base := twd()
	id := Identity{TemporalNamespace: "default", DeploymentName: "ns/worker", BuildID: "stable"}
	conn := Connection{Address: "temporal:7233"}
	old := NewDeployment(base, id, conn, ptr.To[int32](4))

	changed := base.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "worker:v2"
	changed.Spec.Template.Spec.Containers[0].Env = append(changed.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "LOG_LEVEL", Value: "debug"})
	updated := old.DeepCopy()
	SetTemplate(updated, changed, id, conn)
	fresh := NewDeployment(changed, id, conn, ptr.To[int32](1))

	if !reflect.DeepEqual(updated.Spec.Template, fresh.Spec.Template) {
		t.Fatalf("in-place template differs from a new Deployment's:\n%+v\n%+v", updated.Spec.Template, fresh.Spec.Template)
	}
	if *updated.Spec.Replicas != 4 || !reflect.DeepEqual(updated.Spec.Selector, old.Spec.Selector) {
		t.Fatalf("in-place update changed replicas or selector: %d %+v", *updated.Spec.Replicas, updated.Spec.Selector)
	}
	if updated.Annotations[AnnotationTemplateHash] == old.Annotations[AnnotationTemplateHash] ||
		updated.Annotations[AnnotationTemplateHash] != fresh.Annotations[AnnotationTemplateHash] {
		t.Fatalf("template hash annotation: old %q updated %q fresh %q", old.Annotations[AnnotationTemplateHash],
			updated.Annotations[AnnotationTemplateHash], fresh.Annotations[AnnotationTemplateHash])
	}
	// The hash is of the user's template only: the controller's additions
	// (here a different connection) do not change it.
	other := NewDeployment(changed, id, Connection{Address: "elsewhere:7233"}, nil)
	if other.Annotations[AnnotationTemplateHash] != fresh.Annotations[AnnotationTemplateHash] {
		t.Fatal("the template hash depends on the connection")
	}
}

// TestServerNameAloneMeansTLS: the controller dials with TLS when only a
// server name is set, so the workers must too.
func TestServerNameAloneMeansTLS(t *testing.T) {
	d := NewDeployment(twd(), Identity{BuildID: "b"}, Connection{Address: "t:7233", ServerName: "temporal.example"}, nil)
	env := envOf(d.Spec.Template.Spec.Containers[0])
	if env[workerenv.TLS].Value != "true" || env[workerenv.TLSServerName].Value != "temporal.example" {
		t.Fatalf("env = %v", env)
	}
}

// TestInjectedEnvComesFirst: user variables may refer to injected ones
// with $(NAME), which Kubernetes only expands for earlier variables.
func TestInjectedEnvComesFirst(t *testing.T) {
	base := twd()
	c := &base.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: "TARGET", Value: "$(TEMPORAL_ADDRESS)"})
	d := NewDeployment(base, Identity{BuildID: "b"}, Connection{Address: "t:7233"}, nil)
	got := d.Spec.Template.Spec.Containers[0].Env
	addr, target := -1, -1
	for i, e := range got {
		switch e.Name {
		case workerenv.Address:
			addr = i
		case "TARGET":
			target = i
		}
	}
	if addr < 0 || target < addr {
		t.Fatalf("TEMPORAL_ADDRESS at %d, TARGET at %d: %v", addr, target, got)
	}
}

// TestTemplateRolling: only a template change the controller made counts
// as a rollout until the Deployment controller has seen it; a scale does
// not, and old pods always do.
func TestTemplateRolling(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas = 4, 2, 2
	scaled := d.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](3)
	MarkTemplateChange(d, scaled)
	scaled.Generation = 5
	if TemplateRolling(scaled) {
		t.Errorf("a scale the Deployment controller has not seen yet counts as rolling: %v", scaled.Annotations)
	}
	changed := d.DeepCopy()
	changed.Spec.Template.Spec.Containers = []corev1.Container{{Name: "worker", Image: "v2"}}
	MarkTemplateChange(d, changed)
	changed.Generation = 5
	if !TemplateRolling(changed) {
		t.Errorf("an unobserved template change does not count as rolling: %v", changed.Annotations)
	}
	changed.Status.ObservedGeneration = 5
	if TemplateRolling(changed) {
		t.Error("an observed template change with every pod updated still counts as rolling")
	}
	changed.Status.UpdatedReplicas = 1
	if !TemplateRolling(changed) {
		t.Error("old pods remain, yet not rolling")
	}
}

// TestDeploymentSettings: the strategy and deploymentMetadata reach the
// Deployment object, a later spec's change is reported as a settings
// change that restarts nothing, and keys it drops are removed, while
// anyone else's keys and the controller's stay.
func TestDeploymentSettings(t *testing.T) {
	spec := twd()
	one := intstr.FromInt32(1)
	zero := intstr.FromString("0%")
	spec.Spec.Rollout.DeploymentStrategy = &v1alpha1.DeploymentStrategy{MaxSurge: &one, MaxUnavailable: &zero}
	spec.Spec.DeploymentMetadata = v1alpha1.DeploymentMetadata{
		Labels: map[string]string{"team": "payments", "tier": "1"}, Annotations: map[string]string{"owner": "alice"},
	}
	d := NewDeployment(spec, id, Connection{Address: "t:7233"}, nil)
	if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || *ru.MaxSurge != one || *ru.MaxUnavailable != zero {
		t.Errorf("strategy = %+v", d.Spec.Strategy)
	}
	if d.Labels["team"] != "payments" || d.Labels[LabelBuildID] != id.BuildID || d.Annotations["owner"] != "alice" || d.Spec.Template.Labels["team"] != "" {
		t.Errorf("labels %v, annotations %v, pod labels %v", d.Labels, d.Annotations, d.Spec.Template.Labels)
	}
	if _, changed := Sync(d.DeepCopy(), spec, id, Connection{Address: "t:7233"}, ""); changed {
		t.Error("an up-to-date Deployment is reported changed")
	}

	d.Labels["someone-else"] = "x"
	next := spec.DeepCopy()
	next.Spec.Rollout.DeploymentStrategy = nil
	next.Spec.DeploymentMetadata = v1alpha1.DeploymentMetadata{Labels: map[string]string{"team": "billing"}}
	template := d.Spec.Template.DeepCopy()
	conn, changed := Sync(d, next, id, Connection{Address: "t:7233"}, "")
	if conn || !changed {
		t.Fatalf("connection changed %v, settings changed %v: want only settings", conn, changed)
	}
	if !equality.Semantic.DeepEqual(*template, d.Spec.Template) {
		t.Error("a settings change touched the pod template")
	}
	if d.Labels["team"] != "billing" || d.Labels["tier"] != "" || d.Annotations["owner"] != "" || d.Labels["someone-else"] != "x" || d.Labels[LabelWorker] == "" {
		t.Errorf("labels %v, annotations %v: want team=billing, tier and owner gone, others kept", d.Labels, d.Annotations)
	}
	if ru := d.Spec.Strategy.RollingUpdate; ru.MaxSurge.String() != "25%" || ru.MaxUnavailable.String() != "25%" {
		t.Errorf("strategy without spec = %+v, want Kubernetes' defaults", ru)
	}
}

// incumbentDeployment is a Deployment as Temporal's worker controller makes
// it: its own selector label, its injections after the user's env.
func incumbentDeployment() *appsv1.Deployment {
	selector := map[string]string{"temporal.io/deployment-name": "orders", LabelBuildID: "v1-b7c4"}
	tpl := twd().Spec.Template.DeepCopy()
	tpl.Labels = merge(tpl.Labels, selector)
	tpl.Spec.Containers[0].Env = append(tpl.Spec.Containers[0].Env, corev1.EnvVar{Name: workerenv.Address, Value: "temporal:7233"})
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "orders-v1-b7c4", Annotations: map[string]string{v1alpha1.AnnotationAdoptedFrom: v1alpha1.IncumbentName}},
		Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: *tpl},
	}
}

// TestSyncLeavesAnAdoptedTemplate: rewriting the incumbent's injections in
// our order and form would restart every adopted worker for nothing.
func TestSyncLeavesAnAdoptedTemplate(t *testing.T) {
	d := incumbentDeployment()
	before := d.Spec.Template.DeepCopy()
	w := twd()
	w.Spec.MinReadySeconds = 7
	conn, settings := Sync(d, w, id, Connection{Address: "temporal:7233"}, "ns-id")
	if conn || !equality.Semantic.DeepEqual(*before, d.Spec.Template) {
		t.Errorf("Sync changed an adopted pod template (connection changed %v):\n%+v\n%+v", conn, *before, d.Spec.Template)
	}
	if !settings || d.Spec.MinReadySeconds != 7 || d.Annotations[AnnotationNamespaceID] != "ns-id" {
		t.Errorf("the Deployment's own settings were not synced: changed %v, minReadySeconds %d, annotations %v", settings, d.Spec.MinReadySeconds, d.Annotations)
	}
	// Without the mark the same Deployment is ours and gets our injections.
	delete(d.Annotations, v1alpha1.AnnotationAdoptedFrom)
	if conn, _ := Sync(d, w, id, Connection{Address: "temporal:7233"}, ""); !conn {
		t.Error("a Deployment that is not adopted kept a template without our connection hash")
	}
}

// TestInPlaceUpdateKeepsAnAdoptedSelector: a custom build ID's in-place
// update of an adopted Deployment keeps the pod labels its selector needs,
// or the API server would refuse the update.
func TestInPlaceUpdateKeepsAnAdoptedSelector(t *testing.T) {
	d := incumbentDeployment()
	SetTemplate(d, twd(), id, Connection{Address: "temporal:7233"})
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("template labels %v do not match the kept selector %v", d.Spec.Template.Labels, d.Spec.Selector.MatchLabels)
	}
}

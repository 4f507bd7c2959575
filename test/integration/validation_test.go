package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

func validTWD(ns, name string) *v1.TemporalWorkerDeployment {
	return &v1.TemporalWorkerDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.TemporalWorkerDeploymentSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "worker", Image: "demo-worker:v1"}}}},
			WorkerOptions: v1.WorkerOptions{
				ConnectionRef:     v1.ConnectionReference{Name: "local"},
				TemporalNamespace: "default",
			},
		},
	}
}

func step(pct int32, pause time.Duration) v1.RolloutStep {
	return v1.RolloutStep{RampPercentage: pct, PauseDuration: metav1.Duration{Duration: pause}}
}

// TestAdmissionRejectsInvalidSpecs sends invalid objects to the real API
// server and checks each is refused with a message naming the field.
func TestAdmissionRejectsInvalidSpecs(t *testing.T) {
	tt := env.NewTest(t)
	ctx := context.Background()

	twdCases := map[string]struct {
		name   string
		mutate func(*v1.TemporalWorkerDeployment)
		want   string
	}{
		"progressive without steps": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.Rollout.Strategy = v1.StrategyProgressive
		}, want: "rollout.steps is required when rollout.strategy is Progressive"},
		"decreasing steps": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.Rollout = v1.RolloutSpec{Strategy: v1.StrategyProgressive, Steps: []v1.RolloutStep{step(50, time.Minute), step(10, time.Minute)}}
		}, want: "rampPercentage must be strictly increasing"},
		"repeated steps": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.Rollout = v1.RolloutSpec{Strategy: v1.StrategyProgressive, Steps: []v1.RolloutStep{step(10, time.Minute), step(10, time.Minute)}}
		}, want: "no repeated values"},
		"ramp of 100": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.Rollout = v1.RolloutSpec{Strategy: v1.StrategyProgressive, Steps: []v1.RolloutStep{step(100, time.Minute)}}
		}, want: "spec.rollout.steps[0].rampPercentage"},
		"unknown strategy": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.Rollout.Strategy = "Canary"
		}, want: "spec.rollout.strategy"},
		"negative replicas": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.Replicas = ptr.To[int32](-1)
		}, want: "spec.replicas"},
		"dot in deployment name": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.WorkerOptions.DeploymentName = "team.worker"
		}, want: "spec.workerOptions.deploymentName"},
		"dot in object name without deployment name": {name: "my.worker", want: "set spec.workerOptions.deploymentName"},
		"custom build ID with a slash": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.WorkerOptions.CustomBuildID = "team/v1"
		}, want: "spec.workerOptions.customBuildID"},
		"custom build ID too long": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.WorkerOptions.CustomBuildID = strings.Repeat("a", 64)
		}, want: "spec.workerOptions.customBuildID"},
		"custom build ID ending in a dash": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.WorkerOptions.CustomBuildID = "v1-"
		}, want: "spec.workerOptions.customBuildID"},
		"maxSurge and maxUnavailable both 0": {mutate: func(d *v1.TemporalWorkerDeployment) {
			zero, none := intstr.FromInt32(0), intstr.FromString("0%")
			d.Spec.Rollout.DeploymentStrategy = &v1.DeploymentStrategy{MaxSurge: &zero, MaxUnavailable: &none}
		}, want: "maxSurge and maxUnavailable cannot both be 0"},
		"maxSurge not a percentage": {mutate: func(d *v1.TemporalWorkerDeployment) {
			bad := intstr.FromString("half")
			d.Spec.Rollout.DeploymentStrategy = &v1.DeploymentStrategy{MaxSurge: &bad}
		}, want: "spec.rollout.deploymentStrategy.maxSurge"},
		"a deployment label under temporal.io/": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.DeploymentMetadata.Labels = map[string]string{"temporal.io/build-id": "x"}
		}, want: "spec.deploymentMetadata.labels: keys under temporal.io/"},
		"a deployment annotation under temporal.io/": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.DeploymentMetadata.Annotations = map[string]string{"temporal.io/scaled-down-at": "x"}
		}, want: "spec.deploymentMetadata.annotations: keys under temporal.io/"},
		"missing temporal namespace": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.WorkerOptions.TemporalNamespace = ""
		}, want: "spec.workerOptions.temporalNamespace"},
		"gate input twice": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.Rollout.Gate = &v1.GateWorkflow{
				WorkflowType: "RolloutGate",
				Input:        &apiextensionsv1.JSON{Raw: []byte(`{"Fail":false}`)},
				InputFrom:    &v1.GateInputSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Key: "k"}},
			}
		}, want: "rollout.gate.input and rollout.gate.inputFrom are mutually exclusive"},
		"a drain action without maxDrainDuration": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.Sunset.DrainAction = v1.DrainCancel
		}, want: "spec.sunset.drainAction needs spec.sunset.maxDrainDuration"},
		"an unknown drain action": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.Sunset.MaxDrainDuration, d.Spec.Sunset.DrainAction = &metav1.Duration{Duration: time.Hour}, "Kill"
		}, want: "spec.sunset.drainAction"},
		"a continue-as-new signal without a name": {mutate: func(d *v1.TemporalWorkerDeployment) {
			d.Spec.Sunset.ContinueAsNewSignal = &v1.ContinueAsNewSignal{}
		}, want: "spec.sunset.continueAsNewSignal.name"},
	}
	for name, tc := range twdCases {
		t.Run(name, func(t *testing.T) {
			objName := tc.name
			if objName == "" {
				objName = "w"
			}
			d := validTWD(tt.Namespace, objName)
			if tc.mutate != nil {
				tc.mutate(d)
			}
			err := env.Kube.Create(ctx, d, crclient.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want rejection mentioning %q, got %v", tc.want, err)
			}
		})
	}

	// A string pauseDuration that is no duration cannot be built with the
	// typed client, so send raw JSON.
	t.Run("bad pause duration", func(t *testing.T) {
		d := validTWD(tt.Namespace, "w")
		d.Spec.Rollout = v1.RolloutSpec{Strategy: v1.StrategyProgressive, Steps: []v1.RolloutStep{step(10, time.Minute)}}
		d.APIVersion, d.Kind = v1.GroupVersion.String(), "TemporalWorkerDeployment"
		raw, _ := json.Marshal(d)
		raw = []byte(strings.Replace(string(raw), `"pauseDuration":"1m0s"`, `"pauseDuration":"soon"`, 1))
		err := env.Kube.Patch(ctx, d, crclient.RawPatch("application/apply-patch+yaml", raw), crclient.FieldOwner("test"), crclient.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "spec.rollout.steps[0].pauseDuration") {
			t.Fatalf("want rejection naming spec.rollout.steps[0].pauseDuration, got %v", err)
		}
	})

	t.Run("valid spec gets defaults", func(t *testing.T) {
		d := validTWD(tt.Namespace, "ok")
		if err := env.Kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		if d.Spec.Rollout.Strategy != v1.StrategyAllAtOnce {
			t.Errorf("default strategy = %q, want AllAtOnce", d.Spec.Rollout.Strategy)
		}
		if d.Spec.Sunset.ScaledownDelay == nil || d.Spec.Sunset.ScaledownDelay.Duration != time.Hour ||
			d.Spec.Sunset.DeleteDelay == nil || d.Spec.Sunset.DeleteDelay.Duration != 24*time.Hour {
			t.Errorf("sunset defaults = %+v, want 1h and 24h", d.Spec.Sunset)
		}
	})

	t.Run("worker deployment identity is immutable", func(t *testing.T) {
		d := validTWD(tt.Namespace, "fixed")
		if err := env.Kube.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		for field, mutate := range map[string]func(*v1.TemporalWorkerDeployment){
			"spec.workerOptions.temporalNamespace": func(d *v1.TemporalWorkerDeployment) { d.Spec.WorkerOptions.TemporalNamespace = "other" },
			"spec.workerOptions.deploymentName":    func(d *v1.TemporalWorkerDeployment) { d.Spec.WorkerOptions.DeploymentName = "renamed" },
		} {
			// A patch without a resource version: the controller may have
			// added its finalizer since the create.
			changed := d.DeepCopy()
			mutate(changed)
			err := env.Kube.Patch(ctx, changed, crclient.MergeFrom(d), crclient.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), field+" is immutable") {
				t.Errorf("changing %s: want rejection naming it, got %v", field, err)
			}
		}
	})

	connCases := map[string]struct {
		spec v1.TemporalConnectionSpec
		want string
	}{
		"host without port": {spec: v1.TemporalConnectionSpec{HostPort: "temporal"}, want: "spec.hostPort"},
		"both auth methods": {spec: v1.TemporalConnectionSpec{
			HostPort:           "temporal:7233",
			MutualTLSSecretRef: &v1.SecretReference{Name: "tls"},
			APIKeySecretRef:    &v1.SecretKeyReference{Name: "key", Key: "apiKey"},
		}, want: "mutualTLSSecretRef and apiKeySecretRef are mutually exclusive"},
	}
	for name, tc := range connCases {
		t.Run("connection/"+name, func(t *testing.T) {
			c := &v1.TemporalConnection{ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: "c"}, Spec: tc.spec}
			err := env.Kube.Create(ctx, c, crclient.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want rejection mentioning %q, got %v", tc.want, err)
			}
		})
	}
	t.Run("connection/valid", func(t *testing.T) {
		for _, hp := range []string{"temporal.example.com:7233", "127.0.0.1:7233", "[::1]:7233"} {
			c := &v1.TemporalConnection{ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: "c"}, Spec: v1.TemporalConnectionSpec{HostPort: hp}}
			if err := env.Kube.Create(ctx, c, crclient.DryRunAll); err != nil {
				t.Errorf("hostPort %s rejected: %v", hp, err)
			}
		}
	})
}

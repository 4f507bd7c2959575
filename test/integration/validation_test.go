package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestValidSpecs: valid objects are admitted and defaulted. The invalid
// ones are the rows of TestAdmissionTable.
func TestValidSpecs(t *testing.T) {
	parallel(t)
	tt := env.NewTest(t)
	ctx := context.Background()

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

	t.Run("connection/valid", func(t *testing.T) {
		for _, hp := range []string{"temporal.example.com:7233", "127.0.0.1:7233", "[::1]:7233", "temporal:1", "temporal:65535"} {
			c := &v1.TemporalConnection{ObjectMeta: metav1.ObjectMeta{Namespace: tt.Namespace, Name: "c"}, Spec: v1.TemporalConnectionSpec{HostPort: hp}}
			if err := env.Kube.Create(ctx, c, crclient.DryRunAll); err != nil {
				t.Errorf("hostPort %s rejected: %v", hp, err)
			}
		}
	})
}

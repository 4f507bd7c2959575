package controlplane

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

func kubeBinDir(t *testing.T) string {
	dir, _ := os.Getwd()
	for ; dir != "/"; dir = filepath.Dir(dir) {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(data), "module github.com/rainbow-deploy/rainbow\n") {
			return filepath.Join(dir, ".cache", "kube")
		}
	}
	t.Fatal("repository root not found")
	return ""
}

// TestControllersRun starts the control plane and checks that the
// Deployment and garbage collector controllers really work.
func TestControllersRun(t *testing.T) {
	ctx := context.Background()
	cp, err := Start(ctx, Config{Dir: t.TempDir(), BinDir: kubeBinDir(t), Progress: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	c := kubernetes.NewForConfigOrDie(cp.RESTConfig())

	labels := map[string]string{"app": "x"}
	dep, err := c.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "a ReplicaSet and 2 pods for the Deployment", func() bool {
		pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
		return err == nil && len(pods.Items) == 2
	})
	if err := c.AppsV1().Deployments("default").Delete(ctx, dep.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}); err != nil {
		t.Fatal(err)
	}
	poll(t, "the garbage collector to delete the ReplicaSet and pods", func() bool {
		rs, err := c.AppsV1().ReplicaSets("default").List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
		if err != nil || len(rs.Items) > 0 {
			return false
		}
		pods, err := c.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
		// Pods on no node have nothing to wait for; they go at once.
		return err == nil && len(pods.Items) == 0
	})
	if _, err := c.AppsV1().Deployments("default").Get(ctx, "x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("deployment still there: %v", err)
	}
}

// TestPortInUse checks the error names the flag to change.
func TestPortInUse(t *testing.T) {
	_, err := Start(context.Background(), Config{Dir: t.TempDir(), BinDir: kubeBinDir(t), APIServerPort: mustListen(t)})
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "--apiserver-port") {
		t.Fatalf("want a port-in-use error naming --apiserver-port, got %v", err)
	}
}

func poll(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

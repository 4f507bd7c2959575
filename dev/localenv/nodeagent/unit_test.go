package nodeagent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

func fakeClient() kubernetes.Interface { return fake.NewClientset() }

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "$(A)"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"plain":         "plain",
		"$(A)":          "x",
		"pre-$(A)-$(A)": "pre-x-x",
		"$(B)":          "$(A)", // no recursive expansion
		"$(MISSING)":    "$(MISSING)",
		"$$(A)":         "$(A)",
		"$$":            "$",
		"$(A":           "$(A",
		"a$b":           "a$b",
		"end$":          "end$",
		"$()":           "$()",
	} {
		if got := expand(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestImageShortName(t *testing.T) {
	for in, want := range map[string]string{
		"demo-worker":    "demo-worker",
		"demo-worker:v2": "demo-worker",
		"registry.example/rainbow/demo-worker:v2":   "demo-worker",
		"localhost:5000/demo-worker":                "demo-worker",
		"localhost:5000/a/demo-worker:v1@sha256:ab": "demo-worker",
		"demo-worker@sha256:abcdef":                 "demo-worker",
	} {
		if got := imageShortName(in); got != want {
			t.Errorf("imageShortName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseProgramFlag(t *testing.T) {
	img, p, err := ParseProgramFlag("demo-worker=/abs/path")
	if err != nil || img != "demo-worker" || p != "/abs/path" {
		t.Fatalf("got (%q, %q, %v), want (demo-worker, /abs/path, nil)", img, p, err)
	}
	_, p, err = ParseProgramFlag("x=bin/x")
	if err != nil || !filepath.IsAbs(p) || !strings.HasSuffix(p, "/bin/x") {
		t.Fatalf("relative path: got (%q, %v), want an absolute path ending in /bin/x", p, err)
	}
	for _, bad := range []string{"", "demo-worker", "=/x", "x=", "  =  "} {
		if _, _, err := ParseProgramFlag(bad); err == nil {
			t.Errorf("ParseProgramFlag(%q): want error, got nil", bad)
		}
	}
}

func TestResolveProgram(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "hello")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "noexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := New(fakeClient(), Config{RootDir: dir, SearchPath: []string{dir},
		Programs: map[string]string{"sh": "/bin/sh", "reg/full:v1": exe}})
	if err != nil {
		t.Fatal(err)
	}
	for image, want := range map[string]string{
		"example.com/x/sh:1": "/bin/sh",
		"reg/full:v1":        exe,
		"other/hello:v3":     exe,
	} {
		if got, err := a.resolveProgram(image); err != nil || got != want {
			t.Errorf("resolveProgram(%q) = %q, %v; want %q", image, got, err, want)
		}
	}
	_, err = a.resolveProgram("r/noexec:1")
	if err == nil || !strings.Contains(err.Error(), `no local program for image "r/noexec:1"`) {
		t.Errorf("non-executable file: got %v, want a no-local-program error", err)
	}
}

func TestMountRewriter(t *testing.T) {
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{
		{Name: "cfg", MountPath: "/etc/app"},
		{Name: "sub", MountPath: "/etc/app/inner/", SubPath: "x"},
		{Name: "skipped", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
	}}
	r := newMountRewriter(c, map[string]string{"cfg": "/h/cfg", "sub": "/h/sub", "skipped": ""}, &envList{})
	for in, want := range map[string]string{
		"/etc/app":         "/h/cfg",
		"/etc/app/":        "/h/cfg",
		"/etc/app/a.yaml":  "/h/cfg/a.yaml",
		"/etc/appx":        "/etc/appx",
		"/etc/app/inner/f": "/h/sub/x/f",
		"/var/run/secrets/kubernetes.io/serviceaccount/token": "/var/run/secrets/kubernetes.io/serviceaccount/token",
		"relative/etc/app": "relative/etc/app",
	} {
		if got := r.path(in); got != want {
			t.Errorf("path(%q) = %q, want %q", in, got, want)
		}
	}
	if got := r.arg("--config=/etc/app/a.yaml"); got != "--config=/h/cfg/a.yaml" {
		t.Errorf("arg rewrite: got %q", got)
	}
	if got := r.arg("name=/etc/app"); got != "name=/etc/app" {
		t.Errorf("non-flag arg must stay: got %q", got)
	}
}

func TestFieldValue(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", UID: "u",
		Labels: map[string]string{"app": "a", "b": "c"}, Annotations: map[string]string{"k": "v"}}}
	for path, want := range map[string]string{
		"metadata.labels['app']":     "a",
		`metadata.annotations["k"]`:  "v",
		"metadata.labels['missing']": "",
		"metadata.labels":            "app=\"a\"\nb=\"c\"",
		"status.podIP":               "198.18.0.7",
		"status.hostIP":              "127.0.0.1",
		"metadata.uid":               "u",
	} {
		if got, err := fieldValue(pod, "198.18.0.7", path); err != nil || got != want {
			t.Errorf("fieldValue(%q) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := fieldValue(pod, "198.18.0.7", "spec.nope"); err == nil {
		t.Error("unsupported path: want error")
	}
}

func TestContainerMounts(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}}},
		{Name: "skipped", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{}}},
	}}}
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{
		{Name: "cert", MountPath: "/etc/certs/"},
		{Name: "scratch", MountPath: "/work", SubPathExpr: "$(POD)"},
		{Name: "scratch", MountPath: "/ro", ReadOnly: true},
		{Name: "host", MountPath: "/data"},
		{Name: "skipped", MountPath: "/nfs"},
		{Name: "cert", MountPath: "relative"},
	}}
	dirs := map[string]string{"cert": "/v/cert", "scratch": "/v/scratch", "host": "/data", "skipped": ""}
	env := &envList{}
	env.set("POD", "p1")
	got := fmt.Sprint(containerMounts(pod, c, dirs, env, true))
	want := "[{/v/cert /etc/certs true} {/v/scratch/p1 /work false} {/v/scratch /ro true}]"
	if got != want {
		t.Errorf("mounts = %s\nwant %s (secret volumes read-only, hostPath at its own path and skipped volumes not mounted)", got, want)
	}
	// A container with a root of its own (runc) needs the hostPath mounted.
	got = fmt.Sprint(containerMounts(pod, c, dirs, env, false))
	want = "[{/v/cert /etc/certs true} {/v/scratch/p1 /work false} {/v/scratch /ro true} {/data /data false}]"
	if got != want {
		t.Errorf("mounts in an image's root = %s\nwant %s", got, want)
	}
}

func TestPodHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b"
	for _, tc := range []struct {
		pod  corev1.Pod
		want string
	}{
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}}, "web-1"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Spec: corev1.PodSpec{Hostname: "db"}}, "db"},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: long}}, strings.Repeat("a", 62)},
		{corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "h"}, Spec: corev1.PodSpec{HostNetwork: true}}, ""},
	} {
		if got := podHostname(&tc.pod); got != tc.want {
			t.Errorf("podHostname(%s) = %q, want %q", tc.pod.Name, got, tc.want)
		}
	}
}

func TestServiceEnv(t *testing.T) {
	got := fmt.Sprint(serviceEnv("https://127.0.0.1:6443"))
	want := "[[KUBERNETES_SERVICE_HOST 127.0.0.1] [KUBERNETES_SERVICE_PORT 6443] [KUBERNETES_SERVICE_PORT_HTTPS 6443] " +
		"[KUBERNETES_PORT tcp://127.0.0.1:6443] [KUBERNETES_PORT_6443_TCP tcp://127.0.0.1:6443] [KUBERNETES_PORT_6443_TCP_PROTO tcp] " +
		"[KUBERNETES_PORT_6443_TCP_PORT 6443] [KUBERNETES_PORT_6443_TCP_ADDR 127.0.0.1]]"
	if got != want {
		t.Errorf("serviceEnv = %s\nwant %s", got, want)
	}
	if env := serviceEnv(""); env != nil {
		t.Errorf("no API server: %v, want nothing", env)
	}
}

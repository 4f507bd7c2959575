package nodeagent

import (
	"archive/tar"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// runcImage maps to a layout of an image whose entrypoint is /bin/sh -c;
// its pods mount the host's /usr, where the shell and its libraries are.
const runcImage = "rainbow.test/runc-sh:v1"

// writeShellLayout writes that image: a Debian-like root (bin, lib and
// lib64 pointing into usr), an empty /usr to mount over, /etc and /tmp.
func writeShellLayout(dir string) error {
	data, err := tarLayer([]*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		{Name: "usr/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "bin", Typeflag: tar.TypeSymlink, Linkname: "usr/bin"},
		{Name: "lib", Typeflag: tar.TypeSymlink, Linkname: "usr/lib"},
		{Name: "lib64", Typeflag: tar.TypeSymlink, Linkname: "usr/lib64"},
	})
	if err != nil {
		return err
	}
	return writeTestLayout(dir, data, v1.Config{Entrypoint: []string{"/bin/sh", "-c"}, Env: []string{"FROM_IMAGE=yes"}}, false)
}

func runcPod(ns, name, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "usr", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/usr"}}}},
			Containers: []corev1.Container{{
				Name: "main", Image: runcImage, Args: []string{script},
				VolumeMounts:    []corev1.VolumeMount{{Name: "usr", MountPath: "/usr", ReadOnly: true}},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1234), ReadOnlyRootFilesystem: ptr.To(true)},
			}},
		},
	}
}

// TestImageUnderRunc runs pods of an OCI layout's image under runc through
// the shared agent: user, read-only root, env and logs; SIGTERM on deletion
// through runc kill; exit codes; runc's own failure as StartError;
// runAsNonRoot refused; exec probes run in the container.
func TestImageUnderRunc(t *testing.T) {
	t.Parallel()
	ns := setup(t)
	runc, err := FindRunc("")
	if err != nil {
		t.Fatalf("the OCI runtime cannot run here: %v", err)
	}
	ctx := context.Background()

	createPod(t, runcPod(ns, "graceful", `echo uid=$(id -u) image=$FROM_IMAGE host=$(cat /proc/sys/kernel/hostname)
if (echo x > /tmp/probe) 2>/dev/null; then echo root=rw; else echo root=ro; fi
trap 'echo got-term; exit 0' TERM
while :; do sleep 0.1; done`))
	exit3 := runcPod(ns, "exit3", "exit 3")
	exit3.Spec.RestartPolicy = corev1.RestartPolicyNever
	createPod(t, exit3)
	missing := runcPod(ns, "missing", "")
	missing.Spec.Containers[0].Command = []string{"/no/such/program"}
	missing.Spec.RestartPolicy = corev1.RestartPolicyNever
	createPod(t, missing)
	root := runcPod(ns, "root", "true")
	root.Spec.Containers[0].SecurityContext.RunAsUser = ptr.To[int64](0)
	root.Spec.Containers[0].SecurityContext.RunAsNonRoot = ptr.To(true)
	createPod(t, root)
	// Exec probes run in the container: as its user, with its env.
	probed := runcPod(ns, "probed", "while :; do sleep 0.1; done")
	probed.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
		Command: []string{"/bin/sh", "-c", `test "$(id -u)" = 1234 && test "$FROM_IMAGE" = yes && test "$(cat /proc/1/cmdline | tr '\0' ' ')" = "/bin/sh -c while :; do sleep 0.1; done "`}}}}
	probed.Spec.Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 2, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
		Command: []string{"/bin/sh", "-c", "test ! -e /tmp/unhealthy"}}}}
	probed.Spec.Volumes = append(probed.Spec.Volumes, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	probed.Spec.Containers[0].VolumeMounts = append(probed.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "tmp", MountPath: "/tmp"})
	probed.Spec.TerminationGracePeriodSeconds = ptr.To[int64](1) // sh as pid 1 ignores SIGTERM
	createPod(t, probed)

	p := waitPod(t, ns, "graceful", 30*time.Second, "Ready", isReady)
	id, ok := strings.CutPrefix(mainStatus(p).ContainerID, ContainerIDPrefix)
	if !ok {
		t.Fatalf("containerID = %q, want %s<id>", mainStatus(p).ContainerID, ContainerIDPrefix)
	}
	if out, err := exec.Command(runc, "--root", RuncRoot(sharedRoot), "state", id).Output(); err != nil || !strings.Contains(string(out), `"running"`) {
		t.Errorf("runc state %s: %s %v, want running", id, out, err)
	}
	logPath := filepath.Join(podDir(sharedRoot, p), "main.log")
	eventually(t, 10*time.Second, "the container's first lines in main.log", func() (bool, string) {
		data, _ := os.ReadFile(logPath)
		return strings.Contains(string(data), "root="), string(data)
	})
	if data, _ := os.ReadFile(logPath); !strings.HasPrefix(string(data), "uid=1234 image=yes host=graceful\nroot=ro\n") {
		t.Errorf("main.log = %q, want uid 1234, the image's env, the pod's hostname and a read-only root", data)
	}
	grace := int64(600) // gone within the wait only if SIGTERM reached the shell
	if err := testClient.CoreV1().Pods(ns).Delete(ctx, "graceful", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(t, ns, "graceful", 2*time.Minute)
	if data, _ := os.ReadFile(logPath); !strings.HasSuffix(string(data), "got-term\n") {
		t.Errorf("main.log = %q, want it to end with the shell's got-term", data)
	}
	if out, err := exec.Command(runc, "--root", RuncRoot(sharedRoot), "state", id).CombinedOutput(); err == nil {
		t.Errorf("runc state %s after the pod's deletion: %s, want the container gone", id, out)
	}

	p = waitPod(t, ns, "exit3", 30*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if term := mainStatus(p).State.Terminated; term == nil || term.ExitCode != 3 || term.Reason != "Error" || !strings.HasPrefix(term.ContainerID, ContainerIDPrefix) {
		t.Errorf("exit3: %s, want terminated Error exit 3 with a runc containerID", describePod(p))
	}
	p = waitPod(t, ns, "missing", 30*time.Second, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if term := mainStatus(p).State.Terminated; term == nil || term.Reason != "StartError" || !strings.Contains(term.Message, "/no/such/program") {
		t.Errorf("missing: %s (%+v), want terminated StartError naming /no/such/program", describePod(p), mainStatus(p).State.Terminated)
	}
	p = waitPod(t, ns, "probed", 30*time.Second, "Ready (exec readiness probe in the container)", isReady)
	// The liveness probe fails once the file shows in the container's /tmp,
	// an emptyDir: the container is killed and restarted.
	tmp := filepath.Join(podDir(sharedRoot, p), "volumes", "tmp", "unhealthy")
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "probed", 30*time.Second, "restarted after its exec liveness probe failed", func(p *corev1.Pod) bool {
		return mainStatus(p).RestartCount >= 1
	})
	waitPod(t, ns, "root", 30*time.Second, "waiting CreateContainerConfigError (runAsNonRoot)", func(p *corev1.Pod) bool {
		w := mainStatus(p).State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "runAsNonRoot")
	})
}

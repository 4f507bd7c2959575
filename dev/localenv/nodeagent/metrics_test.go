package nodeagent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statLine is a /proc/<pid>/stat line with the given process group,
// utime, stime and rss (pages); the command name has spaces and a ')'.
func statLine(pid, pgrp, utime, stime, rss string) string {
	return pid + " (demo worker) x) S 1 " + pgrp + " " + pgrp + " 0 -1 4194560 100 0 0 0 " + utime + " " + stime +
		" 0 0 20 0 8 0 12345 1000000 " + rss + " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
}

func writeProc(t *testing.T, dir string, procs map[string]string, cpu string) {
	t.Helper()
	for pid, line := range procs {
		if err := os.MkdirAll(filepath.Join(dir, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pid, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"stat":    "cpu  " + cpu + " 0 100 5000 50 0 0 0 0 0\ncpu0 1 2 3 4\n",
		"meminfo": "MemTotal:       16000 kB\nMemFree:         1000 kB\nMemAvailable:   12000 kB\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProcessMetrics: a container's CPU is the rate of its process group's
// utime+stime between two samples, its memory the group's resident set; a
// restarted container (another pid) starts over.
func TestProcessMetrics(t *testing.T) {
	dir := t.TempDir()
	page := int64(os.Getpagesize())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", UID: "uid"}, Status: corev1.PodStatus{
		ContainerStatuses: []corev1.ContainerStatus{{Name: "worker", ContainerID: "process://100",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	s := &metricsStore{}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// The worker (100) and a child in its group (101); another group (200).
	writeProc(t, dir, map[string]string{
		"100": statLine("100", "100", "100", "50", "1000"), "101": statLine("101", "100", "10", "0", "24"),
		"200": statLine("200", "200", "999", "999", "9"),
	}, "1000")
	s.sample(dir, []*corev1.Pod{pod}, t0)
	if _, ok := s.container("uid", "worker"); ok {
		t.Fatal("a rate after one sample")
	}
	writeProc(t, dir, map[string]string{"100": statLine("100", "100", "300", "100", "2000"), "101": statLine("101", "100", "60", "0", "48")}, "1400")
	s.sample(dir, []*corev1.Pod{pod}, t0.Add(2*time.Second))
	r, ok := s.container("uid", "worker")
	// (300+100+60) - (100+50+10) = 300 ticks = 3s of CPU over 2s.
	if !ok || r.cores != 1.5 || r.memory != 2048*page || r.window != 2*time.Second {
		t.Errorf("rate = %+v, %v; want 1.5 cores and %d bytes over 2s", r, ok, 2048*page)
	}
	n, ok := s.nodeRate()
	if !ok || n.cores != 2 || n.memory != 4000*1024 {
		t.Errorf("node = %+v, %v; want 2 cores (400 busy ticks over 2s) and 4000 KiB in use", n, ok)
	}
	pod.Status.ContainerStatuses[0].ContainerID = "process://101"
	s.sample(dir, []*corev1.Pod{pod}, t0.Add(4*time.Second))
	if _, ok := s.container("uid", "worker"); ok {
		t.Error("a rate across a restart")
	}
}

// TestRuncContainerMetrics: a runc container's usage is its first
// process's group, found through runc.
func TestRuncContainerMetrics(t *testing.T) {
	dir := t.TempDir()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "ns", UID: "uid"}, Status: corev1.PodStatus{
		ContainerStatuses: []corev1.ContainerStatus{{Name: "manager", ContainerID: ContainerIDPrefix + "uid_manager_0",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	s := &metricsStore{runcPid: func(id string) (int, bool) { return 300, id == "uid_manager_0" }}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	writeProc(t, dir, map[string]string{"300": statLine("300", "300", "100", "0", "10")}, "1000")
	s.sample(dir, []*corev1.Pod{pod}, t0)
	writeProc(t, dir, map[string]string{"300": statLine("300", "300", "200", "0", "10")}, "1000")
	s.sample(dir, []*corev1.Pod{pod}, t0.Add(time.Second))
	if r, ok := s.container("uid", "manager"); !ok || r.cores != 1 {
		t.Errorf("rate = %+v, %v; want 1 core (100 ticks over 1s) from pid 300's group", r, ok)
	}
}

func TestParseStat(t *testing.T) {
	pgrp, ticks, rss, ok := parseStat([]byte(statLine("7", "3", "11", "4", "77")))
	if !ok || pgrp != 3 || ticks != 15 || rss != 77 {
		t.Errorf("parseStat = %d %d %d %v", pgrp, ticks, rss, ok)
	}
	if _, _, _, ok := parseStat([]byte("7 (x) S 1")); ok {
		t.Error("a short line parsed")
	}
}

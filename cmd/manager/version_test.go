package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFlag builds the manager as `make bins` does, with a version and
// a revision stamped, and runs it with --version: it prints both and exits 0
// without a cluster.
func TestVersionFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager")
	}
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-test -X main.revision=0123abcd", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--version")
	cmd.Env = []string{"KUBECONFIG=/nonexistent"} // no cluster is needed
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("manager --version: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), "rainbow-manager v9.8.7-test (revision 0123abcd)"; got != want {
		t.Errorf("manager --version printed %q, want %q", got, want)
	}
}

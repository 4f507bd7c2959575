package harness

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// Kubectl runs the kubectl built into .cache/kube against the environment,
// with stdin as its input (may be nil), and returns its standard output.
// The error holds kubectl's standard error.
func (e *Env) Kubectl(stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(e.Root, ".cache", "kube", "kubectl"), append([]string{"--kubeconfig=" + e.Info.Kubeconfig}, args...)...)
	cmd.Dir = e.Root
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

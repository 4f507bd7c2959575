// kubectl-rainbow is the kubectl plugin of Rainbow: kubectl rainbow status,
// list, promote, pause, resume, abort, retry, undo, dashboard
// (docs/kubectl-plugin.md, docs/dashboard.md).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/rainbow-deploy/rainbow/internal/dashboard"
	"github.com/rainbow-deploy/rainbow/internal/kubectlplugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cmd := kubectlplugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, dashboard.NewCommand)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

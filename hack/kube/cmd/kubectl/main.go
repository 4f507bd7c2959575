// Command kubectl is the upstream CLI, built so the tests can drive `kubectl wait`.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	os.Exit(cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()))
}

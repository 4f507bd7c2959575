// Package integration tests the controller and its local environment with
// real parts: kube-apiserver, etcd, kube-controller-manager, the node agent,
// a Temporal server and Temporal SDK workers.
package integration

import (
	"testing"

	"github.com/rainbow-deploy/rainbow/test/harness"
)

var env *harness.Env

func TestMain(m *testing.M) { harness.Main(m, &env) }

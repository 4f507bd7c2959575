package workerdeployment

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// A pass that patches the target's Deployment (its template hash) and
// makes the target current writes Temporal only if the patch did not put
// the pass's observation in doubt. Before, the routing write went ahead
// after a conflict on the very Deployment the pass had read (found while
// writing the stale-plan check of test/chaos TestKubeAPIFaults, which
// guards the same rule on real parts).
func TestFailedKubernetesWriteHoldsTemporalWrites(t *testing.T) {
	deployments := schema.GroupResource{Group: "apps", Resource: "deployments"}
	cases := map[string]struct {
		err  error
		held bool
	}{
		"the patch succeeds: routing goes ahead":                      {nil, false},
		"a conflict: the cache was behind":                            {apierrors.NewConflict(deployments, "orders", errors.New("modified")), true},
		"not found: the cache was behind":                             {apierrors.NewNotFound(deployments, "orders"), true},
		"a timeout: the patch may have happened or not":               {apierrors.NewTimeoutError("injected", 1), true},
		"a 5xx: no clear answer":                                      {apierrors.NewInternalError(errors.New("etcd")), true},
		"a broken connection: no answer":                              {fmt.Errorf("patch: %w", &netTimeout{}), true},
		"forbidden: a clear refusal leaves the observation as it was": {apierrors.NewForbidden(deployments, "orders", errors.New("rbac")), false},
		"invalid: a clear refusal leaves the observation as it was":   {apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "orders", nil), false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			d := f.runningDeployment()
			delete(d.Annotations, workload.AnnotationTemplateHash)
			f.registered(false, enumspb.WORKER_DEPLOYMENT_VERSION_STATUS_INACTIVE)
			f.failKube = func(verb string, o client.Object) error {
				if _, ok := o.(*appsv1.Deployment); ok && verb == "patch" {
					return c.err
				}
				return nil
			}
			kube, tmprl, res := f.reconcile()
			wantKube := []string{"patch Deployment " + d.Name, "patch status TemporalWorkerDeployment orders"}
			if !reflect.DeepEqual(kube, wantKube) {
				t.Fatalf("Kubernetes writes = %q, want %q", kube, wantKube)
			}
			switch {
			case c.held && len(tmprl) != 0:
				t.Errorf("Temporal writes %q from a pass whose observation the failed patch put in doubt", tmprl)
			case c.held && res.RequeueAfter > retryConflict:
				t.Errorf("requeued after %s; a held pass is retried within %s", res.RequeueAfter, retryConflict)
			case !c.held && len(tmprl) == 0:
				t.Errorf("no Temporal write: the target was not made current")
			}
		})
	}
}

// netTimeout is a transport error, as a connection cut mid-request gives.
type netTimeout struct{}

func (*netTimeout) Error() string   { return "read tcp: i/o timeout" }
func (*netTimeout) Timeout() bool   { return true }
func (*netTimeout) Temporary() bool { return true }

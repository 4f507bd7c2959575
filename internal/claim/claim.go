// Package claim finds the TemporalWorkerDeployments that name the same
// Temporal worker deployment: the same Temporal namespace and worker
// deployment name, on the same server. planner.ClaimHolder decides which
// of them holds it; the webhook and the controller both ask here.
package claim

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// Index indexes TemporalWorkerDeployments by Key, across namespaces.
const Index = "rainbow.temporal.io/worker-deployment"

// Key is the Temporal namespace and worker deployment name a TWD names;
// the server is told apart by Rivals, since it is in the connection.
func Key(twd *v1alpha1.TemporalWorkerDeployment) string {
	return twd.Spec.WorkerOptions.TemporalNamespace + "\x00" + twd.WorkerDeploymentName()
}

// IndexKey is the index value of a TemporalWorkerDeployment.
func IndexKey(o client.Object) []string {
	return []string{Key(o.(*v1alpha1.TemporalWorkerDeployment))}
}

// RegisterIndex adds Index to indexer (a manager's field indexer), once
// per manager.
func RegisterIndex(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1alpha1.TemporalWorkerDeployment{}, Index, IndexKey)
}

// Of is twd as a claimant: who the API server says it is, and the address
// of its connection ("" if the connection cannot be read).
func Of(ctx context.Context, r client.Reader, twd *v1alpha1.TemporalWorkerDeployment) (planner.Claimant, error) {
	c := planner.Claimant{Namespace: twd.Namespace, Name: twd.Name, UID: string(twd.UID), Created: twd.CreationTimestamp.Time}
	var conn v1alpha1.TemporalConnection
	err := r.Get(ctx, client.ObjectKey{Namespace: twd.Namespace, Name: twd.Spec.WorkerOptions.ConnectionRef.Name}, &conn)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return c, fmt.Errorf("read TemporalConnection %s/%s: %w", twd.Namespace, twd.Spec.WorkerOptions.ConnectionRef.Name, err)
	default:
		c.Address = strings.TrimSpace(conn.Spec.HostPort)
	}
	return c, nil
}

// Rivals are the other TWDs, in any namespace r sees, that name the same
// Temporal namespace and worker deployment name as twd.
func Rivals(ctx context.Context, r client.Reader, twd *v1alpha1.TemporalWorkerDeployment) ([]planner.Claimant, error) {
	var list v1alpha1.TemporalWorkerDeploymentList
	if err := r.List(ctx, &list, client.MatchingFields{Index: Key(twd)}); err != nil {
		return nil, fmt.Errorf("list TemporalWorkerDeployments naming worker deployment %s: %w", twd.WorkerDeploymentName(), err)
	}
	var out []planner.Claimant
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == twd.UID || (o.Namespace == twd.Namespace && o.Name == twd.Name) {
			continue
		}
		c, err := Of(ctx, r, o)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// Holder is the TWD that holds the worker deployment twd names, nil when
// twd holds it.
func Holder(ctx context.Context, r client.Reader, twd *v1alpha1.TemporalWorkerDeployment) (*planner.Claimant, planner.Claimant, error) {
	self, err := Of(ctx, r, twd)
	if err != nil {
		return nil, self, err
	}
	rivals, err := Rivals(ctx, r, twd)
	if err != nil {
		return nil, self, err
	}
	return planner.ClaimHolder(self, rivals), self, nil
}

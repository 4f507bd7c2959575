package connection

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// Cache index fields, registered once per manager by RegisterIndexes (an
// informer refuses a second index of the same name) and queried with
// client.MatchingFields by any controller.
const (
	// WorkerDeploymentsByConnection indexes TemporalWorkerDeployments by the
	// TemporalConnection they name.
	WorkerDeploymentsByConnection = "rainbow.temporal.io/connection-ref"
	// ConnectionsBySecret indexes TemporalConnections by the Secrets they name.
	ConnectionsBySecret = "rainbow.temporal.io/secret-refs"
)

// RegisterIndexes adds both indexes to indexer (a manager's field indexer).
func RegisterIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &v1alpha1.TemporalWorkerDeployment{}, WorkerDeploymentsByConnection, ConnectionRefOf); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &v1alpha1.TemporalConnection{}, ConnectionsBySecret, SecretRefsOf)
}

// ConnectionRefOf is the index value of a TemporalWorkerDeployment.
func ConnectionRefOf(o client.Object) []string {
	return []string{o.(*v1alpha1.TemporalWorkerDeployment).Spec.WorkerOptions.ConnectionRef.Name}
}

// SecretRefsOf is the index value of a TemporalConnection.
func SecretRefsOf(o client.Object) []string {
	spec := o.(*v1alpha1.TemporalConnection).Spec
	var names []string
	if spec.MutualTLSSecretRef != nil {
		names = append(names, spec.MutualTLSSecretRef.Name)
	}
	if spec.APIKeySecretRef != nil {
		names = append(names, spec.APIKeySecretRef.Name)
	}
	return names
}

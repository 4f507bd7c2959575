// Package connection turns a TemporalConnection and the Secrets it names
// into what the controller dials with and what it injects into workers.
// Both controllers use it, so they agree on what a connection means.
package connection

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// Resolved is a usable connection to one Temporal namespace.
type Resolved struct {
	Object *v1alpha1.TemporalConnection
	// Params dial the controller's own client.
	Params temporal.ConnectionParams
	// Workers is what versioned Deployments get injected.
	Workers workload.Connection
}

// Resolve reads the TemporalConnection name in namespace and its Secrets,
// for a TemporalWorkerDeployment that uses it. A problem that the user must
// fix (missing object or Secret, bad credentials, an address outside
// allowed, a server older than the controller supports) is returned as a
// Problem with a condition reason; err is only for failures to read from
// the API server.
//
// The server's version is the one the connection controller recorded; an
// unknown version (not checked yet) is no problem.
func Resolve(ctx context.Context, c client.Reader, namespace, name, temporalNamespace string, allowed temporal.AllowedHosts, now time.Time) (*Resolved, *planner.Problem, error) {
	var conn v1alpha1.TemporalConnection
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &conn); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &planner.Problem{
				Reason: v1alpha1.ReasonTemporalConnectionNotFound,
				Message: fmt.Sprintf("TemporalConnection %s not found in namespace %s: create it, or fix spec.workerOptions.connectionRef.name",
					name, namespace),
			}, nil
		}
		return nil, nil, fmt.Errorf("get TemporalConnection %s: %w", name, err)
	}
	resolved, prob, err := ResolveObject(ctx, c, &conn, temporalNamespace, allowed, now)
	if resolved == nil {
		return nil, prob, err
	}
	if v := conn.Status.ServerVersion; temporal.ServerTooOld(v) {
		prob := UnsupportedServer(conn.Spec.HostPort, v)
		prob.Message = fmt.Sprintf("TemporalConnection %s: %s", name, prob.Message)
		return nil, prob, nil
	}
	return resolved, nil, nil
}

// UnsupportedServer is the problem of a server older than
// temporal.MinServerVersion, and what to do about it.
func UnsupportedServer(hostPort, version string) *planner.Problem {
	return &planner.Problem{
		Reason: v1alpha1.ReasonUnsupportedServerVersion,
		Message: fmt.Sprintf("Temporal at %s runs server version %s; this controller needs %s or newer (the Worker Deployment API with manager identity). "+
			"Upgrade the Temporal server; until then TemporalWorkerDeployments using this connection route, scale down and delete nothing",
			hostPort, version, temporal.MinServerVersion),
	}
}

// AddressNotAllowed is the problem of a connection whose address is outside
// allowed, and what to do about it; nil if it is allowed.
func AddressNotAllowed(conn *v1alpha1.TemporalConnection, allowed temporal.AllowedHosts) *planner.Problem {
	err := allowed.Check(conn.Spec.HostPort)
	if err == nil {
		return nil
	}
	return &planner.Problem{
		Reason: v1alpha1.ReasonAddressNotAllowed,
		Message: fmt.Sprintf("TemporalConnection %s: spec.hostPort: %v; the controller does not connect to it, and workers are not given it: "+
			"change spec.hostPort to an allowed address, or ask the controller's administrator to allow this one", conn.Name, err),
	}
}

// ResolveObject is Resolve for a connection already read, without the
// server version check: the connection controller, which makes that check,
// uses it to probe the server.
func ResolveObject(ctx context.Context, c client.Reader, conn *v1alpha1.TemporalConnection, temporalNamespace string, allowed temporal.AllowedHosts, now time.Time) (*Resolved, *planner.Problem, error) {
	// Checked before anything else: a connection stored while the webhook
	// was absent must not get its Secrets read, dialled with or handed to
	// workers.
	if prob := AddressNotAllowed(conn, allowed); prob != nil {
		return nil, prob, nil
	}
	// A connection being deleted stays usable: its finalizer holds it
	// until no TemporalWorkerDeployment names it, and their own cleanup
	// needs it.
	var tlsSecret, apiKeySecret *corev1.Secret
	var err error
	if ref := conn.Spec.MutualTLSSecretRef; ref != nil {
		if tlsSecret, err = secret(ctx, c, conn.Namespace, ref.Name); err != nil {
			return nil, nil, err
		}
	}
	if ref := conn.Spec.APIKeySecretRef; ref != nil {
		if apiKeySecret, err = secret(ctx, c, conn.Namespace, ref.Name); err != nil {
			return nil, nil, err
		}
	}
	params, prob := temporal.ParamsFromSecrets(conn.Spec, temporalNamespace, tlsSecret, apiKeySecret, now)
	if prob != nil {
		prob.Message = fmt.Sprintf("TemporalConnection %s: %s", conn.Name, prob.Message)
		return nil, prob, nil
	}
	return &Resolved{
		Object: conn,
		Params: params,
		Workers: workload.Connection{
			Address:         conn.Spec.HostPort,
			MutualTLSSecret: secretName(conn.Spec.MutualTLSSecretRef),
			HasCA:           len(params.CA) > 0,
			APIKey:          conn.Spec.APIKeySecretRef,
			ServerName:      conn.Spec.TLSServerName,
			// Env from Secrets and mounted files are read at pod start:
			// a rotation must roll the pods.
			CredentialsVersion: params.Key()[:16],
		},
	}, nil, nil
}

func secret(ctx context.Context, c client.Reader, namespace, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get Secret %s: %w", name, err)
	}
	return &s, nil
}

func secretName(ref *v1alpha1.SecretReference) string {
	if ref == nil {
		return ""
	}
	return ref.Name
}

package temporalconnection

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/temporal"
)

const (
	// recheckReady: credentials can be revoked and servers move without
	// any Kubernetes event telling us.
	recheckReady = 5 * time.Minute
	// firstRetry and maxRetry bound the wait while not Ready.
	firstRetry = 10 * time.Second
	maxRetry   = 5 * time.Minute
	// maxNamed TemporalWorkerDeployments are named in a blocked deletion.
	maxNamed = 5
)

// recheckAfter is when to probe again. While not Ready the wait is the
// time since Ready turned False (within firstRetry and maxRetry): it
// doubles on each try without a counter, and survives a restart.
func recheckAfter(ready metav1.Condition, now time.Time) time.Duration {
	if ready.Status == metav1.ConditionTrue {
		return recheckReady
	}
	return min(max(now.Sub(ready.LastTransitionTime.Time), firstRetry), maxRetry)
}

func reachableMessage(spec v1alpha1.TemporalConnectionSpec, tls bool, serverVersion string) string {
	msg := fmt.Sprintf("Temporal at %s answered a health check over %s with %s", spec.HostPort, transport(spec, tls), auth(spec))
	if _, ok := temporal.ParseServerVersion(serverVersion); ok {
		return msg + "; server version " + serverVersion
	}
	// Not refused on a guess, but said: the controller needs MinServerVersion.
	return fmt.Sprintf("%s; server version %q is not one the controller can compare with the %s it needs", msg, serverVersion, temporal.MinServerVersion)
}

// unreachableMessage says what failed and which fields to check; which
// ones depends on whether the connection uses TLS.
func unreachableMessage(spec v1alpha1.TemporalConnectionSpec, tls bool, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Temporal at %s did not answer a health check over %s with %s: %v. ", spec.HostPort, transport(spec, tls), auth(spec), err)
	if fix := temporal.Fix(spec, err); fix != "" {
		// The error says what is wrong: name that alone.
		b.WriteString(strings.ToUpper(fix[:1]) + fix[1:])
		return b.String()
	}
	b.WriteString("Check that spec.hostPort is the frontend's gRPC address and that the controller can reach it")
	if !tls {
		b.WriteString("; if the server expects TLS, set spec.tlsServerName, or give credentials with spec.mutualTLSSecretRef or spec.apiKeySecretRef (both turn TLS on)")
		return b.String()
	}
	b.WriteString("; that the server speaks TLS with a certificate for ")
	if spec.TLSServerName != "" {
		fmt.Fprintf(&b, "%q (spec.tlsServerName)", spec.TLSServerName)
	} else {
		b.WriteString("the host of spec.hostPort (or set spec.tlsServerName)")
	}
	if ref := spec.MutualTLSSecretRef; ref != nil {
		fmt.Fprintf(&b, ", signed by ca.crt in Secret %s or a system root; and that the server accepts the client certificate", ref.Name)
	} else if ref := spec.APIKeySecretRef; ref != nil {
		fmt.Fprintf(&b, ", signed by ca.crt in Secret %s or a system root", ref.Name)
	} else {
		b.WriteString(", signed by a system root")
	}
	if ref := spec.APIKeySecretRef; ref != nil {
		fmt.Fprintf(&b, "; and that the API key in Secret %s is valid", ref.Name)
	}
	return b.String()
}

func transport(spec v1alpha1.TemporalConnectionSpec, tls bool) string {
	switch {
	case !tls:
		return "plaintext"
	case spec.TLSServerName != "":
		return fmt.Sprintf("TLS (server name %q)", spec.TLSServerName)
	default:
		return "TLS"
	}
}

func auth(spec v1alpha1.TemporalConnectionSpec) string {
	switch {
	case spec.MutualTLSSecretRef != nil:
		return fmt.Sprintf("the client certificate in Secret %s", spec.MutualTLSSecretRef.Name)
	case spec.APIKeySecretRef != nil:
		return fmt.Sprintf("the API key in Secret %s key %q", spec.APIKeySecretRef.Name, spec.APIKeySecretRef.Key)
	default:
		return "no credentials"
	}
}

// blockedMessage names the TemporalWorkerDeployments that hold a deletion
// (sorted, so that the status only changes when they do) and what to do.
func blockedMessage(conn string, users []string) string {
	slices.Sort(users)
	list := strings.Join(users[:min(len(users), maxNamed)], ", ")
	if more := len(users) - maxNamed; more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("TemporalConnection %s is being deleted, but TemporalWorkerDeployments in this namespace still use it: %s. "+
		"Delete them or point their spec.workerOptions.connectionRef.name at another TemporalConnection; the deletion completes once none is left",
		conn, list)
}

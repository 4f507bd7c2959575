// Package localenv describes a running local environment (control plane,
// node agent and Temporal dev server). The devenv binary writes an Info file
// once everything is ready; tests and the demo read it.
package localenv

import (
	"encoding/json"
	"os"
	"path/filepath"
)

// InfoFile is the name of the file devenv writes into its state directory.
const InfoFile = "env.json"

// Info tells clients where the parts of the environment listen.
type Info struct {
	Dir               string `json:"dir"`
	PID               int    `json:"pid"`
	Kubeconfig        string `json:"kubeconfig"`
	APIServer         string `json:"apiServer"`
	NodeName          string `json:"nodeName"`
	TemporalAddress   string `json:"temporalAddress"`
	TemporalNamespace string `json:"temporalNamespace"`
	TemporalUI        string `json:"temporalUI,omitempty"`
	TemporalMetrics   string `json:"temporalMetrics"`
	// HostIP is an address of this machine that EndpointSlices accept (the
	// node agent's own on the pod network): a Service without a selector
	// can point at a process outside the cluster that listens on it, as the
	// aggregation layer needs. Empty without a pod network.
	HostIP string `json:"hostIP,omitempty"`

	// TemporalTLS is set when Temporal serves TLS (devenv --temporal-tls).
	TemporalTLS *TemporalTLS `json:"temporalTLS,omitempty"`
	// TemporalAPIKey is an API key Temporal accepts, set when it refuses
	// requests without one (devenv --temporal-auth=api-key).
	TemporalAPIKey string `json:"temporalAPIKey,omitempty"`
	// TemporalAuthDir holds the CA's key and the key that signs API keys
	// (dev/localenv/temporalauth.Load), to issue more of either.
	TemporalAuthDir string `json:"temporalAuthDir,omitempty"`
	// TemporalSecrets are the Secrets devenv created in namespace
	// "default", shaped as docs/connections.md asks, for a
	// TemporalConnection there.
	TemporalSecrets *TemporalSecrets `json:"temporalSecrets,omitempty"`
}

// TemporalTLS is how to reach a Temporal frontend that serves TLS.
type TemporalTLS struct {
	// CA signed the server's certificate, PEM; CAFile holds the same.
	CA     string `json:"ca"`
	CAFile string `json:"caFile"`
	// ServerName is a name the server's certificate carries.
	ServerName string `json:"serverName"`
	// ClientAuth: the server requires a client certificate signed by CA.
	ClientAuth bool `json:"clientAuth"`
	// ClientCert and ClientKey are one it accepts, PEM, and their files.
	ClientCert     string `json:"clientCert"`
	ClientKey      string `json:"clientKey"`
	ClientCertFile string `json:"clientCertFile"`
	ClientKeyFile  string `json:"clientKeyFile"`
}

// TemporalSecrets name Secrets in namespace "default".
type TemporalSecrets struct {
	// MutualTLS is a kubernetes.io/tls Secret with tls.crt, tls.key and
	// ca.crt, for spec.mutualTLSSecretRef.
	MutualTLS string `json:"mutualTLS,omitempty"`
	// APIKey holds the API key under APIKeyKey (and the CA under ca.crt),
	// for spec.apiKeySecretRef.
	APIKey    string `json:"apiKey,omitempty"`
	APIKeyKey string `json:"apiKeyKey,omitempty"`
}

// Write stores info atomically in dir, so readers never see half a file.
func (i Info) Write(dir string) error {
	data, err := json.MarshalIndent(i, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, InfoFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, InfoFile))
}

// ReadInfo reads the info file from dir.
func ReadInfo(dir string) (Info, error) {
	var i Info
	data, err := os.ReadFile(filepath.Join(dir, InfoFile))
	if err != nil {
		return i, err
	}
	return i, json.Unmarshal(data, &i)
}

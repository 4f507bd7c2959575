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

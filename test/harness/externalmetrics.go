package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// LocalExternalMetrics is the external metrics API of a manager running on
// this machine (manager.Options.ExternalMetrics): its webhook server listens
// on all addresses at Port, and the API server reaches it through Service,
// a Service without selector in WebhookNamespace whose EndpointSlice names
// the environment's HostIP. The manager's certificate rotation must add
// DNSName to its certificate; it injects its CA into the APIService.
type LocalExternalMetrics struct {
	Service string
	Port    int
}

// DNSName is the name the API server calls the Service by.
func (m LocalExternalMetrics) DNSName() string { return m.Service + "." + WebhookNamespace + ".svc" }

// InstallLocalExternalMetrics applies config/components/external-metrics
// (RBAC, and the APIService pointed at m's Service) with the Service and
// its EndpointSlice. remove deletes the APIService, so that nothing calls
// a stopped manager.
func (e *Env) InstallLocalExternalMetrics(m LocalExternalMetrics) (remove func(), err error) {
	if e.Info.HostIP == "" {
		return nil, errors.New("the environment has no host address (env.json hostIP): the node agent runs without a pod network")
	}
	dir := filepath.Join(e.Root, "config", "components", "external-metrics")
	if _, err := e.Kubectl(nil, "apply", "--server-side", "--field-manager=rainbow-test", "-f", filepath.Join(dir, "rbac.yaml")); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "apiservice.yaml"))
	if err != nil {
		return nil, err
	}
	apiService := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &apiService.Object); err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedField(apiService.Object, m.Service, "spec", "service", "name"); err != nil {
		return nil, err
	}
	items := []any{
		map[string]any{
			"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": m.Service, "namespace": WebhookNamespace},
			"spec": map[string]any{"ports": []any{map[string]any{"name": "https", "port": 443, "targetPort": m.Port}}},
		},
		map[string]any{
			"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
			"metadata": map[string]any{"name": m.Service, "namespace": WebhookNamespace, "labels": map[string]any{
				"kubernetes.io/service-name": m.Service, "endpointslice.kubernetes.io/managed-by": "rainbow-test"}},
			"addressType": "IPv4",
			"endpoints":   []any{map[string]any{"addresses": []any{e.Info.HostIP}, "conditions": map[string]any{"ready": true}}},
			"ports":       []any{map[string]any{"name": "https", "port": m.Port, "protocol": "TCP"}},
		},
		apiService.Object,
	}
	if err := e.applyList(items); err != nil {
		return nil, err
	}
	return func() {
		_, _ = e.Kubectl(nil, "delete", "--ignore-not-found", "apiservice/"+apiService.GetName())
	}, nil
}

// WaitForExternalMetrics waits until the API server reaches the external
// metrics API (its APIService is Available).
func (e *Env) WaitForExternalMetrics(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		out, err := e.Kubectl(nil, "get", "apiservice", "v1beta1.external.metrics.k8s.io",
			"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].message}`)
		if err == nil && len(out) >= 4 && string(out[:4]) == "True" {
			return nil
		}
		last = fmt.Sprintf("%s %v", out, err)
		if time.Now().After(deadline) {
			return fmt.Errorf("the external metrics API is not available after %s: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

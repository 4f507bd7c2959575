package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"
)

// ReadExample decodes a single-object YAML file under examples/ into obj, so
// that tests apply the examples the docs point to.
func (e *Env) ReadExample(t testing.TB, rel string, obj any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.Root, "examples", rel))
	if err != nil {
		t.Fatalf("read example: %v", err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("decode example %s: %v", rel, err)
	}
}

// The ways people write objects with kubectl, for KubectlApply.
var (
	// ClientSideApply is kubectl's default: it drops every null of the
	// manifest, when it creates an object and when it patches one (a JSON
	// merge patch cannot set a null), and keeps the manifest, nulls
	// included, in the kubectl.kubernetes.io/last-applied-configuration
	// annotation.
	ClientSideApply = []string{"apply"}
	// ServerSideApply keeps the manifest's nulls.
	ServerSideApply = []string{"apply", "--server-side", "--field-manager=rainbow-test"}
	// KubectlCreate keeps them too.
	KubectlCreate = []string{"create"}
)

// KubectlApply writes obj with kubectl, as people write what they read in
// examples/, and reads the stored object back into obj. how is one of
// ClientSideApply, ServerSideApply and KubectlCreate. obj goes to kubectl
// as the JSON a manifest would be, without status and the empty
// creationTimestamp of a Go object: a TemporalWorkerOwnedResource's
// spec.object keeps the manifest's nulls up to kubectl (it is raw JSON),
// so what kubectl drops here it drops from the example file too. The
// error holds kubectl's standard error (a webhook's refusal, say).
func (e *Env) KubectlApply(obj crclient.Object, how []string) error {
	gvk, err := apiutil.GVKForObject(obj, e.Scheme)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var manifest map[string]any
	if err := json.Unmarshal(raw, &manifest); err != nil {
		return err
	}
	delete(manifest, "status")
	if meta, ok := manifest["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	if raw, err = json.Marshal(manifest); err != nil {
		return err
	}
	if _, err := e.Kubectl(raw, append(append([]string{}, how...), "-f", "-")...); err != nil {
		return err
	}
	if err := e.Kube.Get(context.Background(), crclient.ObjectKeyFromObject(obj), obj); err != nil {
		return fmt.Errorf("read back %s %s: %w", gvk.Kind, crclient.ObjectKeyFromObject(obj), err)
	}
	return nil
}

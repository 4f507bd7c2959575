package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"

	rainbowv1alpha1 "github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/admission"
)

// WebhookNamespace holds the webhook certificate's Secret.
const WebhookNamespace = "rainbow-system"

// LocalWebhook is the TemporalWorkerOwnedResource webhook of a manager
// running on this machine, as dev/webhook configures it: the API server
// calls https://localhost:Port, and the manager's built-in rotation makes
// the certificate for "localhost", keeps it in a Secret and writes it to
// CertDir.
type LocalWebhook struct {
	// Name of the ValidatingWebhookConfiguration and of the Secret.
	Name    string
	Port    int
	CertDir string
}

// Options are the manager's webhook options for w; the controller's
// identity is left to the caller.
func (w LocalWebhook) Options() *admission.Options {
	return &admission.Options{
		Host: "127.0.0.1", Port: w.Port, CertDir: w.CertDir,
		Rotation: &admission.Rotation{
			Secret:               types.NamespacedName{Namespace: WebhookNamespace, Name: w.Name},
			DNSName:              "localhost",
			WebhookConfiguration: w.Name,
			WriteCertDir:         true,
		},
	}
}

// InstallLocalWebhook applies dev/webhook under w's names and port: the
// ValidatingWebhookConfiguration (caBundle empty until the manager injects
// it) and the empty Secret, which must exist before the manager starts.
// remove deletes both.
func (e *Env) InstallLocalWebhook(w LocalWebhook) (remove func(), err error) {
	out, err := e.Kubectl(nil, "kustomize", "dev/webhook")
	if err != nil {
		return nil, err
	}
	var items []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		switch obj.GetKind() {
		case "Secret":
			obj.SetName(w.Name)
		case "ValidatingWebhookConfiguration":
			obj.SetName(w.Name)
			if err := setWebhookPort(obj, w.Port); err != nil {
				return nil, err
			}
		}
		items = append(items, obj)
	}
	if err := e.applyList(items); err != nil {
		return nil, err
	}
	return func() {
		_, _ = e.Kubectl(nil, "delete", "--ignore-not-found", "validatingwebhookconfiguration/"+w.Name)
		_, _ = e.Kubectl(nil, "delete", "--ignore-not-found", "-n", WebhookNamespace, "secret/"+w.Name)
	}, nil
}

// setWebhookPort points every webhook of a configuration at port.
func setWebhookPort(vwc *unstructured.Unstructured, port int) error {
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	if len(hooks) == 0 {
		return errors.New("dev/webhook: the ValidatingWebhookConfiguration has no webhooks")
	}
	for _, h := range hooks {
		raw, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "url")
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return fmt.Errorf("dev/webhook: clientConfig.url %q is not a URL", raw)
		}
		u.Host = u.Hostname() + ":" + strconv.Itoa(port)
		if err := unstructured.SetNestedField(h.(map[string]any), u.String(), "clientConfig", "url"); err != nil {
			return err
		}
	}
	return unstructured.SetNestedSlice(vwc.Object, hooks, "webhooks")
}

// WaitForWebhook waits until the API server calls the webhook and gets its
// answer: a dry-run TemporalWorkerOwnedResource without a kind is refused
// by the webhook (the schema alone would admit it), not for failing to
// reach it. The probe is made in WebhookNamespace.
func (e *Env) WaitForWebhook(ctx context.Context, timeout time.Duration) error {
	return e.WaitForWebhookIn(ctx, WebhookNamespace, timeout)
}

// WaitForWebhookIn is WaitForWebhook with the probe in namespace ns, for a
// webhook configuration that selects namespaces.
func (e *Env) WaitForWebhookIn(ctx context.Context, ns string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	const want = "spec.object.kind: Required value"
	for {
		probe := &rainbowv1alpha1.TemporalWorkerOwnedResource{
			ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe", Namespace: ns},
			Spec: rainbowv1alpha1.TemporalWorkerOwnedResourceSpec{
				WorkerRef: rainbowv1alpha1.WorkerReference{Name: "probe"},
				Object:    apiextensionsv1.JSON{Raw: []byte(`{"apiVersion":"v1"}`)},
			},
		}
		err := e.Kube.Create(ctx, probe, crclient.DryRunAll)
		if err != nil && strings.Contains(err.Error(), want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the webhook did not answer within %s: a TemporalWorkerOwnedResource without a kind got %v, want a refusal with %q", timeout, err, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// applyList server-side applies objects as one List, as the test field
// manager.
func (e *Env) applyList(items any) error {
	list, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	_, err = e.Kubectl(list, "apply", "--server-side", "--field-manager=rainbow-test", "-f", "-")
	return err
}

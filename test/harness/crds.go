package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// InstallCRDs applies the generated CRDs under config/crd/bases and waits
// until discovery lists them, so REST mappers created afterwards know them.
func (e *Env) InstallCRDs(ctx context.Context) error {
	kube, err := crclient.New(e.REST, crclient.Options{Scheme: e.Scheme})
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(e.Root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in config/crd/bases (run `make generate`): %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		existing := &apiextensionsv1.CustomResourceDefinition{}
		switch err := kube.Get(ctx, crclient.ObjectKeyFromObject(crd), existing); {
		case apierrors.IsNotFound(err):
			err = kube.Create(ctx, crd)
			if err != nil {
				return fmt.Errorf("create CRD %s: %w", crd.Name, err)
			}
		case err != nil:
			return err
		default:
			crd.ResourceVersion = existing.ResourceVersion
			if err := kube.Update(ctx, crd); err != nil {
				return fmt.Errorf("update CRD %s: %w", crd.Name, err)
			}
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := kube.Get(ctx, crclient.ObjectKeyFromObject(crd), got); err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
		for _, v := range crd.Spec.Versions {
			gv := crd.Spec.Group + "/" + v.Name
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				list, err := e.Clients.Discovery().ServerResourcesForGroupVersion(gv)
				if err != nil {
					return false, nil
				}
				for _, r := range list.APIResources {
					if r.Kind == crd.Spec.Names.Kind {
						return true, nil
					}
				}
				return false, nil
			}); err != nil {
				return fmt.Errorf("discovery does not list %s in %s: %w", crd.Spec.Names.Kind, gv, err)
			}
		}
	}
	return e.installAdmissionPolicy(ctx, kube)
}

// installAdmissionPolicy applies config/crd/deletion-policy.yaml, which the
// install ships with the CRDs.
func (e *Env) installAdmissionPolicy(ctx context.Context, kube crclient.Client) error {
	data, err := os.ReadFile(filepath.Join(e.Root, "config", "crd", "deletion-policy.yaml"))
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("config/crd/deletion-policy.yaml: %w", err)
		}
		if obj.Object == nil {
			continue
		}
		if err := kube.Patch(ctx, &obj, crclient.Apply, crclient.FieldOwner("rainbow-test"), crclient.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
}

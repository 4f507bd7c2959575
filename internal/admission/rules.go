package admission

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/ownedresource"
)

// DefaultBannedKinds are the kinds refused in spec.object unless the
// manager is told otherwise; the controller refuses them too.
var DefaultBannedKinds = ownedresource.DefaultBannedKinds

// sentinelFields say what the controller fills in for each version under
// the keys of ownedresource.IsSentinelKey: a user may only mark them with
// null or {} (or leave them out).
var sentinelFields = map[string]string{
	"scaleTargetRef": "the controller sets it to the version's Deployment",
	"matchLabels":    "the controller sets it to the version's pod selector labels",
}

var objectPath = field.NewPath("spec", "object")

// Validate checks a TemporalWorkerOwnedResource against every rule that
// needs no API call. old is the stored object on an update, nil on a
// create. banned lists the refused kinds, compared with any group and
// without regard to case.
func Validate(twor, old *v1alpha1.TemporalWorkerOwnedResource, banned []string) field.ErrorList {
	var errs field.ErrorList
	if old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(twor.Spec.WorkerRef.Name, old.Spec.WorkerRef.Name,
			field.NewPath("spec", "workerRef", "name"))...)
	}
	obj, err := objectOf(twor)
	if err != nil {
		return append(errs, field.Invalid(objectPath, string(twor.Spec.Object.Raw), err.Error()))
	}
	errs = append(errs, validateTypeMeta(obj, banned)...)
	errs = append(errs, validateMetadata(obj)...)
	errs = append(errs, validateMinReplicas(obj)...)
	errs = append(errs, validateSentinels(obj, objectPath, metricSelectors(obj))...)
	errs = append(errs, validateDroppedSentinels(twor, obj)...)
	errs = append(errs, validateBounds(twor, obj)...)
	return errs
}

// ObjectGVK is the group, version and kind spec.object names; ok is false
// when they are missing or malformed (Validate says why).
func ObjectGVK(twor *v1alpha1.TemporalWorkerOwnedResource) (gvk schema.GroupVersionKind, ok bool) {
	obj, err := objectOf(twor)
	if err != nil {
		return gvk, false
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || apiVersion == "" || kind == "" {
		return gvk, false
	}
	return gv.WithKind(kind), true
}

// objectOf decodes spec.object; the schema already requires an object.
func objectOf(twor *v1alpha1.TemporalWorkerOwnedResource) (map[string]any, error) {
	var obj map[string]any
	if err := json.Unmarshal(twor.Spec.Object.Raw, &obj); err != nil {
		return nil, fmt.Errorf("must be a JSON object: %v", err)
	}
	if obj == nil {
		return nil, fmt.Errorf("must be a JSON object")
	}
	return obj, nil
}

func validateTypeMeta(obj map[string]any, banned []string) field.ErrorList {
	var errs field.ErrorList
	apiVersion, err := requiredString(obj, "apiVersion")
	if err != nil {
		errs = append(errs, err)
	} else if _, perr := schema.ParseGroupVersion(apiVersion); perr != nil {
		errs = append(errs, field.Invalid(objectPath.Child("apiVersion"), apiVersion, perr.Error()))
	}
	kind, err := requiredString(obj, "kind")
	if err != nil {
		return append(errs, err)
	}
	gv, _ := schema.ParseGroupVersion(apiVersion)
	if why := ownedresource.BannedKind(schema.GroupKind{Group: gv.Group, Kind: kind}, banned); why != "" {
		errs = append(errs, field.Forbidden(objectPath.Child("kind"), why))
	}
	return errs
}

// requiredString is obj[key] if it is a non-empty string.
func requiredString(obj map[string]any, key string) (string, *field.Error) {
	p := objectPath.Child(key)
	v, found := obj[key]
	if !found || v == nil || v == "" {
		return "", field.Required(p, "")
	}
	s, ok := v.(string)
	if !ok {
		return "", field.Invalid(p, v, "must be a string")
	}
	return s, nil
}

func validateMetadata(obj map[string]any) field.ErrorList {
	raw, found := obj["metadata"]
	if !found || raw == nil {
		return nil
	}
	p := objectPath.Child("metadata")
	meta, ok := raw.(map[string]any)
	if !ok {
		return field.ErrorList{field.Invalid(p, raw, "must be an object")}
	}
	var errs field.ErrorList
	if v, found := meta["name"]; found && v != nil {
		errs = append(errs, field.Forbidden(p.Child("name"), "the controller names each version's copy"))
	}
	if v, found := meta["namespace"]; found && v != nil {
		errs = append(errs, field.Forbidden(p.Child("namespace"), "copies are made in the TemporalWorkerOwnedResource's namespace"))
	}
	// The controller copies these onto each copy: they must be what
	// Kubernetes stores, maps of strings.
	for _, key := range []string{"labels", "annotations"} {
		m, found := meta[key]
		if !found || m == nil {
			continue
		}
		values, ok := m.(map[string]any)
		if !ok {
			errs = append(errs, field.Invalid(p.Child(key), m, "must be a map of strings"))
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(values)) {
			if _, ok := values[k].(string); !ok {
				errs = append(errs, field.Invalid(p.Child(key).Key(k), values[k], "must be a string"))
			}
		}
	}
	return errs
}

func validateMinReplicas(obj map[string]any) field.ErrorList {
	spec, _ := obj["spec"].(map[string]any)
	if n, ok := spec["minReplicas"].(float64); ok && n == 0 {
		return field.ErrorList{field.Invalid(objectPath.Child("spec", "minReplicas"), 0,
			"must not be 0: a version scaled to zero could strand the workflows pinned to it")}
	}
	return nil
}

// validateSentinels walks v, refusing a value other than null or {} under
// any key of sentinelFields and a string whose template fails for every
// version. The paths in own are metric selectors, the user's to fill:
// there a map of strings is accepted as well. Map keys are visited in
// order, so errors are stable.
func validateSentinels(v any, p *field.Path, own map[string]bool) field.ErrorList {
	var errs field.ErrorList
	switch v := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			child := p.Child(k)
			if why, ok := sentinelFields[k]; ok && !ownedresource.IsSentinel(k, v[k]) {
				if own[child.String()] {
					errs = append(errs, validateLabelValues(v[k], child)...)
					continue
				}
				errs = append(errs, field.Forbidden(child, "must be null, {} or absent: "+why))
				continue
			}
			errs = append(errs, validateSentinels(v[k], child, own)...)
		}
	case []any:
		for i, item := range v {
			errs = append(errs, validateSentinels(item, p.Index(i), own)...)
		}
	case string:
		if !strings.Contains(v, "{{") {
			break
		}
		if err := ownedresource.CheckTemplate(v); err != nil {
			errs = append(errs, field.Invalid(p, v, err.Error()))
		}
	}
	return errs
}

// metricSelectors are the paths of an HPA's metric selectors' matchLabels
// (spec.metrics[*].{external,object,pods}.metric.selector.matchLabels).
// They select metric series, not pods, so the labels in them cannot reach
// another version's pods: a user may write their own there, as the
// Temporal worker controller's manifests do.
func metricSelectors(obj map[string]any) map[string]bool {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if group, _, _ := strings.Cut(apiVersion, "/"); group != "autoscaling" || kind != "HorizontalPodAutoscaler" {
		return nil
	}
	spec, _ := obj["spec"].(map[string]any)
	metrics, _ := spec["metrics"].([]any)
	own := map[string]bool{}
	for i := range metrics {
		for _, source := range []string{"external", "object", "pods"} {
			own[objectPath.Child("spec", "metrics").Index(i).Child(source, "metric", "selector", "matchLabels").String()] = true
		}
	}
	return own
}

// validateLabelValues checks a user's matchLabels: strings only, each
// template parsing.
func validateLabelValues(v any, p *field.Path) field.ErrorList {
	labels, ok := v.(map[string]any)
	if !ok {
		return field.ErrorList{field.Invalid(p, v, "must be a map of label names to strings")}
	}
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		s, ok := labels[k].(string)
		if !ok {
			errs = append(errs, field.Invalid(p.Key(k), labels[k], "must be a string"))
			continue
		}
		errs = append(errs, validateSentinels(s, p.Key(k), nil)...)
	}
	return errs
}

// validateBounds renders obj for a sample version with the longest values
// a real one can have and refuses it if a template breaks a bound on what
// rendering may cost (a value doubled in a variable forty times, say).
// Parsing alone cannot tell: only running the template makes its values.
// Other render errors can depend on the version, and are left to the
// controller, which reports them in status; so is a template that breaks a
// bound only for some versions, which the same bounds stop there.
func validateBounds(twor *v1alpha1.TemporalWorkerOwnedResource, obj map[string]any) field.ErrorList {
	_, err := ownedresource.Render(obj, ownedresource.SampleTarget(twor.Namespace, twor.Spec.WorkerRef.Name, twor.Name))
	var fe *ownedresource.FieldError
	if !errors.Is(err, ownedresource.ErrBound) || !errors.As(err, &fe) {
		return nil
	}
	return field.ErrorList{{Type: field.ErrorTypeInvalid, Field: fe.Field, BadValue: field.OmitValueType{},
		Detail: fe.Err.Error() + " (rendered for a sample version with the longest build ID and names)"}}
}

// validateDroppedSentinels refuses an object whose sentinel kubectl
// dropped and nothing fills in. kubectl apply without --server-side drops
// every null of the manifest, creating or patching, and records the
// manifest, nulls included, in the last-applied-configuration annotation:
// a sentinel key that is null there and absent here, where its object
// still is, was dropped. Unless the kind needs it (the controller then
// fills it in anyway, ownedresource.FilledWhenAbsent), the copies would
// lack it, so the object is refused with a message that says to write {}.
// Without the annotation nothing can be told, and nothing is refused.
func validateDroppedSentinels(twor *v1alpha1.TemporalWorkerOwnedResource, obj map[string]any) field.ErrorList {
	raw := twor.Annotations[corev1.LastAppliedConfigAnnotation]
	if raw == "" {
		return nil
	}
	var applied struct {
		Spec struct {
			Object any `json:"object"`
		} `json:"spec"`
	}
	if json.Unmarshal([]byte(raw), &applied) != nil {
		return nil
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	var errs field.ErrorList
	// keys is the chain of object keys from the top, nil below a list,
	// where no path of a kind leads.
	var walk func(applied, live any, keys []string, p *field.Path)
	walk = func(applied, live any, keys []string, p *field.Path) {
		switch a := applied.(type) {
		case map[string]any:
			l, isMap := live.(map[string]any)
			if !isMap {
				return // not the object kubectl applied: no evidence
			}
			for _, k := range slices.Sorted(maps.Keys(a)) {
				var path []string
				if keys != nil {
					path = append(slices.Clip(keys), k)
				}
				if _, found := l[k]; !found && a[k] == nil && ownedresource.IsSentinelKey(k) &&
					(path == nil || !ownedresource.FilledWhenAbsent(apiVersion, kind, path)) {
					errs = append(errs, field.Required(p.Child(k), fmt.Sprintf(
						"kubectl apply without --server-side dropped `%s: null` (it drops every null; its last-applied-configuration annotation still has it): write `%s: {}` instead, which every way of applying keeps",
						k, k)))
					continue
				}
				walk(a[k], l[k], path, p.Child(k))
			}
		case []any:
			l, _ := live.([]any)
			for i := range min(len(a), len(l)) {
				walk(a[i], l[i], nil, p.Index(i))
			}
		}
	}
	walk(applied.Spec.Object, obj, []string{}, objectPath)
	return errs
}

// specUnchanged reports whether an update leaves the spec as it was: such
// an update (labels, finalizers, owner references) is not checked again,
// so a TemporalWorkerOwnedResource admitted earlier can always be
// finalized even if the rules have since become stricter.
func specUnchanged(twor, old *v1alpha1.TemporalWorkerOwnedResource) bool {
	if twor.Spec.WorkerRef != old.Spec.WorkerRef {
		return false
	}
	a, errA := objectOf(twor)
	b, errB := objectOf(old)
	return errA == nil && errB == nil && apiequality.Semantic.DeepEqual(a, b)
}

// Package ownedresource renders the per-version copies of a
// TemporalWorkerOwnedResource: from the user's spec.object and one worker
// version it builds the complete object the controller server-side applies,
// with its name, labels, owner reference, injected scaleTargetRef and
// matchLabels, and Go templates executed. It is pure: no clients, no clock,
// so the planner can call it and the admission webhook can dry-run it.
package ownedresource

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/rainbow-deploy/rainbow/internal/workload"
)

// LabelOwnedResource is set on every copy, next to workload.LabelWorker and
// workload.LabelBuildID, to the TemporalWorkerOwnedResource's name (hashed
// like workload.WorkerLabel when longer than a label value allows).
const LabelOwnedResource = "temporal.io/owned-resource"

const (
	// maxName keeps copies valid for every kind, even one whose name becomes
	// a prefix of pod names as a Deployment's does (see workload).
	maxName   = 47
	nameHash  = 8
	maxPrefix = maxName - nameHash - 1
	// maxRendered bounds what templates may write in one object: more than
	// the API server stores (about 1.5 MiB) is a mistake or an attack.
	maxRendered = 1 << 20
)

// Data is what Go templates in string values see.
type Data struct {
	// DeploymentName is the versioned Kubernetes Deployment's name (not the
	// Temporal worker deployment name).
	DeploymentName string
	BuildID        string
	// TemporalNamespace is the Temporal namespace the workers poll.
	TemporalNamespace string
	// TemporalDeploymentName is the Temporal worker deployment the
	// version's workers register with (spec.workerOptions.deploymentName,
	// <namespace>/<name> by default), as a KEDA Temporal trigger names it.
	TemporalDeploymentName string
}

// Target is the worker version a copy is made for.
type Target struct {
	// Namespace is the Kubernetes namespace of the TWD and the TWOR.
	Namespace string
	// WorkerDeployment is the TemporalWorkerDeployment's name.
	WorkerDeployment string
	// OwnedResource is the TemporalWorkerOwnedResource's name.
	OwnedResource string
	BuildID       string
	// DeploymentName and DeploymentUID identify the versioned Deployment,
	// which owns the copy.
	DeploymentName         string
	DeploymentUID          string
	TemporalNamespace      string
	TemporalDeploymentName string
	// Selector, when set, are the labels that select the version's pods
	// (an adopted Deployment's own); nil means the controller's.
	Selector map[string]string
}

// Name is the name of the copy for one TWD, TWOR and build ID: at most 47
// characters, "{prefix}-{hash}". The prefix is "{twd}-{twor}-{buildID}"
// made a DNS-1123 label (lowercased, other characters become "-") and cut
// to fit; the hash is 8 hex digits of SHA-256 over the exact triple. The
// hash is always there, so triples that read the same after truncation or
// sanitising ("v1.0" and "v1-0") still get distinct names.
func Name(twd, twor, buildID string) string {
	prefix := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, strings.ToLower(twd+"-"+twor+"-"+buildID))
	// Cut before trimming: the cut may leave a trailing "-". Bytes suffice,
	// every rune is ASCII now.
	prefix = strings.Trim(prefix[:min(len(prefix), maxPrefix)], "-")
	// Length prefixes keep the encoding unambiguous whatever the parts hold.
	h := sha256.New()
	for _, part := range []string{twd, twor, buildID} {
		fmt.Fprintf(h, "%d:%s", len(part), part)
	}
	hash := hex.EncodeToString(h.Sum(nil))[:nameHash]
	if prefix == "" {
		return hash
	}
	return prefix + "-" + hash
}

// Render returns the complete object to server-side apply for t, from
// object (spec.object decoded with json.Unmarshal into map[string]any),
// which it never modifies:
//
//   - every string value that contains "{{" is executed as a Go template
//     with Data; an unknown field or a failing template is a *FieldError
//     that names the value's path from spec.object, and one that breaks a
//     bound on what rendering may cost (bounds.go) wraps ErrBound;
//   - a "scaleTargetRef" that is null or {}, at any depth, becomes a
//     reference to the versioned Deployment and such a "matchLabels" its
//     selector labels; a kind that needs one of them (see needed: an
//     HPA's or ScaledObject's spec.scaleTargetRef, a PDB's
//     spec.selector.matchLabels) gets it when it is absent too, as after
//     kubectl's client-side apply, which drops nulls. Other values are left
//     alone: the webhook rejects them;
//   - metadata is the controller's: name, namespace, the owner reference
//     to the versioned Deployment, and the user's labels and annotations,
//     with the controller's labels winning; every other metadata field
//     the user set is dropped;
//   - status is dropped.
//
// It fails when apiVersion or kind is missing, when a template fails, and
// when metadata.labels or metadata.annotations are not maps of strings.
func Render(object map[string]any, t Target) (*unstructured.Unstructured, error) {
	r := renderer{data: Data{DeploymentName: t.DeploymentName, BuildID: t.BuildID, TemporalNamespace: t.TemporalNamespace,
		TemporalDeploymentName: t.TemporalDeploymentName}, target: t}
	// The walk copies as it goes, so object stays untouched.
	out, err := r.walk(object, objectPath)
	if err != nil {
		return nil, err
	}
	obj, _ := out.(map[string]any)
	if obj == nil {
		obj = map[string]any{}
	}
	for _, field := range []string{"apiVersion", "kind"} {
		if s, ok := obj[field].(string); !ok || s == "" {
			return nil, fmt.Errorf("%s: required, a non-empty string", joinKey(objectPath, field))
		}
	}
	r.fillNeeded(obj)

	labels, err := stringMap(obj, "labels")
	if err != nil {
		return nil, err
	}
	annotations, err := stringMap(obj, "annotations")
	if err != nil {
		return nil, err
	}
	maps.Copy(labels, map[string]any{
		workload.LabelWorker:  workload.WorkerLabel(t.WorkerDeployment),
		workload.LabelBuildID: t.BuildID,
		LabelOwnedResource:    workload.WorkerLabel(t.OwnedResource),
	})
	meta := map[string]any{
		"name":      Name(t.WorkerDeployment, t.OwnedResource, t.BuildID),
		"namespace": t.Namespace,
		"labels":    labels,
		// The versioned Deployment owns the copy, so Kubernetes' garbage
		// collector deletes it with the version. blockOwnerDeletion stays
		// unset: setting it needs update permission on the owner's
		// finalizers, and nothing needs to wait for the copy.
		"ownerReferences": []any{map[string]any{
			"apiVersion": "apps/v1",
			"kind":       "Deployment",
			"name":       t.DeploymentName,
			"uid":        t.DeploymentUID,
			"controller": true,
		}},
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	obj["metadata"] = meta
	delete(obj, "status")
	return &unstructured.Unstructured{Object: obj}, nil
}

// Hash is a short, stable hash (16 hex digits) of the rendered object's
// content: the controller skips applying a copy whose hash it applied
// before.
func Hash(u *unstructured.Unstructured) string {
	var obj map[string]any
	if u != nil {
		obj = u.Object
	}
	// encoding/json sorts map keys, which makes the encoding canonical.
	b, err := json.Marshal(obj)
	if err != nil {
		// Only values JSON cannot hold (NaN, say) get here; fmt prints maps
		// sorted too, so the hash stays stable.
		b = fmt.Appendf(nil, "%#v", obj)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// stringMap returns a copy of metadata[field] as map[string]any, checking
// that every value is a string; absent or null is an empty map.
func stringMap(obj map[string]any, field string) (map[string]any, error) {
	path := joinKey(objectPath, "metadata") + "." + field
	var in any
	switch meta := obj["metadata"].(type) {
	case nil:
	case map[string]any:
		in = meta[field]
	default:
		return nil, errors.New(joinKey(objectPath, "metadata") + ": must be an object")
	}
	out := map[string]any{}
	switch m := in.(type) {
	case nil:
		return out, nil
	case map[string]any:
		for k, v := range m {
			if _, ok := v.(string); !ok {
				return nil, fmt.Errorf("%s: value must be a string, not %T", joinKey(path, k), v)
			}
			out[k] = v
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%s: must be a map of strings", path)
	}
}

type renderer struct {
	data   Data
	target Target
	// written counts what templates wrote, against maxRendered.
	written int
	budget  budget
}

// walk returns a deep copy of v with templates executed and the
// sentinels (null or {} under scaleTargetRef and matchLabels) filled in.
// path is v's JSON path, for errors.
func (r *renderer) walk(v any, path string) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return nil, nil
		}
		out := make(map[string]any, len(v))
		// Sorted, so that of several errors the same one is reported each
		// time and the TWOR's status does not flap.
		for _, k := range slices.Sorted(maps.Keys(v)) {
			val := v[k]
			if IsSentinel(k, val) {
				out[k] = r.inject(k)
				continue
			}
			c, err := r.walk(val, joinKey(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		if v == nil {
			return nil, nil
		}
		out := make([]any, len(v))
		for i, val := range v {
			c, err := r.walk(val, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case string:
		if !strings.Contains(v, "{{") {
			return v, nil
		}
		s, err := r.execute(v)
		if err != nil {
			return nil, &FieldError{Field: path, Err: err}
		}
		return s, nil
	case nil, bool, float64, int64, json.Number:
		return v, nil
	default:
		// Anything else did not come from JSON; copying it blindly could
		// share mutable state or break the apply later.
		return nil, fmt.Errorf("%s: unsupported value of type %T", path, v)
	}
}

func (r *renderer) execute(text string) (string, error) {
	tmpl, err := parseBounded(text, &r.budget)
	if err != nil {
		return "", err
	}
	w := &limitedBuffer{limit: maxRendered - r.written}
	err = tmpl.Execute(w, r.data)
	r.written += w.Len()
	if err != nil {
		return "", err
	}
	return w.String(), nil
}

// limitedBuffer fails writes beyond limit, which stops the template.
type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		return 0, fmt.Errorf("%w: the templates of one object may write at most %d bytes: make the values shorter", ErrBound, maxRendered)
	}
	return b.Buffer.Write(p)
}

// objectPath is where the values Render reads are in a
// TemporalWorkerOwnedResource: errors name them from there.
const objectPath = "spec.object"

// FieldError is an error in one value of spec.object.
type FieldError struct {
	// Field is the value's path, "spec.object.spec.metrics[0].name" say.
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// joinKey appends key to a JSON path: ".key", or `["key"]` for keys such
// as "example.com/name" that would read as several steps.
func joinKey(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

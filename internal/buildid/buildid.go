// Package buildid derives a worker version's build ID from its pod template.
//
// A generated build ID is the image tag, readable, followed by a hash of the
// whole user pod template. It must never change for the same template, across
// controller restarts and upgrades: a new build ID starts a new version of
// every worker. The golden tests pin it.
package buildid

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

const (
	// MaxLength keeps build IDs valid as label values.
	MaxLength = 63
	// hashLength is 64 bits of SHA-256: a collision between two templates of
	// one worker is not a practical concern.
	hashLength  = 16
	maxReadable = MaxLength - hashLength - 1
)

// Valid is what Temporal and Kubernetes label values both accept.
var Valid = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// TemplateHash is the hex SHA-256 of the template's canonical JSON. It covers
// every field the user wrote and nothing the controller adds.
func TemplateHash(tpl *corev1.PodTemplateSpec) string {
	sum := sha256.Sum256(canonicalJSON(tpl))
	return hex.EncodeToString(sum[:])
}

// canonicalJSON encodes a pod template with sorted keys, without the values
// the CRD schema defaults (schemaDefaults) and without null, empty-object
// and empty-array values. Dropping empties keeps the hash stable when a
// Kubernetes library upgrade changes how unset fields are encoded
// (omitempty versus omitzero, new optional fields).
func canonicalJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		// API types always encode; this cannot happen.
		panic("buildid: encode: " + err.Error())
	}
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		panic("buildid: decode: " + err.Error())
	}
	for _, d := range schemaDefaults {
		dropDefault(generic, d.path, d.value)
	}
	// encoding/json sorts map keys, so equal values give equal bytes.
	out, err := json.Marshal(prune(generic))
	if err != nil {
		panic("buildid: encode: " + err.Error())
	}
	return out
}

// schemaDefault is a value the CRD schema defaults inside spec.template, at
// a path of field names where "[]" marks each item of a list.
type schemaDefault struct {
	path  []string
	value any
}

// schemaDefaults lists every `default:` of the CRD schema under
// spec.template (config/crd/bases). The API server writes these into the
// stored object, so the hash leaves them out where they equal the
// default: the build ID then depends on what the user wrote, not on the
// defaults of the CRD that happens to be installed.
// TestSchemaDefaultsDoNotCount fails when the CRD gains a default missing
// here. Never remove an entry: objects stored under an older CRD keep the
// value.
var schemaDefaults = func() []schemaDefault {
	container := map[string]any{
		"env[].valueFrom.configMapKeyRef.name": "",
		"env[].valueFrom.secretKeyRef.name":    "",
		"env[].valueFrom.fileKeyRef.optional":  false,
		"envFrom[].configMapRef.name":          "",
		"envFrom[].secretRef.name":             "",
		"ports[].protocol":                     "TCP",
		"livenessProbe.grpc.service":           "",
		"readinessProbe.grpc.service":          "",
		"startupProbe.grpc.service":            "",
	}
	pod := map[string]any{
		"spec.imagePullSecrets[].name":                      "",
		"spec.volumes[].azureDisk.fsType":                   "ext4",
		"spec.volumes[].azureDisk.readOnly":                 false,
		"spec.volumes[].cephfs.secretRef.name":              "",
		"spec.volumes[].cinder.secretRef.name":              "",
		"spec.volumes[].configMap.name":                     "",
		"spec.volumes[].csi.nodePublishSecretRef.name":      "",
		"spec.volumes[].flexVolume.secretRef.name":          "",
		"spec.volumes[].iscsi.iscsiInterface":               "default",
		"spec.volumes[].iscsi.secretRef.name":               "",
		"spec.volumes[].projected.sources[].configMap.name": "",
		"spec.volumes[].projected.sources[].secret.name":    "",
		"spec.volumes[].rbd.keyring":                        "/etc/ceph/keyring",
		"spec.volumes[].rbd.pool":                           "rbd",
		"spec.volumes[].rbd.secretRef.name":                 "",
		"spec.volumes[].rbd.user":                           "admin",
		"spec.volumes[].scaleIO.fsType":                     "xfs",
		"spec.volumes[].scaleIO.secretRef.name":             "",
		"spec.volumes[].scaleIO.storageMode":                "ThinProvisioned",
		"spec.volumes[].storageos.secretRef.name":           "",
	}
	for _, list := range []string{"containers", "initContainers", "ephemeralContainers"} {
		for path, value := range container {
			pod["spec."+list+"[]."+path] = value
		}
	}
	out := make([]schemaDefault, 0, len(pod))
	for path, value := range pod {
		out = append(out, schemaDefault{strings.Split(path, "."), value})
	}
	return out
}()

// dropDefault deletes the field at path wherever it holds value.
func dropDefault(v any, path []string, value any) {
	var found [][]any
	locate(v, path, nil, []any{value}, &found)
	for _, loc := range found {
		remove(v, loc)
	}
}

func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if c := prune(child); c == nil {
				delete(t, k)
			} else {
				t[k] = c
			}
		}
		if len(t) == 0 {
			return nil
		}
		return t
	case []any:
		if len(t) == 0 {
			return nil
		}
		for i := range t {
			// Keep positions: an empty element still counts in a list.
			if c := prune(t[i]); c != nil {
				t[i] = c
			} else {
				t[i] = map[string]any{}
			}
		}
		return t
	default:
		return v
	}
}

// Of is the build ID a TemporalWorkerDeployment's spec asks for: its
// custom build ID when set, else the one generated from its template.
func Of(spec *v1alpha1.TemporalWorkerDeploymentSpec) string {
	if id := spec.WorkerOptions.CustomBuildID; id != "" {
		return id
	}
	return Generate(&spec.Template)
}

// Target is the build ID a TemporalWorkerDeployment targets: Of, except
// that one converted from the incumbent keeps the build ID the incumbent
// gave its template until that template changes. Going back to the same
// template later targets that version again, as any rollback does.
func Target(twd *v1alpha1.TemporalWorkerDeployment) string {
	adopted, hash := twd.Annotations[v1alpha1.AnnotationAdoptedBuildID], twd.Annotations[v1alpha1.AnnotationAdoptedTemplateHash]
	if adopted != "" && twd.Spec.WorkerOptions.CustomBuildID == "" && hash == TemplateHash(&twd.Spec.Template) {
		return adopted
	}
	return Of(&twd.Spec)
}

// Generate returns the build ID for a template: "<tag>-<hash>".
func Generate(tpl *corev1.PodTemplateSpec) string {
	return readable(tpl) + "-" + TemplateHash(tpl)[:hashLength]
}

// readable is the first container's image tag, or the start of its digest,
// cleaned to the build ID alphabet.
func readable(tpl *corev1.PodTemplateSpec) string {
	if len(tpl.Spec.Containers) == 0 {
		return "none"
	}
	image := tpl.Spec.Containers[0].Image
	var part string
	if at := strings.LastIndex(image, "@"); at >= 0 {
		digest := image[at+1:]
		if colon := strings.Index(digest, ":"); colon >= 0 {
			digest = digest[colon+1:]
		}
		part = digest[:min(12, len(digest))]
	} else if colon := strings.LastIndex(image, ":"); colon > strings.LastIndex(image, "/") {
		part = image[colon+1:]
	}
	if part == "" {
		part = "latest"
	}
	var b strings.Builder
	for _, r := range part {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := b.String()
	if len(s) > maxReadable {
		s = s[:maxReadable]
	}
	s = strings.Trim(s, "._-")
	if s == "" {
		return "latest"
	}
	return s
}

// Package workload builds the versioned Deployment of a worker version: its
// name, labels, owner and the pod template with the controller's additions
// (the env contract and the connection's credentials).
//
// One function, ApplyConnection, adds everything the controller injects. It
// serves both when a Deployment is created and when a running version is
// brought up to date with a changed connection, so the two cannot drift.
package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/buildid"
	"github.com/rainbow-deploy/rainbow/internal/workerenv"
)

// Labels and annotations the controller owns.
const (
	// LabelWorker holds the TWD's name (hashed when longer than a label value).
	LabelWorker = "temporal.io/worker-deployment"
	// LabelBuildID holds the version's build ID.
	LabelBuildID = "temporal.io/build-id"
	// AnnotationConnectionHash changes when the connection's address or
	// credentials change, so that running versions roll to pick them up.
	AnnotationConnectionHash = "temporal.io/connection-hash"
	// AnnotationTemplateHash is the SHA-256 of the user's pod template
	// (before the controller's additions) the Deployment runs. With a
	// custom build ID, a different hash means the template drifted and the
	// Deployment is updated in place.
	AnnotationTemplateHash = "temporal.io/pod-template-hash"
	// AnnotationMigratedTemplateHash is where the tool users migrate from
	// records its own hash of the pod template, on the pod template. It is
	// only read: a Deployment whose pod template carries it gets
	// AnnotationTemplateHash without a restart.
	AnnotationMigratedTemplateHash = "temporal.io/pod-template-spec-hash"
	// AnnotationScaledDownAt records when the controller scaled a finished
	// version to zero (RFC 3339).
	AnnotationScaledDownAt = "temporal.io/scaled-down-at"
	// AnnotationTemplateGeneration is the Deployment generation at which
	// the controller last changed its pod template. Until the Deployment
	// controller has observed it, the change is rolling; a generation that
	// only a scale bumped (an autoscaler) is not a rollout.
	AnnotationTemplateGeneration = "temporal.io/template-generation"
	// AnnotationDeploymentMetadata records the spec's deploymentMetadata
	// last applied to the Deployment, so that keys it drops are removed.
	AnnotationDeploymentMetadata = "temporal.io/deployment-metadata"
	// AnnotationNamespaceID records the ID of the Temporal namespace the
	// workers were given, which tells a new address of the same server
	// from another server.
	AnnotationNamespaceID = "temporal.io/namespace-id"

	tlsVolume    = "temporal-tls"
	tlsMountPath = "/etc/temporal/tls"
	// maxDeploymentName leaves room for the ReplicaSet and pod suffixes
	// within the 63 characters a pod's hostname label allows.
	maxDeploymentName = 47
)

// Connection is what the controller injects for a TemporalConnection.
type Connection struct {
	Address string
	// MutualTLSSecret names the Secret with tls.crt, tls.key and maybe ca.crt.
	MutualTLSSecret string
	// HasCA: the Secret (the mTLS one, or else the API key's) has ca.crt.
	HasCA bool
	// APIKey selects the Secret key holding an API key.
	APIKey     *v1alpha1.SecretKeyReference
	ServerName string
	// CredentialsVersion changes when Secret contents change (for example a
	// hash of them), since env from Secrets is read only at pod start.
	CredentialsVersion string
}

// Identity is the Temporal side of a version.
type Identity struct {
	TemporalNamespace string
	DeploymentName    string
	BuildID           string
}

// DeploymentName is the Deployment name of a version: "<twd>-<build ID>"
// when that is already a valid name of at most 47 characters. Otherwise it
// is lowercased, other characters become "-", it is cut to fit, and 10 hex
// digits of a hash of the exact TWD name and build ID are appended: build
// IDs such as "v1.0" and "v1-0", or "V1" and "v1", are distinct versions
// and need distinct Deployments. Names that need no change are kept as
// they always were, so an upgrade renames no Deployment.
func DeploymentName(twdName, buildID string) string {
	joined := twdName + "-" + buildID
	name := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(joined))
	if name == joined && len(name) <= maxDeploymentName {
		return strings.Trim(name, "-")
	}
	sum := sha256.Sum256([]byte(twdName + "/" + buildID))
	suffix := hex.EncodeToString(sum[:])[:10]
	return strings.Trim(name[:min(len(name), maxDeploymentName-len(suffix)-1)], "-") + "-" + suffix
}

// WorkerLabel is the LabelWorker value for a TWD name.
func WorkerLabel(twdName string) string {
	if len(twdName) <= 63 {
		return twdName
	}
	sum := sha256.Sum256([]byte(twdName))
	return twdName[:46] + "-" + hex.EncodeToString(sum[:])[:16]
}

// NewDeployment builds the Deployment of one version from the TWD's current
// template. replicas is nil when an autoscaler owns them.
func NewDeployment(twd *v1alpha1.TemporalWorkerDeployment, id Identity, conn Connection, replicas *int32) *appsv1.Deployment {
	selector := SelectorLabels(twd.Name, id.BuildID)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:      DeploymentName(twd.Name, id.BuildID),
			Namespace: twd.Namespace,
			Labels:    merge(nil, selector),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         v1alpha1.GroupVersion.String(),
				Kind:               "TemporalWorkerDeployment",
				Name:               twd.Name,
				UID:                twd.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
		},
	}
	SetTemplate(d, twd, id, conn)
	return d
}

// SetTemplate makes d run the TWD's current pod template: the user's
// template, the controller's labels and injections, and the template hash
// annotation that drift detection compares. NewDeployment and the in-place
// update of a custom build ID both use it, so they cannot drift apart.
// Replicas and the selector are left alone.
func SetTemplate(d *appsv1.Deployment, twd *v1alpha1.TemporalWorkerDeployment, id Identity, conn Connection) {
	tpl := *twd.Spec.Template.DeepCopy()
	tpl.Labels = merge(tpl.Labels, SelectorLabels(twd.Name, id.BuildID))
	if d.Spec.Selector != nil {
		// An adopted Deployment keeps its maker's selector for life.
		tpl.Labels = merge(tpl.Labels, d.Spec.Selector.MatchLabels)
	}
	ApplyConnection(&tpl, id, conn)
	d.Spec.Template = tpl
	applySettings(d, twd)
	d.Annotations = merge(d.Annotations, map[string]string{AnnotationTemplateHash: buildid.TemplateHash(&twd.Spec.Template)})
}

// Sync brings a running version's Deployment up to date with the
// connection (address, credentials; the pods roll) and with the spec's
// Deployment settings (applySettings; nothing rolls), and records
// namespaceID when known. It reports what changed. The build ID stays: the
// workflow code did not change.
func Sync(d *appsv1.Deployment, twd *v1alpha1.TemporalWorkerDeployment, id Identity, conn Connection, namespaceID string) (connectionChanged, settingsChanged bool) {
	if !Adopted(d) {
		tpl := d.Spec.Template.DeepCopy()
		ApplyConnection(tpl, id, conn)
		connectionChanged = tpl.Annotations[AnnotationConnectionHash] != d.Spec.Template.Annotations[AnnotationConnectionHash]
		d.Spec.Template = *tpl
	}
	settingsChanged = applySettings(d, twd)
	if namespaceID != "" {
		d.Annotations = merge(d.Annotations, map[string]string{AnnotationNamespaceID: namespaceID})
	}
	return connectionChanged, settingsChanged
}

// Adopted: another controller made d and the migrate command handed it over
// (v1alpha1.AnnotationAdoptedFrom). Its pod template holds that controller's
// injections, which differ from ours in order and form only: rewriting them
// would restart every worker for nothing, so Sync leaves the template be.
// A connection change reaches its workers through the next version.
func Adopted(d *appsv1.Deployment) bool {
	return d.Annotations[v1alpha1.AnnotationAdoptedFrom] != ""
}

// MarkTemplateChange records in updated, about to replace current, the
// generation its pod template change will get (a spec change bumps it by
// one), when the template changes at all.
func MarkTemplateChange(current, updated *appsv1.Deployment) {
	if equality.Semantic.DeepEqual(current.Spec.Template, updated.Spec.Template) {
		return
	}
	updated.Annotations = merge(updated.Annotations, map[string]string{AnnotationTemplateGeneration: strconv.FormatInt(current.Generation+1, 10)})
}

// TemplateRolling: a template change the controller made is not fully
// rolled out: the Deployment controller has not observed it yet, or pods
// of an older template remain.
func TemplateRolling(d *appsv1.Deployment) bool {
	gen, _ := strconv.ParseInt(d.Annotations[AnnotationTemplateGeneration], 10, 64)
	return d.Status.ObservedGeneration < gen || d.Status.Replicas > d.Status.UpdatedReplicas
}

// applySettings gives d the spec's Deployment settings: minReadySeconds,
// progressDeadlineSeconds (unset keeps the Deployment's), the rolling
// update strategy and deploymentMetadata. Keys that an earlier spec's
// deploymentMetadata set and this one drops are removed: what was applied
// is recorded in AnnotationDeploymentMetadata. It reports a change.
func applySettings(d *appsv1.Deployment, twd *v1alpha1.TemporalWorkerDeployment) bool {
	before := d.DeepCopy()
	d.Spec.MinReadySeconds = twd.Spec.MinReadySeconds
	if deadline := twd.Spec.ProgressDeadlineSeconds; deadline != nil {
		d.Spec.ProgressDeadlineSeconds = deadline
	}
	d.Spec.Strategy = strategyOf(twd.Spec.Rollout.DeploymentStrategy)

	var prev v1alpha1.DeploymentMetadata
	_ = json.Unmarshal([]byte(d.Annotations[AnnotationDeploymentMetadata]), &prev)
	want := twd.Spec.DeploymentMetadata
	d.Labels = replaceKeys(d.Labels, prev.Labels, want.Labels)
	d.Annotations = replaceKeys(d.Annotations, prev.Annotations, want.Annotations)
	if len(want.Labels)+len(want.Annotations) == 0 {
		delete(d.Annotations, AnnotationDeploymentMetadata)
	} else {
		applied, _ := json.Marshal(want)
		d.Annotations[AnnotationDeploymentMetadata] = string(applied)
	}
	return !equality.Semantic.DeepEqual(before.Spec, d.Spec) || !equality.Semantic.DeepEqual(before.ObjectMeta, d.ObjectMeta)
}

// replaceKeys drops from m the keys of prev and sets those of want; other
// keys (the controller's, or anyone else's) stay. Keys under temporal.io/
// are never touched (the API refuses them in want).
func replaceKeys(m, prev, want map[string]string) map[string]string {
	out := merge(m, nil)
	for k := range prev {
		if !strings.HasPrefix(k, "temporal.io/") {
			delete(out, k)
		}
	}
	for k, v := range want {
		if !strings.HasPrefix(k, "temporal.io/") {
			out[k] = v
		}
	}
	return out
}

// strategyOf is the Deployment strategy for the spec's; unset values are
// Kubernetes' defaults, so that Deployments made before it existed match.
func strategyOf(s *v1alpha1.DeploymentStrategy) appsv1.DeploymentStrategy {
	quarter := intstr.FromString("25%")
	ru := &appsv1.RollingUpdateDeployment{MaxSurge: &quarter, MaxUnavailable: &quarter}
	if s != nil {
		if s.MaxSurge != nil {
			ru.MaxSurge = s.MaxSurge
		}
		if s.MaxUnavailable != nil {
			ru.MaxUnavailable = s.MaxUnavailable
		}
	}
	return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: ru}
}

// Address is the Temporal address injected into the Deployment's workers,
// "" if none.
func Address(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == workerenv.Address {
				return e.Value
			}
		}
	}
	return ""
}

// SelectorLabels are the versioned Deployment's selector labels, also on its
// pods. Owned resources inject the same labels for `matchLabels: null`, so
// that a PodDisruptionBudget, say, selects exactly that version's pods.
func SelectorLabels(twdName, buildID string) map[string]string {
	return map[string]string{LabelWorker: WorkerLabel(twdName), LabelBuildID: buildID}
}

// ApplyConnection sets the env contract, TLS volume and connection hash on a
// pod template, replacing earlier values. It is idempotent.
func ApplyConnection(tpl *corev1.PodTemplateSpec, id Identity, conn Connection) {
	spec := &tpl.Spec
	env := []corev1.EnvVar{
		{Name: workerenv.Address, Value: conn.Address},
		{Name: workerenv.Namespace, Value: id.TemporalNamespace},
		{Name: workerenv.DeploymentName, Value: id.DeploymentName},
		{Name: workerenv.BuildID, Value: id.BuildID},
	}
	if conn.ServerName != "" || conn.MutualTLSSecret != "" || conn.APIKey != nil {
		// The controller's own client uses TLS in each of these cases.
		env = append(env, corev1.EnvVar{Name: workerenv.TLS, Value: "true"})
	}
	if conn.ServerName != "" {
		env = append(env, corev1.EnvVar{Name: workerenv.TLSServerName, Value: conn.ServerName})
	}
	// The volume with the CA, and the client certificate if there is one.
	var tlsSource *corev1.SecretVolumeSource
	if conn.MutualTLSSecret != "" {
		env = append(env,
			corev1.EnvVar{Name: workerenv.TLSClientCert, Value: tlsMountPath + "/tls.crt"},
			corev1.EnvVar{Name: workerenv.TLSClientKey, Value: tlsMountPath + "/tls.key"})
		tlsSource = &corev1.SecretVolumeSource{SecretName: conn.MutualTLSSecret, DefaultMode: ptr.To[int32](0o440)}
	} else if conn.APIKey != nil && conn.HasCA {
		// Only the CA: the API key itself stays in the environment.
		tlsSource = &corev1.SecretVolumeSource{SecretName: conn.APIKey.Name, DefaultMode: ptr.To[int32](0o440),
			Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}
	}
	if tlsSource != nil && conn.HasCA {
		env = append(env, corev1.EnvVar{Name: workerenv.TLSServerCA, Value: tlsMountPath + "/ca.crt"})
	}
	if conn.APIKey != nil {
		env = append(env,
			corev1.EnvVar{Name: workerenv.APIKey, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: conn.APIKey.Name},
				Key:                  conn.APIKey.Key,
			}}})
	}

	spec.Volumes = without(spec.Volumes, tlsVolume, func(v corev1.Volume) string { return v.Name })
	if tlsSource != nil {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: tlsVolume, VolumeSource: corev1.VolumeSource{Secret: tlsSource}})
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Env = setEnv(c.Env, env)
		c.VolumeMounts = without(c.VolumeMounts, tlsVolume, func(m corev1.VolumeMount) string { return m.Name })
		if tlsSource != nil {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: tlsVolume, MountPath: tlsMountPath, ReadOnly: true})
		}
	}
	tpl.Annotations = merge(tpl.Annotations, map[string]string{AnnotationConnectionHash: conn.hash()})
}

func (c Connection) hash() string {
	apiKey := ""
	if c.APIKey != nil {
		apiKey = c.APIKey.Name + "/" + c.APIKey.Key
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%q %q %v %q %q %q", c.Address, c.MutualTLSSecret, c.HasCA, apiKey, c.ServerName, c.CredentialsVersion)))
	return hex.EncodeToString(sum[:])[:16]
}

// injected lists every env name ApplyConnection may set, so that a variable
// it no longer sets (say, after mTLS was turned off) is removed too.
var injected = map[string]bool{
	workerenv.Address: true, workerenv.Namespace: true, workerenv.DeploymentName: true, workerenv.BuildID: true,
	workerenv.TLS: true, workerenv.TLSClientCert: true, workerenv.TLSClientKey: true, workerenv.TLSServerCA: true,
	workerenv.TLSServerName: true, workerenv.APIKey: true,
}

// setEnv puts the injected variables first, so the user's own variables
// can refer to them as $(TEMPORAL_ADDRESS) and so on, followed by the
// user's in order. An injected name wins over a user variable of the same
// name, which is dropped.
func setEnv(existing, add []corev1.EnvVar) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(existing)+len(add))
	out = append(out, add...)
	for _, e := range existing {
		if !injected[e.Name] {
			out = append(out, e)
		}
	}
	return out
}

// without returns a copy of items without those named name; the copy
// keeps the caller's template untouched.
func without[T any](items []T, name string, nameOf func(T) string) []T {
	return slices.DeleteFunc(slices.Clone(items), func(it T) bool { return nameOf(it) == name })
}

func merge(base, add map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(add))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

// UserTemplate recovers the user's pod template a version's Deployment was
// made from, by removing what SetTemplate added and what the API server
// defaulted, and proves it: its hash must equal the Deployment's
// AnnotationTemplateHash. A rollback sets
// spec.template back to it (kubectl rainbow undo).
func UserTemplate(d *appsv1.Deployment) (*corev1.PodTemplateSpec, error) {
	want := d.Annotations[AnnotationTemplateHash]
	if want == "" {
		return nil, fmt.Errorf("Deployment %s has no %s annotation to check its template against", d.Name, AnnotationTemplateHash)
	}
	tpl := d.Spec.Template.DeepCopy()
	delete(tpl.Labels, LabelWorker)
	delete(tpl.Labels, LabelBuildID)
	delete(tpl.Annotations, AnnotationConnectionHash)
	if len(tpl.Labels) == 0 {
		tpl.Labels = nil
	}
	if len(tpl.Annotations) == 0 {
		tpl.Annotations = nil
	}
	spec := &tpl.Spec
	spec.Volumes = without(spec.Volumes, tlsVolume, func(v corev1.Volume) string { return v.Name })
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return injected[e.Name] })
		c.VolumeMounts = without(c.VolumeMounts, tlsVolume, func(m corev1.VolumeMount) string { return m.Name })
		if len(c.Env) == 0 {
			c.Env = nil
		}
		if len(c.VolumeMounts) == 0 {
			c.VolumeMounts = nil
		}
	}
	if len(spec.Volumes) == 0 {
		spec.Volumes = nil
	}
	if got := buildid.TemplateHash(tpl); got != want {
		// The API server defaulted fields the user left out.
		if user, ok := buildid.WithoutServerDefaults(tpl, want); ok {
			return user, nil
		}
		return nil, fmt.Errorf("the template of Deployment %s, without the controller's additions, does not hash to its %s (%s, got %s): "+
			"set spec.template back from your own records (a git revert)", d.Name, AnnotationTemplateHash, want, got)
	}
	return tpl, nil
}

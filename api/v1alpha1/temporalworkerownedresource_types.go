package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FinalizerOwnedResourceCleanup holds a TemporalWorkerOwnedResource until
// the controller has deleted its copies; without it they would stay until
// their versions were sunset.
const FinalizerOwnedResourceCleanup = "temporal.io/owned-resource-cleanup"

// Reasons of a TemporalWorkerOwnedResource's Ready condition.
const (
	// ReasonApplied: every worker version with running workers has its copy.
	ReasonApplied = "Applied"
	// ReasonApplyFailed: the copy of at least one version could not be
	// rendered or applied; status.versions says which and why.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonWorkerDeploymentNotFound: spec.workerRef names no
	// TemporalWorkerDeployment in the namespace.
	ReasonWorkerDeploymentNotFound = "WorkerDeploymentNotFound"
)

// TemporalWorkerOwnedResourceSpec attaches one object to every worker
// version of a TemporalWorkerDeployment.
type TemporalWorkerOwnedResourceSpec struct {
	// WorkerRef names the TemporalWorkerDeployment, in the same namespace,
	// whose versions get a copy of Object. It cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.workerRef is immutable: create another TemporalWorkerOwnedResource instead"
	WorkerRef WorkerReference `json:"workerRef"`

	// Object is the namespaced object applied once per worker version that
	// has running workers, such as a HorizontalPodAutoscaler or a
	// PodDisruptionBudget. It needs apiVersion and kind; its name and
	// namespace are chosen by the controller. `scaleTargetRef: null` becomes
	// a reference to the version's Deployment and `matchLabels: null` its
	// pod selector labels. String values may use the Go templates
	// {{ .DeploymentName }}, {{ .BuildID }} and {{ .TemporalNamespace }}.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Object apiextensionsv1.JSON `json:"object"`
}

// WorkerReference names a TemporalWorkerDeployment in the same namespace.
type WorkerReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// OwnedResourceVersion is the copy of one worker version.
type OwnedResourceVersion struct {
	// BuildID of the worker version.
	BuildID string `json:"buildID"`
	// Applied: the copy was applied from the current spec (Generation).
	Applied bool `json:"applied"`
	// APIVersion and Kind of the copy, which may be an earlier spec's.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// ResourceName is the copy's name.
	// +optional
	ResourceName string `json:"resourceName,omitempty"`
	// Generation of the TemporalWorkerOwnedResource last applied.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// Hash of the object last applied; a new one is applied when it differs.
	// +optional
	Hash string `json:"hash,omitempty"`
	// AppliedAt is when the copy was last applied.
	// +optional
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`
	// Message says why the copy could not be rendered or applied.
	// +optional
	Message string `json:"message,omitempty"`
}

// TemporalWorkerOwnedResourceStatus reports the copy of each version.
type TemporalWorkerOwnedResourceStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Versions lists the copy of each worker version, by build ID. It is
	// also the controller's record of the copies it must delete later.
	// +optional
	// +listType=map
	// +listMapKey=buildID
	Versions []OwnedResourceVersion `json:"versions,omitempty"`
	// Conditions: Ready is True when every worker version with running
	// workers has its copy.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TemporalWorkerOwnedResource attaches an object, such as an autoscaler or
// a disruption budget, to each worker version of a
// TemporalWorkerDeployment. Each copy is owned by its version's Deployment
// and goes away with it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=twor
// +kubebuilder:printcolumn:name="Worker",type=string,JSONPath=`.spec.workerRef.name`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.object.kind`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TemporalWorkerOwnedResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TemporalWorkerOwnedResourceSpec   `json:"spec"`
	Status TemporalWorkerOwnedResourceStatus `json:"status,omitempty"`
}

// TemporalWorkerOwnedResourceList is a list of TemporalWorkerOwnedResources.
// +kubebuilder:object:root=true
type TemporalWorkerOwnedResourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TemporalWorkerOwnedResource `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TemporalWorkerOwnedResource{}, &TemporalWorkerOwnedResourceList{})
}

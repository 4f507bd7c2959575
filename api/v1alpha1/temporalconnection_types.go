package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TemporalConnectionSpec says how to reach a Temporal server.
// +kubebuilder:validation:XValidation:rule="!(has(self.mutualTLSSecretRef) && has(self.apiKeySecretRef))",message="mutualTLSSecretRef and apiKeySecretRef are mutually exclusive: choose one way to authenticate",fieldPath=".mutualTLSSecretRef"
type TemporalConnectionSpec struct {
	// HostPort is the Temporal frontend address, host:port.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):[0-9]{1,5}$`
	// +kubebuilder:validation:XValidation:rule="!self.matches(':[0-9]+$') || self.matches(':([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$')",message="spec.hostPort: the port must be a number from 1 to 65535"
	HostPort string `json:"hostPort"`

	// MutualTLSSecretRef names a Secret in the same namespace holding tls.crt
	// and tls.key (the client certificate) and optionally ca.crt (the CA
	// that signed the server's certificate).
	// +optional
	MutualTLSSecretRef *SecretReference `json:"mutualTLSSecretRef,omitempty"`

	// APIKeySecretRef selects the key of a Secret in the same namespace that
	// holds an API key. Connections with an API key use TLS; ca.crt in the
	// same Secret, if present, is the CA that signed the server's
	// certificate.
	// +optional
	APIKeySecretRef *SecretKeyReference `json:"apiKeySecretRef,omitempty"`

	// TLSServerName overrides the server name checked in the server's
	// certificate.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	TLSServerName string `json:"tlsServerName,omitempty"`
}

// SecretReference names a Secret in the same namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeyReference selects a key of a Secret in the same namespace.
type SecretKeyReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// TemporalConnectionStatus reports whether the controller can reach the server.
type TemporalConnectionStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready tells whether the server answered a health check
	// with the configured credentials and runs a supported version, and why
	// not.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ServerVersion is the version the Temporal server reported in the
	// last check that reached it.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`
}

// TemporalConnection is the address and credentials of a Temporal server,
// shared by the TemporalWorkerDeployments of its namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tconn
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.hostPort`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TemporalConnection struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TemporalConnectionSpec   `json:"spec"`
	Status TemporalConnectionStatus `json:"status,omitempty"`
}

// TemporalConnectionList is a list of TemporalConnections.
// +kubebuilder:object:root=true
type TemporalConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TemporalConnection `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TemporalConnection{}, &TemporalConnectionList{})
}

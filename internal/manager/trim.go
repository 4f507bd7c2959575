package manager

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What the controller keeps in memory is most of its memory. Three things
// keep it small at thousands of TWDs:
//
//   - trimObject drops from every cached object what the controller never
//     reads: managedFields (several KiB on a Deployment) and kubectl's
//     last-applied-configuration annotation (a second copy of the spec, or
//     of a Secret's data). It writes only merge patches computed between
//     two cached copies and server-side applies built from templates, so
//     what is missing from the cache is never written back.
//   - Secrets are cached as metadata only (the watches need no more), and
//     read from the API server when a connection needs one, once per
//     resourceVersion: a cluster's Secrets (Helm releases, tokens) are not
//     all held in memory, only the few that connections name.
//   - ConfigMaps are read from the API server on demand (a gate's input,
//     once per gate run), never cached.

// lastApplied is kubectl's client-side apply annotation.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trimObject is the cache's transform for every object.
func trimObject(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		return in, nil
	}
	// Checked first: setting nil on an object decoded without them
	// would allocate nothing, but keep the common path free of writes.
	if obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	if a := obj.GetAnnotations(); a[lastApplied] != "" {
		delete(a, lastApplied)
		obj.SetAnnotations(a)
	}
	return in, nil
}

// newClient is the manager's client: the default one, reading from the
// cache, except for Secrets and ConfigMaps (see above).
func newClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	cached, err := client.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	if opts.Cache == nil || opts.Cache.Reader == nil {
		return cached, nil
	}
	direct := opts
	direct.Cache = nil
	api, err := client.New(cfg, direct)
	if err != nil {
		return nil, err
	}
	return &onDemandClient{Client: cached, api: api, meta: opts.Cache.Reader, secrets: map[types.NamespacedName]*corev1.Secret{}}, nil
}

// onDemandClient reads Secrets and ConfigMaps from the API server.
type onDemandClient struct {
	client.Client
	api  client.Reader // uncached
	meta client.Reader // the cache, for Secrets' metadata

	mu sync.Mutex
	// secrets holds the Secrets read so far, by key; an entry is used
	// while the cached metadata shows the same resourceVersion.
	secrets map[types.NamespacedName]*corev1.Secret
}

func (c *onDemandClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.Secret:
		return c.getSecret(ctx, key, o, opts...)
	case *corev1.ConfigMap:
		return c.api.Get(ctx, key, obj, opts...)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *onDemandClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *corev1.SecretList, *corev1.ConfigMapList:
		return c.api.List(ctx, list, opts...)
	}
	return c.Client.List(ctx, list, opts...)
}

// getSecret asks the metadata cache which resourceVersion is current, and
// the API server for the Secret only when that is not the one read last.
// It is as fresh as a cache of whole Secrets would be: an update shows in
// the metadata watch, which also wakes the objects that use the Secret.
func (c *onDemandClient) getSecret(ctx context.Context, key client.ObjectKey, s *corev1.Secret, opts ...client.GetOption) error {
	var m metav1.PartialObjectMetadata
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err := c.meta.Get(ctx, key, &m); err != nil {
		if apierrors.IsNotFound(err) {
			c.mu.Lock()
			delete(c.secrets, key)
			c.mu.Unlock()
		}
		return err
	}
	c.mu.Lock()
	known := c.secrets[key]
	c.mu.Unlock()
	if known != nil && known.ResourceVersion == m.ResourceVersion {
		known.DeepCopyInto(s)
		return nil
	}
	if err := c.api.Get(ctx, key, s, opts...); err != nil {
		return err
	}
	c.mu.Lock()
	c.secrets[key] = s.DeepCopy()
	c.mu.Unlock()
	return nil
}

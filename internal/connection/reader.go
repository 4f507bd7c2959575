package connection

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ConfirmMissing reads from Cached and asks Live before answering NotFound.
// A TemporalConnection applied together with its TemporalWorkerDeployment
// (one Helm release, one kustomization) may not be in the cache yet when
// the TWD is first reconciled; reporting it missing then would stall the
// rollout for a moment, and kstatus-based tools (Helm 4, Flux) fail on that.
type ConfirmMissing struct {
	Cached client.Reader
	// Live is an uncached reader; nil trusts the cache.
	Live client.Reader
}

func (r ConfirmMissing) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Cached.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) && r.Live != nil {
		return r.Live.Get(ctx, key, obj, opts...)
	}
	return err
}

func (r ConfirmMissing) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.Cached.List(ctx, list, opts...)
}

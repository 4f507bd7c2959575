package harness

import (
	"context"
	"fmt"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// InformDeployments calls h for each Deployment of namespace as an
// informer sees it, the ones already there first, until ctx ends. It
// returns once that first list is done; wait blocks until ctx has ended
// and the last call to h has returned, so that no check reports after its
// test.
func InformDeployments(ctx context.Context, clients kubernetes.Interface, namespace string, h cache.ResourceEventHandler) (wait func(), err error) {
	f := informers.NewSharedInformerFactoryWithOptions(clients, 0, informers.WithNamespace(namespace))
	inf := f.Apps().V1().Deployments().Informer()
	if _, err := inf.AddEventHandler(h); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		inf.Run(ctx.Done()) // returns after the handlers have
	}()
	wait = func() { <-done }
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) { // only when ctx ended
		wait()
		return nil, fmt.Errorf("the Deployment informer of %s did not sync", namespace)
	}
	return wait, nil
}

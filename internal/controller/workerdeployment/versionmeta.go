package workerdeployment

import (
	"context"
	"maps"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// The metadata the controller gives each version it rolls out, so that
// Temporal's UI and CLI show who manages it and what it runs. The first two
// keys are the ones Temporal's server (it counts versions with
// temporal.io/controller as controller-managed) and its worker controller
// use.
const (
	MetadataController        = "temporal.io/controller"
	MetadataControllerVersion = "temporal.io/controller-version"
	MetadataTWD               = "rainbow.temporal.io/temporal-worker-deployment"
	MetadataImage             = "rainbow.temporal.io/image"
)

// versionMetadata is what the target version of twd should carry: the
// controller's identity and version, the TWD, and the worker container's
// image (the first container's, the one the build ID is named after).
func versionMetadata(identity, controllerVersion string, twd *v1alpha1.TemporalWorkerDeployment) map[string]string {
	if controllerVersion == "" {
		controllerVersion = "devel"
	}
	m := map[string]string{
		MetadataController:        identity,
		MetadataControllerVersion: controllerVersion,
		MetadataTWD:               twd.Namespace + "/" + twd.Name,
	}
	if cs := twd.Spec.Template.Spec.Containers; len(cs) > 0 {
		m[MetadataImage] = cs[0].Image
	}
	return m
}

// metadataToWrite is the entries of want that differ from, or are
// missing in, have; nil when have holds them all, so no write is due.
func metadataToWrite(want, have map[string]string) map[string]string {
	var upsert map[string]string
	for k, v := range want {
		if got, ok := have[k]; ok && got == v {
			continue
		}
		if upsert == nil {
			upsert = map[string]string{}
		}
		upsert[k] = v
	}
	return upsert
}

// writeVersionMetadata gives the target its metadata when this pass
// described it and found it missing: one write per version, made after the
// routing write so that it never delays a rollout. A version another
// manager holds is left alone. A failure is only logged: the next pass
// that describes the target tries again.
func (r *Reconciler) writeVersionMetadata(ctx context.Context, o *observation) {
	d, described := o.details[o.targetBuildID]
	if !described {
		return
	}
	if m := o.input.Temporal.ManagerIdentity; m != "" && m != o.input.Identity {
		return
	}
	want := versionMetadata(o.input.Identity, r.ControllerVersion, o.twd)
	upsert := metadataToWrite(want, d.Metadata)
	key := keyOf(o.twd)
	if w, ok := r.metadataWritten.lookup(key); upsert == nil || ok && w.build == o.targetBuildID && maps.Equal(w.entries, want) {
		// Set, or written already and a describe older than the write.
		return
	}
	if err := o.api.UpdateVersionMetadata(ctx, o.deploymentName, o.targetBuildID, upsert); err != nil {
		logf.FromContext(ctx).Info("could not write the version's metadata; the next pass that describes it retries",
			"buildID", o.targetBuildID, "error", err.Error())
		return
	}
	r.metadataWritten.remember(key, writtenMetadata{build: o.targetBuildID, entries: want})
}

// writtenMetadata is the metadata last written to a TWD's target.
type writtenMetadata struct {
	build   string
	entries map[string]string
}

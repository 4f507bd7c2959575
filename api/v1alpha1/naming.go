package v1alpha1

// WorkerDeploymentName is the name of the Temporal worker deployment the
// TemporalWorkerDeployment manages: spec.workerOptions.deploymentName, else
// "<namespace>/<name>". Every part of Rainbow (controller, webhook, tools)
// names it by this one rule.
func (t *TemporalWorkerDeployment) WorkerDeploymentName() string {
	if n := t.Spec.WorkerOptions.DeploymentName; n != "" {
		return n
	}
	return t.Namespace + "/" + t.Name
}

package planner

import "github.com/rainbow-deploy/rainbow/api/v1alpha1"

// VersionsToDescribe lists, from the worker deployment's description in
// in.Temporal, the versions whose pollers and task queues the rules read,
// so the caller describes exactly these and marks them Described:
//   - the target while it is registered and not current (workers polling
//     every task queue gate each routing step), unless another identity
//     manages the worker deployment;
//   - versions that may be deleted from Temporal, which Temporal refuses
//     while polled: no Deployment left, not the target, and drained or
//     inactive (while the TWD is deleted: any version not routed to).
//
// Every other version stays undescribed, which the rules read as "may be
// polled": nothing is deleted or routed on a guess.
func VersionsToDescribe(in Input) []string {
	t := in.Temporal
	if t == nil {
		return nil
	}
	deps := map[string]bool{}
	for _, d := range in.Deployments {
		deps[d.BuildID] = true
	}
	var out []string
	for _, tv := range t.Versions {
		tv = withOwnDrainage(tv, t)
		b := tv.BuildID
		routed := b == t.CurrentBuildID || b == t.RampingBuildID
		switch {
		case in.Deletion != nil:
			if !deps[b] && !routed {
				out = append(out, b)
			}
		case b == in.Spec.TargetBuildID:
			// Not while another identity manages the worker deployment:
			// nothing is routed to the target then.
			if b != t.CurrentBuildID && (t.ManagerIdentity == "" || t.ManagerIdentity == in.Identity) {
				out = append(out, b)
			}
		case !deps[b] && !routed && (tv.Status == v1alpha1.VersionDrained || tv.Status == v1alpha1.VersionInactive):
			out = append(out, b)
		}
	}
	return out
}

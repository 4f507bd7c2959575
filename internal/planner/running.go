package planner

// Running: the Deployment's workers run, as far as Rainbow is concerned:
// every Deployment but one the controller scaled to zero at sunset. One
// someone else scaled to zero still counts (its backlog may revive it).
func Running(d Deployment) bool {
	return !(d.Replicas == 0 && d.ScaledDownAt != nil)
}

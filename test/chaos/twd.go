package chaos

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// ProgressiveWithGate is a Progressive rollout through two short ramp
// steps behind the demo worker's RolloutGate, with short sunset delays:
// what the kill scenarios drive.
func ProgressiveWithGate(twd *v1alpha1.TemporalWorkerDeployment) {
	twd.Spec.Rollout = v1alpha1.RolloutSpec{
		Strategy: v1alpha1.StrategyProgressive,
		Steps: []v1alpha1.RolloutStep{
			{RampPercentage: 25, PauseDuration: metav1.Duration{Duration: 3 * time.Second}},
			{RampPercentage: 75, PauseDuration: metav1.Duration{Duration: 3 * time.Second}},
		},
		Gate: &v1alpha1.GateWorkflow{WorkflowType: "RolloutGate", Timeout: &metav1.Duration{Duration: 2 * time.Minute}},
	}
}

// Package notify sends rollout notifications to HTTP receivers (a generic
// webhook, Slack, CloudEvents), asynchronously: each sink has a bounded
// queue and one sender that retries with backoff, so a slow or down
// receiver never holds up a reconcile. docs/notifications.md documents
// the bodies and the delivery guarantees.
package notify

import (
	"time"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/planner"
)

// Type is what happened to a rollout.
type Type string

const (
	RolloutStarted  Type = "rollout.started"
	RolloutStep     Type = "rollout.step"
	RolloutPaused   Type = "rollout.paused"
	RolloutAborted  Type = "rollout.aborted"
	RolloutPromoted Type = "rollout.promoted"
	VersionRetired  Type = "version.retired"
	AnalysisFailed  Type = "analysis.failed"
)

// ReasonPaused is the reason of the Event recorded when a rollout turns
// paused (the Ready condition's reason, as an Event).
const ReasonPaused = v1alpha1.ReasonPaused

// Reasons maps the reasons of the Events the TemporalWorkerDeployment
// controller records to the notification each one sends; Events with
// other reasons send none. Add a line here to notify a new reason.
var Reasons = map[string]Type{
	planner.EventCreateDeployment: RolloutStarted,
	planner.EventRamp:             RolloutStep,
	ReasonPaused:                  RolloutPaused,
	v1alpha1.ReasonRolloutAborted: RolloutAborted,
	v1alpha1.ReasonGateFailed:     RolloutAborted,
	planner.EventPromote:          RolloutPromoted,
	planner.EventRolledBack:       RolloutPromoted,
	planner.EventDeleteDeployment: VersionRetired,
	v1alpha1.ReasonAnalysisFailed: AnalysisFailed,
}

// Event is one notification: the generic webhook body, and the data of
// the CloudEvents form.
type Event struct {
	// ID is unique per notification; a receiver can drop repeats by it.
	ID        string    `json:"id"`
	Type      Type      `json:"type"`
	Time      time.Time `json:"time"`
	Namespace string    `json:"namespace"`
	// Name is the TemporalWorkerDeployment's.
	Name string `json:"name"`
	// BuildID is the version the event is about (the one created, ramped,
	// promoted, aborted or retired).
	BuildID string `json:"buildID,omitempty"`
	// TargetBuildID, CurrentBuildID, RampingBuildID and RampPercentage
	// are the rollout's routing once the action that sent this took effect.
	TargetBuildID  string `json:"targetBuildID,omitempty"`
	CurrentBuildID string `json:"currentBuildID,omitempty"`
	RampingBuildID string `json:"rampingBuildID,omitempty"`
	RampPercentage int32  `json:"rampPercentage"`
	// Reason is the Kubernetes Event's reason; Message its message.
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

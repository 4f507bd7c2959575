package planner

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

// progress is where the rollout of the target stands after this reconcile.
type progress struct {
	state   progressState
	reason  string
	message string
}

type progressState int

const (
	// moving: the controller is making progress or waiting on something
	// that will happen by itself.
	moving progressState = iota
	// done: the target is current.
	done
	// blocked: a person has to act.
	blocked
)

// State is where a rollout, or a deletion, stands after a plan.
type State string

const (
	// StateMoving: the controller acts or waits on something that happens
	// by itself (workers starting, a pause, a drain).
	StateMoving State = "Moving"
	// StateComplete: the target is current.
	StateComplete State = "Complete"
	// StateBlocked: nothing moves until a person, or an outage, changes.
	StateBlocked State = "Blocked"
)

func (s progressState) exported() State {
	switch s {
	case done:
		return StateComplete
	case blocked:
		return StateBlocked
	}
	return StateMoving
}

func movingBecause(reason, msg string) progress {
	return progress{state: moving, reason: reason, message: msg}
}

func blockedBecause(reason, msg string) progress {
	return progress{state: blocked, reason: reason, message: msg}
}

func rolloutComplete(msg string) progress {
	return progress{state: done, reason: v1alpha1.ReasonRolloutComplete, message: msg}
}

// conditions maps progress to Ready and Progressing, as CD tools read them:
// Ready is true iff the target is current; Progressing is false when the
// rollout is done or blocked.
func conditions(p progress) (ready, progressing Condition) {
	switch p.state {
	case done:
		c := Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRolloutComplete, Message: p.message}
		return c, Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonRolloutComplete, Message: p.message}
	case blocked:
		c := Condition{Status: metav1.ConditionFalse, Reason: p.reason, Message: p.message}
		return c, c
	default:
		return Condition{Status: metav1.ConditionFalse, Reason: p.reason, Message: p.message},
			Condition{Status: metav1.ConditionTrue, Reason: p.reason, Message: p.message}
	}
}

// Condition is the Status, Reason and Message of a metav1.Condition.
type Condition struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

package temporal

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
)

// Sentinel errors the controller branches on, with errors.Is. The
// underlying serviceerror stays reachable with errors.As.
var (
	// ErrConflict: the conflict token is stale; someone changed the worker
	// deployment since it was described. Describe again and re-plan.
	ErrConflict = errors.New("the worker deployment changed since it was described (stale conflict token)")
	// ErrManagedByOther: another identity is the manager, so Temporal
	// refuses our writes. errors.As to *Error gives the Manager.
	ErrManagedByOther = errors.New("the worker deployment is managed by another identity")
	// ErrNotFound: the worker deployment, version or workflow does not exist.
	ErrNotFound = errors.New("not found in Temporal")
	// ErrMissingTaskQueues: the version does not poll the task queues it
	// needs yet: every task queue of the current version (to become current
	// or ramping), or the gate's task queue (to pin a gate to it; the task
	// queue learns of a new version a moment after the worker deployment
	// does). Retry after a short wait.
	ErrMissingTaskQueues = errors.New("the version does not poll the task queues it needs yet")
	// ErrVersionInUse: a version cannot be deleted because it is current,
	// ramping, draining or still polled.
	ErrVersionInUse = errors.New("the version is still in use")
	// ErrRefused: another failed precondition; the message says which.
	ErrRefused = errors.New("refused by Temporal")
	// ErrBusy: Temporal throttled the call (the worker deployment's
	// internal workflow is busy, or a rate limit). Retry shortly.
	ErrBusy = errors.New("Temporal is busy; retry shortly")
)

// Unanswered reports whether a call failed only because Temporal did not
// answer: unavailable, or no answer in time. Nothing is known to be
// wrong, and the next pass tries again.
func Unanswered(err error) bool {
	var unavailable *serviceerror.Unavailable
	var late *serviceerror.DeadlineExceeded
	return errors.As(err, &unavailable) || errors.As(err, &late) || errors.Is(err, context.DeadlineExceeded)
}

// Overloaded: Temporal refused the call because the namespace or the
// server is at a limit of load (rate, concurrency, persistence, overload),
// which fewer calls in flight relieve. A busy worker deployment (one
// workflow applying a change), a full store or the worker-deployment
// count limit is not load.
func Overloaded(err error) bool {
	var exhausted *serviceerror.ResourceExhausted
	if !errors.As(err, &exhausted) {
		return false
	}
	switch exhausted.Cause {
	case enumspb.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW, enumspb.RESOURCE_EXHAUSTED_CAUSE_PERSISTENCE_STORAGE_LIMIT,
		enumspb.RESOURCE_EXHAUSTED_CAUSE_WORKER_DEPLOYMENT_LIMITS:
		return false
	}
	return true
}

// RetryAfter is how soon to retry a call Temporal throttled: a worker
// deployment's internal workflow that is busy with a routing change frees
// up within a few hundred milliseconds, while a rate limit needs a second.
func RetryAfter(err error) time.Duration {
	var busy *serviceerror.ResourceExhausted
	if errors.As(err, &busy) && (busy.Cause == enumspb.RESOURCE_EXHAUSTED_CAUSE_BUSY_WORKFLOW ||
		busy.Cause == enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT) {
		return 200 * time.Millisecond
	}
	return time.Second
}

// Error is a failed Temporal call. Kind is one of the sentinels, or nil
// for errors the controller only retries (unavailable, rate limited, ...).
type Error struct {
	Op         string // the wrapper method, e.g. "SetCurrent"
	Deployment string
	BuildID    string
	Kind       error
	// Manager is the identity that manages the worker deployment, when
	// Kind is ErrManagedByOther and the server named it.
	Manager string
	Err     error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Deployment != "" {
		fmt.Fprintf(&b, " worker deployment %s", e.Deployment)
	}
	if e.BuildID != "" {
		fmt.Fprintf(&b, " version %s", e.BuildID)
	}
	b.WriteString(": ")
	if e.Kind != nil {
		b.WriteString(e.Kind.Error())
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap gives both the sentinel and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// The server's texts (service/worker/workerdeployment/util.go and
// workflow.go in go.temporal.io/server 1.32): all these refusals arrive as
// FailedPrecondition, so the message tells them apart.
var managerRE = regexp.MustCompile(`ManagerIdentity '([^']*)' is set and does not match`)

func wrapErr(op, deployment, buildID string, err error) error {
	if err == nil {
		return nil
	}
	e := &Error{Op: op, Deployment: deployment, BuildID: buildID, Err: err}
	var (
		fp       *serviceerror.FailedPrecondition
		nf       *serviceerror.NotFound
		nsNF     *serviceerror.NamespaceNotFound
		started  *serviceerror.WorkflowExecutionAlreadyStarted
		internal *serviceerror.Internal
		busy     *serviceerror.ResourceExhausted
	)
	switch {
	case errors.As(err, &nf):
		e.Kind = ErrNotFound
	case errors.As(err, &fp):
		msg := fp.Error()
		switch {
		case strings.Contains(msg, "conflict token"):
			e.Kind = ErrConflict
		case managerRE.MatchString(msg):
			e.Kind = ErrManagedByOther
			e.Manager = managerRE.FindStringSubmatch(msg)[1]
		case strings.Contains(msg, "missing active task queues"),
			strings.Contains(msg, "is not present in task queue"):
			e.Kind = ErrMissingTaskQueues
		case strings.Contains(msg, "cannot be deleted since"):
			e.Kind = ErrVersionInUse
		default:
			e.Kind = ErrRefused
		}
	case errors.As(err, &busy):
		e.Kind = ErrBusy
	case errors.As(err, &nsNF), errors.As(err, &started):
		// Not a worker deployment's absence: callers must not read these
		// as "does not exist".
	case errors.As(err, &internal):
		// Version workflow refusals that are not mapped to a code reach us
		// as Internal with the same texts.
		if strings.Contains(internal.Error(), "cannot be deleted since") {
			e.Kind = ErrVersionInUse
		}
	}
	return e
}

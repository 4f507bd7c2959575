package drain

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func runs(n int, prefix string) []Run {
	out := make([]Run, n)
	for i := range out {
		out[i] = Run{WorkflowID: fmt.Sprintf("%s-wf-%d", prefix, i), RunID: fmt.Sprintf("%s-run-%d", prefix, i)}
	}
	return out
}

func TestRecordDone(t *testing.T) {
	r := Record{BuildID: "v1"}
	r = r.Done(OpCancel, runs(60, "a"), t0)
	r = r.Done(OpTerminate, runs(60, "b"), t0)
	r = r.Done(OpSignal, runs(2, "c"), t0.Add(time.Second))
	if r.CancelRequested != 60 || r.Terminated != 60 || r.Signalled != 2 || !r.LastActionAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("counts = %+v", r)
	}
	if len(r.StoppedRuns) != maxHandledRuns || r.StoppedRuns[maxHandledRuns-1] != RunKey("b-run-59") || r.StoppedRuns[0] != RunKey("a-run-20") {
		t.Fatalf("StoppedRuns keeps the newest %d: %d, first %s", maxHandledRuns, len(r.StoppedRuns), r.StoppedRuns[0])
	}
	if len(r.SignalledRuns) != 2 {
		t.Fatalf("SignalledRuns = %v", r.SignalledRuns)
	}
	same := r.Done(OpCancel, nil, t0.Add(time.Hour))
	if !reflect.DeepEqual(same, r) {
		t.Fatalf("nothing done changed the record")
	}
}

package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/notify"
	"github.com/rainbow-deploy/rainbow/test/harness"
)

// receivers are the real HTTP receivers of the in-process controller's
// notification sinks, one per body form, up for the whole package run.
var receivers = map[notify.Format]*receiver{}

// startReceivers listens for each form and returns the sinks naming them.
func startReceivers() ([]notify.SinkConfig, func(), error) {
	var sinks []notify.SinkConfig
	stop := func() {
		for _, r := range receivers {
			r.stop()
		}
	}
	for _, f := range []notify.Format{notify.FormatWebhook, notify.FormatSlack, notify.FormatCloudEvents} {
		r := &receiver{format: f, addr: harness.FreeAddr()}
		if err := r.listen(); err != nil {
			stop()
			return nil, nil, err
		}
		receivers[f] = r
		// Enough attempts to outlast the test's receiver outage (1+2+4+...s).
		sinks = append(sinks, notify.SinkConfig{Name: "test-" + string(f), Format: f, URL: "http://" + r.addr + "/hook?token=not-logged",
			Queue: notify.DefaultQueue, Attempts: 10, Timeout: 5 * time.Second})
	}
	return sinks, stop, nil
}

// received is one notification as its receiver parsed it.
type received struct {
	notify.Event
	// at is when the receiver answered it.
	at time.Time
}

// receiver is a plain net/http server that records what it gets; it can
// go down (its port closed) and come back, or hang.
type receiver struct {
	format notify.Format
	addr   string

	mu   sync.Mutex
	srv  *http.Server
	hang chan struct{} // non-nil: requests wait until it closes
	// hung are the notifications that came while it hung.
	hung []notify.Event
	got  []received
	errs []string
}

func (r *receiver) listen() error {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return nil
}

func (r *receiver) stop() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// down closes the port: connections are refused until up.
func (r *receiver) down() { r.stop() }

func (r *receiver) up(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := r.listen()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("listen on %s again: %v", r.addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hangFor makes requests wait until the returned release is called.
func (r *receiver) hangFor() (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.hang = ch
	r.mu.Unlock()
	return sync.OnceFunc(func() {
		r.mu.Lock()
		r.hang = nil
		r.mu.Unlock()
		close(ch)
	})
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	var e notify.Event
	if err == nil {
		e, err = r.parse(req.Header.Get("Content-Type"), b)
	}
	r.mu.Lock()
	hang := r.hang
	if hang != nil {
		r.hung = append(r.hung, e)
	}
	r.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-req.Context().Done():
			return // the sender gave up on this attempt
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, fmt.Sprintf("%v: %s", err, b))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.got = append(r.got, received{Event: e, at: time.Now()})
}

// slackTitles: the Slack form names the type in its text.
var slackTitles = map[string]notify.Type{
	"rollout started": notify.RolloutStarted, "ramp step": notify.RolloutStep, "rollout paused": notify.RolloutPaused,
	"rollout aborted": notify.RolloutAborted, "version promoted": notify.RolloutPromoted, "version retired": notify.VersionRetired,
	"analysis failed": notify.AnalysisFailed,
}

// parse reads a body of the receiver's form, as a receiver of that form
// would; the Slack form gives only the type, namespace and name.
func (r *receiver) parse(contentType string, b []byte) (notify.Event, error) {
	var e notify.Event
	mt, _, _ := mime.ParseMediaType(contentType)
	switch r.format {
	case notify.FormatWebhook:
		if mt != "application/json" {
			return e, fmt.Errorf("content type %q", contentType)
		}
		err := json.Unmarshal(b, &e)
		return e, err
	case notify.FormatCloudEvents:
		var ce struct {
			SpecVersion, ID, Source, Type, Time string
			Data                                notify.Event
		}
		if mt != "application/cloudevents+json" {
			return e, fmt.Errorf("content type %q", contentType)
		}
		if err := json.Unmarshal(b, &ce); err != nil {
			return e, err
		}
		if ce.SpecVersion != "1.0" || ce.ID == "" || ce.Source == "" || ce.Time == "" || ce.Type != "io.rainbow."+string(ce.Data.Type) {
			return e, errors.New("not a CloudEvent of a rollout")
		}
		return ce.Data, nil
	default:
		var m struct {
			Text   string            `json:"text"`
			Blocks []json.RawMessage `json:"blocks"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return e, err
		}
		// "namespace/name: title: message"
		parts := strings.SplitN(m.Text, ": ", 3)
		if len(parts) != 3 || len(m.Blocks) == 0 {
			return e, errors.New("not a Slack message of a rollout")
		}
		e.Namespace, e.Name, _ = strings.Cut(parts[0], "/")
		e.Type, e.Message = slackTitles[parts[1]], parts[2]
		return e, nil
	}
}

// of is what the receiver got for one TWD, in order, and any bodies it
// could not read.
func (r *receiver) of(namespace, name string) ([]received, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []received
	for _, g := range r.got {
		if g.Namespace == namespace && g.Name == name {
			out = append(out, g)
		}
	}
	return out, slices.Clone(r.errs)
}

// note is a notification as the test expects it.
type note struct {
	typ     notify.Type
	buildID string
}

func (n note) String() string { return string(n.typ) + " " + n.buildID }

// notes are a receiver's notifications of the TWD from the from-th on,
// build IDs left out for the Slack form, which says them in prose only.
func (r *receiver) notes(rr *rollout, from int) []note {
	got, errs := r.of(rr.Namespace, rr.Name)
	if len(errs) > 0 {
		rr.Fatalf("%s receiver could not read: %v", r.format, errs)
	}
	var out []note
	for _, g := range got[min(from, len(got)):] {
		n := note{typ: g.Type, buildID: g.BuildID}
		if r.format == notify.FormatSlack {
			n.buildID = ""
		}
		out = append(out, n)
	}
	return out
}

// waitNotes waits until each receiver got want (build IDs dropped for
// Slack), in this order, after its first from[form] notifications.
func waitNotes(rr *rollout, timeout time.Duration, from map[notify.Format]int, want ...note) {
	rr.Helper()
	for f, r := range receivers {
		w := slices.Clone(want)
		if f == notify.FormatSlack {
			for i := range w {
				w[i].buildID = ""
			}
		}
		rr.Eventually(timeout, fmt.Sprintf("%s receiver: %v", f, w), func() (bool, string) {
			got := r.notes(rr, from[f])
			return slices.Equal(got, w), fmt.Sprintf("%v", got)
		})
	}
}

func counts(rr *rollout) map[notify.Format]int {
	out := map[notify.Format]int{}
	for f, r := range receivers {
		got, _ := r.of(rr.Namespace, rr.Name)
		out[f] = len(got)
	}
	return out
}

// TestNotificationsFollowTheRollout: a Progressive rollout notifies each
// form's receiver of start, step, promotion and retirement, in order; a
// receiver that was down gets what it missed once it is back; and one
// that hangs holds up no rollout.
func TestNotificationsFollowTheRollout(t *testing.T) {
	// Not parallel: it takes the package's shared receivers down and hangs
	// them, so other tests' notifications would queue ahead of its own.
	r := newRollout(env.NewTest(t), "notify")
	twd := r.Spec("v1")
	twd.Spec.Rollout = v1alpha1.RolloutSpec{Strategy: v1alpha1.StrategyProgressive, Steps: steps([]int32{50}, 2*time.Second)}
	twd.Spec.Sunset.ScaledownDelay = &metav1.Duration{Duration: 2 * time.Second}
	twd.Spec.Sunset.DeleteDelay = &metav1.Duration{Duration: 2 * time.Second}
	twd.Spec.Replicas = ptr.To[int32](1)
	v1 := r.Create(twd)
	r.WaitCurrent(5*time.Minute, v1)
	v2 := r.SetImage("v2")
	r.WaitCurrent(5*time.Minute, v2)
	// The first version has nobody to share traffic with: no step.
	waitNotes(r, 3*time.Minute, nil,
		note{notify.RolloutStarted, v1}, note{notify.RolloutPromoted, v1},
		note{notify.RolloutStarted, v2}, note{notify.RolloutStep, v2}, note{notify.RolloutPromoted, v2},
		note{notify.VersionRetired, v1})
	if got, _ := receivers[notify.FormatWebhook].of(r.Namespace, r.Name); got[3].RampPercentage != 50 || got[3].CurrentBuildID != v1 ||
		got[3].RampingBuildID != v2 || got[4].CurrentBuildID != v2 || got[4].RampingBuildID != "" {
		t.Errorf("the step and the promotion say %+v and %+v, want v2 ramping 50%% with v1 current, then v2 current", got[3].Event, got[4].Event)
	}

	// Down: the webhook receiver's port is closed for the next rollout,
	// which goes on; once it is back, the retries deliver what it missed.
	web := receivers[notify.FormatWebhook]
	before := counts(r)
	web.down()
	wentUp := false
	defer func() {
		if !wentUp {
			web.up(t)
		}
	}()
	v3 := r.SetImage("v3")
	r.WaitCurrent(5*time.Minute, v3)
	if got := web.notes(r, before[notify.FormatWebhook]); len(got) != 0 {
		t.Fatalf("the receiver that is down got %v", got)
	}
	back := time.Now()
	web.up(t)
	wentUp = true
	waitNotes(r, 2*time.Minute, before,
		note{notify.RolloutStarted, v3}, note{notify.RolloutStep, v3}, note{notify.RolloutPromoted, v3}, note{notify.VersionRetired, v2})
	got, _ := web.of(r.Namespace, r.Name)
	if started := got[before[notify.FormatWebhook]]; !started.Time.Before(back) || started.at.Before(back) {
		t.Errorf("rollout.started of %s was sent at %s and received at %s, want sent while the receiver was down (until %s) and received after",
			v3, started.Time, started.at, back)
	}

	// Hanging: every receiver holds each request; the next rollout
	// completes all the same.
	before = counts(r)
	var releases []func()
	for _, rc := range receivers {
		releases = append(releases, rc.hangFor())
	}
	release := func() {
		for _, f := range releases {
			f()
		}
	}
	defer release()
	v4 := r.SetImage("v4")
	r.WaitCurrent(5*time.Minute, v4)
	for f, rc := range receivers {
		rc.mu.Lock()
		hung := slices.ContainsFunc(rc.hung, func(e notify.Event) bool { return e.Namespace == r.Namespace && e.Name == r.Name })
		rc.mu.Unlock()
		if !hung {
			t.Errorf("no notification of this rollout reached the hanging %s receiver: it held up nothing", f)
		}
	}
	if now := counts(r); !maps.Equal(now, before) {
		t.Errorf("receivers answered while they hung: %v, before %v", now, before)
	}
	release()
}

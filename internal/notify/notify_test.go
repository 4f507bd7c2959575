package notify

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var promoted = Event{
	ID: "5f0c3b1e-2d4a-4c8e-9b7a-1e2f3a4b5c6d", Type: RolloutPromoted,
	Time:      time.Date(2026, 11, 27, 6, 30, 0, 0, time.UTC),
	Namespace: "shop", Name: "orders",
	BuildID: "v2-8a41f0c6d2b9e375", TargetBuildID: "v2-8a41f0c6d2b9e375", CurrentBuildID: "v2-8a41f0c6d2b9e375",
	Reason: "Promote", Message: "making version v2-8a41f0c6d2b9e375 current after the last ramp step",
}

func TestBodiesMatchTheDocumentedForms(t *testing.T) {
	step := promoted
	step.Type, step.Reason, step.CurrentBuildID = RolloutStep, "Ramp", "v1-0c3e5b9a2d7f4e61"
	step.RampingBuildID, step.RampPercentage = "v2-8a41f0c6d2b9e375", 25
	step.Message = "ramping 25% of new workflows to version v2-8a41f0c6d2b9e375"
	for name, c := range map[string]struct {
		f     Format
		e     Event
		ctype string
	}{
		"webhook-promoted":     {FormatWebhook, promoted, "application/json"},
		"webhook-step":         {FormatWebhook, step, "application/json"},
		"slack-step":           {FormatSlack, step, "application/json"},
		"cloudevents-promoted": {FormatCloudEvents, promoted, "application/cloudevents+json; charset=utf-8"},
	} {
		t.Run(name, func(t *testing.T) {
			b, ctype, err := body(c.f, c.e)
			if err != nil {
				t.Fatal(err)
			}
			if ctype != c.ctype {
				t.Errorf("content type %q, want %q", ctype, c.ctype)
			}
			var indented map[string]any
			if err := json.Unmarshal(b, &indented); err != nil {
				t.Fatal(err)
			}
			got, _ := json.MarshalIndent(indented, "", "  ")
			got = append(got, '\n')
			golden := filepath.Join("testdata", name+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("body differs from %s (go test -update rewrites it):\n%s", golden, got)
			}
		})
	}
}

func TestCloudEventsTypeAndRequiredAttributes(t *testing.T) {
	b, _, err := body(FormatCloudEvents, promoted)
	if err != nil {
		t.Fatal(err)
	}
	var ce map[string]any
	if err := json.Unmarshal(b, &ce); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"specversion", "id", "source", "type", "time", "data"} {
		if ce[k] == nil || ce[k] == "" {
			t.Errorf("attribute %s missing: %s", k, b)
		}
	}
	if ce["type"] != "io.rainbow.rollout.promoted" || ce["specversion"] != "1.0" {
		t.Errorf("type %v, specversion %v", ce["type"], ce["specversion"])
	}
}

func TestEveryTypeHasASlackTitle(t *testing.T) {
	for _, typ := range Reasons {
		if titles[typ] == "" {
			t.Errorf("no title for %s", typ)
		}
	}
}

func TestRetryScheduleDoublesUpToTheCap(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		if got := backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %s, want %s", i+1, got, w)
		}
	}
	if got := backoff(1000); got != maxBackoff {
		t.Errorf("backoff(1000) = %s, want the cap %s", got, maxBackoff)
	}
}

func TestParseSink(t *testing.T) {
	for in, want := range map[string]SinkConfig{
		"url=https://hooks.example/T1/B2?token=a,b,format=slack": {Format: FormatSlack, URL: "https://hooks.example/T1/B2?token=a,b",
			Queue: DefaultQueue, Attempts: DefaultAttempts, Timeout: DefaultTimeout},
		"name=ops,url-file=/etc/rainbow/notify/url,format=cloudevents,queue=10,attempts=3,timeout=2s": {Name: "ops", Format: FormatCloudEvents,
			URLFile: "/etc/rainbow/notify/url", Queue: 10, Attempts: 3, Timeout: 2 * time.Second},
		"url=http://receiver:8080/": {Format: FormatWebhook, URL: "http://receiver:8080/", Queue: DefaultQueue, Attempts: DefaultAttempts, Timeout: DefaultTimeout},
	} {
		got, err := ParseSink(in)
		if err != nil || got != want {
			t.Errorf("ParseSink(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"format=slack":                      "exactly one of url and url-file",
		"url=https://x/,url-file=/f":        "exactly one of url and url-file",
		"url=https://x/,format=teams":       `format "teams"`,
		"url=ftp://secret-token@x/":         "absolute http or https URL",
		"url=https://x/,queue=0":            "queue",
		"https://secret-token.example/,x=y": "expected key=value",
		"url=https://x/,timeout=soon":       "timeout",
		"url=https://x/,url=https://y/":     "url given twice",
	} {
		_, err := ParseSink(in)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseSink(%q) = %v, want an error with %q", in, err, msg)
		}
		if err != nil && strings.Contains(err.Error(), "secret-token") {
			t.Errorf("ParseSink(%q): the error shows the URL: %v", in, err)
		}
	}
}

// fastSink is a sink whose retries do not wait.
func fastSink(t *testing.T, cfg SinkConfig) *sink {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = t.Name()
	}
	cfg.Format = FormatWebhook
	cfg.Queue, cfg.Attempts = max(cfg.Queue, 1), max(cfg.Attempts, 1)
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	s := newSink(cfg, logr.Discard())
	s.wait = func(ctx context.Context, _ time.Duration) bool { return ctx.Err() == nil }
	return s
}

func TestRetriesUntilTheReceiverAnswers(t *testing.T) {
	var calls atomic.Int32
	got := make(chan Event, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var e Event
		_ = json.NewDecoder(r.Body).Decode(&e)
		got <- e
	}))
	defer srv.Close()
	s := fastSink(t, SinkConfig{URL: srv.URL, Attempts: 5})
	if out := s.deliver(t.Context(), promoted); out != OutcomeSent {
		t.Fatalf("outcome %s after %d calls, want sent", out, calls.Load())
	}
	if e := <-got; e.ID != promoted.ID || calls.Load() != 3 {
		t.Errorf("received %+v after %d calls, want the event on the third", e, calls.Load())
	}
}

func TestGivesUpAfterTheAttemptsAndOnARefusal(t *testing.T) {
	for name, c := range map[string]struct {
		status, attempts, calls int
	}{
		"down":    {http.StatusBadGateway, 4, 4},
		"refused": {http.StatusBadRequest, 4, 1},
	} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.WriteHeader(c.status)
			}))
			defer srv.Close()
			s := fastSink(t, SinkConfig{URL: srv.URL, Attempts: c.attempts})
			if out := s.deliver(t.Context(), promoted); out != OutcomeFailed || int(calls.Load()) != c.calls {
				t.Errorf("outcome %s after %d calls, want failed after %d", out, calls.Load(), c.calls)
			}
		})
	}
}

func TestAHangingReceiverNeverBlocksNotify(t *testing.T) {
	release := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(1)
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(arrived.Done)
		<-release
	}))
	defer srv.Close()
	defer close(release)
	n := New([]SinkConfig{{Name: "hanging", Format: FormatWebhook, URL: srv.URL, Queue: 2, Attempts: 1, Timeout: time.Minute}}, logr.Discard())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = n.Start(ctx) }()
	dropped := testutil.ToFloat64(notifications.WithLabelValues("hanging", OutcomeDropped))

	n.Notify(promoted) // taken by the sender, which hangs on it
	arrived.Wait()
	done := make(chan struct{})
	go func() {
		for range 100 {
			n.Notify(promoted)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Notify blocked while the receiver hangs")
	}
	if got := testutil.ToFloat64(notifications.WithLabelValues("hanging", OutcomeDropped)) - dropped; got != 98 {
		t.Errorf("%v dropped, want 98 (100 sent, 2 queued)", got)
	}
}

func TestAURLFromAFileIsReadAndNeverShown(t *testing.T) {
	received := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received <- r.URL.Query().Get("token")
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(file, []byte(srv.URL+"/hook?token=s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := fastSink(t, SinkConfig{URLFile: file})
	if out := s.deliver(t.Context(), promoted); out != OutcomeSent || <-received != "s3cret" {
		t.Fatalf("outcome %s, want the URL of the file used", out)
	}

	// A receiver that is gone: the error names neither host nor token.
	srv.Close()
	if _, err := s.post(t.Context(), []byte("{}"), "application/json"); err == nil || strings.Contains(err.Error(), "s3cret") ||
		strings.Contains(err.Error(), strings.TrimPrefix(srv.URL, "http://")) {
		t.Errorf("error %v: want one that does not show the URL", err)
	}
}

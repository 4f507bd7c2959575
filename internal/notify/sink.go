package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Defaults of a sink's delivery.
const (
	DefaultQueue    = 256
	DefaultAttempts = 6
	DefaultTimeout  = 10 * time.Second
	// Retries wait 1s, 2s, 4s, 8s, ... up to maxBackoff.
	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
)

// Outcomes of rainbow_notifications_total.
const (
	OutcomeSent = "sent"
	// OutcomeFailed: every attempt failed, or the receiver refused it
	// (a 4xx other than 408 and 429).
	OutcomeFailed = "failed"
	// OutcomeDropped: the sink's queue was full, or the controller stopped
	// with the notification still queued.
	OutcomeDropped = "dropped"
)

var notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "rainbow_notifications_total",
	Help: "Rollout notifications by sink and outcome: sent, failed (every attempt failed or the receiver refused it) or dropped (the sink's queue was full).",
}, []string{"sink", "outcome"})

func init() { metrics.Registry.MustRegister(notifications) }

// SinkConfig is one receiver, from one --notify flag.
type SinkConfig struct {
	// Name labels the sink in logs and metrics (never the URL, which may
	// hold a token); defaults to the format and the sink's position.
	Name   string
	Format Format
	// URL, or URLFile: a file holding the URL (a mounted Secret), read
	// before each attempt so a rotated Secret takes effect.
	URL     string
	URLFile string
	// Queue is how many notifications wait for delivery before new ones
	// are dropped; Attempts bounds the tries of each; Timeout each try.
	Queue    int
	Attempts int
	Timeout  time.Duration
}

// ParseSink reads a --notify value: comma-separated key=value pairs,
// url or url-file, and optionally format (webhook, slack, cloudevents),
// name, queue, attempts, timeout. A comma not followed by a known key
// belongs to the value before it, so a URL may hold commas.
func ParseSink(s string) (SinkConfig, error) {
	c := SinkConfig{Format: FormatWebhook}
	var key string
	vals := map[string]string{}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if ok && sinkKeys[k] {
			if _, dup := vals[k]; dup {
				return c, fmt.Errorf("%s given twice", k)
			}
			key, vals[k] = k, v
			continue
		}
		if key == "" {
			return c, fmt.Errorf("%q: expected key=value with key one of url, url-file, format, name, queue, attempts, timeout", redact(part))
		}
		vals[key] += "," + part
	}
	c.Name, c.URL, c.URLFile = vals["name"], vals["url"], vals["url-file"]
	if f, ok := vals["format"]; ok {
		c.Format = Format(f)
	}
	switch c.Format {
	case FormatWebhook, FormatSlack, FormatCloudEvents:
	default:
		return c, fmt.Errorf("format %q: use webhook, slack or cloudevents", c.Format)
	}
	if (c.URL == "") == (c.URLFile == "") {
		return c, errors.New("give exactly one of url and url-file")
	}
	if c.URL != "" {
		if err := checkURL(c.URL); err != nil {
			return c, err
		}
	}
	var err error
	if c.Queue, err = positive(vals, "queue", DefaultQueue); err != nil {
		return c, err
	}
	if c.Attempts, err = positive(vals, "attempts", DefaultAttempts); err != nil {
		return c, err
	}
	c.Timeout = DefaultTimeout
	if v, ok := vals["timeout"]; ok {
		if c.Timeout, err = time.ParseDuration(v); err != nil || c.Timeout <= 0 {
			return c, fmt.Errorf("timeout %q: want a positive duration such as 10s", v)
		}
	}
	return c, nil
}

var sinkKeys = map[string]bool{"url": true, "url-file": true, "format": true, "name": true, "queue": true, "attempts": true, "timeout": true}

func positive(vals map[string]string, key string, def int) (int, error) {
	v, ok := vals[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s %q: want a positive number", key, v)
	}
	return n, nil
}

// checkURL never says what the URL is: it may hold a token.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("the notification URL must be an absolute http or https URL")
	}
	return nil
}

// redact keeps a key but not a value, which may be a URL with a token.
func redact(part string) string {
	if k, _, ok := strings.Cut(part, "="); ok {
		return k + "=..."
	}
	return "..."
}

// backoff is the wait before attempt n+1 (n >= 1) after n failed.
func backoff(n int) time.Duration {
	d := firstBackoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// sink delivers one receiver's notifications in order, one at a time.
type sink struct {
	cfg    SinkConfig
	queue  chan Event
	client *http.Client
	log    logr.Logger
	// wait sleeps between attempts; tests shorten it.
	wait func(ctx context.Context, d time.Duration) bool
}

func newSink(cfg SinkConfig, log logr.Logger) *sink {
	return &sink{
		cfg: cfg, queue: make(chan Event, cfg.Queue), log: log.WithValues("sink", cfg.Name),
		client: &http.Client{Timeout: cfg.Timeout},
		wait:   sleep,
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// enqueue never blocks: a full queue drops e.
func (s *sink) enqueue(e Event) {
	select {
	case s.queue <- e:
	default:
		notifications.WithLabelValues(s.cfg.Name, OutcomeDropped).Inc()
		s.log.Info("notification dropped: the sink's queue is full", "type", e.Type, "namespace", e.Namespace, "name", e.Name)
	}
}

// run delivers until ctx ends; what is still queued then is dropped.
func (s *sink) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			if n := len(s.queue); n > 0 {
				notifications.WithLabelValues(s.cfg.Name, OutcomeDropped).Add(float64(n))
			}
			return
		case e := <-s.queue:
			notifications.WithLabelValues(s.cfg.Name, s.deliver(ctx, e)).Inc()
		}
	}
}

// deliver tries e up to Attempts times and says how it ended.
func (s *sink) deliver(ctx context.Context, e Event) string {
	b, contentType, err := body(s.cfg.Format, e)
	if err != nil {
		s.log.Error(err, "notification not encoded", "type", e.Type)
		return OutcomeFailed
	}
	for n := 1; ; n++ {
		retry, err := s.post(ctx, b, contentType)
		if err == nil {
			return OutcomeSent
		}
		log := s.log.WithValues("type", e.Type, "namespace", e.Namespace, "name", e.Name, "attempt", n)
		if !retry || n >= s.cfg.Attempts {
			log.Error(err, "notification not delivered")
			return OutcomeFailed
		}
		log.V(1).Info("notification not delivered yet; retrying", "error", err.Error(), "in", backoff(n))
		if !s.wait(ctx, backoff(n)) {
			return OutcomeDropped
		}
	}
}

// post sends one attempt; its errors never hold the URL.
func (s *sink) post(ctx context.Context, b []byte, contentType string) (retry bool, err error) {
	target, err := s.url()
	if err != nil {
		return true, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(b))
	if err != nil {
		return false, errors.New("the notification URL is not valid")
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", "rainbow-notify")
	resp, err := s.client.Do(req)
	if err != nil {
		return true, withoutURL(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return false, fmt.Errorf("the receiver refused the notification: %s", resp.Status)
}

// withoutURL keeps what went wrong, not where: the URL's path and query
// may hold a token, and its host shows whose receiver it is.
func withoutURL(err error) error {
	if oe, ok := errors.AsType[*net.OpError](err); ok {
		return fmt.Errorf("%s: %w", oe.Op, oe.Err)
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

func (s *sink) url() (string, error) {
	if s.cfg.URLFile == "" {
		return s.cfg.URL, nil
	}
	b, err := os.ReadFile(s.cfg.URLFile)
	if err != nil {
		return "", fmt.Errorf("read the notification URL: %w", err)
	}
	u := strings.TrimSpace(string(b))
	if err := checkURL(u); err != nil {
		return "", fmt.Errorf("%s: %w", s.cfg.URLFile, err)
	}
	return u, nil
}

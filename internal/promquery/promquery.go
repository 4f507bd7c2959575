// Package promquery renders and runs the PromQL queries of the rollout
// analysis' Prometheus checks (kind Prometheus): the template fields a
// query may use, the check the webhook makes of a template, and the
// client of the one Prometheus server the operator configures
// (--analysis-prometheus-url).
package promquery

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Fields are what a query template may name.
type Fields struct {
	// BuildID is the target version's build ID, CurrentBuildID the
	// current version's (empty when none is).
	BuildID, CurrentBuildID string
	// DeploymentName is the Temporal worker deployment's name.
	DeploymentName string
	// Namespace and Name are the TemporalWorkerDeployment's.
	Namespace, Name string
	// Window is the time since the target started ramping, as a PromQL
	// duration (whole seconds, at least 1s): "[{{ .Window }}]".
	Window string
}

// WindowOf is the Window field for a window that started since before now.
func WindowOf(since, now time.Time) string {
	s := int64(math.Ceil(now.Sub(since).Seconds()))
	return fmt.Sprintf("%ds", max(s, 1))
}

// Render runs query as a template on f.
func Render(query string, f Fields) (string, error) {
	t, err := parseQuery(query)
	if err != nil {
		return "", err
	}
	b := &bounded{}
	if err := t.Execute(b, f); err != nil {
		return "", err
	}
	return b.String(), nil
}

// MaxLen bounds a rendered query (a query of 4096 bytes could name the
// longest field a thousand times).
const MaxLen = 64 << 10

type bounded struct{ strings.Builder }

func (b *bounded) Write(p []byte) (int, error) {
	if b.Len()+len(p) > MaxLen {
		return 0, fmt.Errorf("the rendered query is longer than %d bytes", MaxLen)
	}
	return b.Builder.Write(p)
}

// parseQuery parses query and refuses anything but text and {{ .Field }}
// substitutions of Fields: a query needs no more, and so no template can
// loop, branch on a field it misspelled or make a huge string in the
// controller.
func parseQuery(query string) (*template.Template, error) {
	t, err := template.New("query").Option("missingkey=error").Parse(query)
	if err != nil {
		return nil, err
	}
	if len(t.Templates()) > 1 {
		return nil, errors.New("template: define and block are not supported; only {{ .Field }} substitutions are")
	}
	if t.Tree == nil {
		return t, nil
	}
	for _, n := range t.Tree.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
		case *parse.ActionNode:
			name := substitution(n)
			if name == "" {
				return nil, fmt.Errorf("template: %s is not supported; only {{ .Field }} substitutions are", n)
			}
			if !fieldNames[name] {
				return nil, fmt.Errorf("template: unknown field .%s", name)
			}
		default:
			return nil, fmt.Errorf("template: %s is not supported; only {{ .Field }} substitutions are", n)
		}
	}
	return t, nil
}

// substitution is the field an action {{ .Field }} names; empty if the
// action is anything else.
func substitution(n *parse.ActionNode) string {
	if p := n.Pipe; p == nil || len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return ""
	}
	f, ok := n.Pipe.Cmds[0].Args[0].(*parse.FieldNode)
	if !ok || len(f.Ident) != 1 {
		return ""
	}
	return f.Ident[0]
}

// fieldNames are the fields of Fields.
var fieldNames = func() map[string]bool {
	names := map[string]bool{}
	for f := range reflect.TypeFor[Fields]().Fields() {
		names[f.Name] = true
	}
	return names
}()

// Check says why query is not a template Render can run for every
// version: it does not parse, names a field Fields lacks, or does more
// than substitute fields. Nil when it is fine.
func Check(query string) error {
	_, err := parseQuery(query)
	return err
}

// Config is where Prometheus is, as the operator configures it.
type Config struct {
	// URL is Prometheus' base URL (http or https); empty: no Prometheus,
	// every Prometheus check is inconclusive.
	URL string
	// BearerTokenFile holds a token sent as "Authorization: Bearer",
	// read on each request so that a rotated token is used at once.
	BearerTokenFile string
	// CAFile holds the PEM certificates that verify an https URL; empty
	// uses the system's.
	CAFile string
}

// Client queries one Prometheus server.
type Client struct {
	api promv1.API
}

// New makes a client for c, or nil when c names no URL.
func New(c Config) (*Client, error) {
	if c.URL == "" {
		return nil, nil
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("Prometheus URL %q: want http(s)://host[:port][/path]", c.URL)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("Prometheus CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("Prometheus CA file %s holds no PEM certificate", c.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	var rt http.RoundTripper = tr
	if c.BearerTokenFile != "" {
		if _, err := os.ReadFile(c.BearerTokenFile); err != nil {
			return nil, fmt.Errorf("Prometheus bearer token file: %w", err)
		}
		rt = bearer{file: c.BearerTokenFile, next: tr}
	}
	api, err := promapi.NewClient(promapi.Config{Address: c.URL, RoundTripper: rt})
	if err != nil {
		return nil, err
	}
	return &Client{api: promv1.NewAPI(api)}, nil
}

type bearer struct {
	file string
	next http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := os.ReadFile(b.file)
	if err != nil {
		return nil, fmt.Errorf("Prometheus bearer token file: %w", err)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	return b.next.RoundTrip(req)
}

// Result is an instant query's answer reduced to what a check judges.
type Result struct {
	// Series is how many samples the answer holds: 1 for a scalar.
	Series int
	// Value is the sample's value when Series is 1 (it may be NaN).
	Value float64
}

// Query runs query as an instant query at now.
func (c *Client) Query(ctx context.Context, query string, now time.Time) (Result, error) {
	v, _, err := c.api.Query(ctx, query, now)
	if err != nil {
		var perr *promv1.Error
		if errors.As(err, &perr) && perr.Detail != "" {
			return Result{}, fmt.Errorf("%s: %s", perr.Type, perr.Detail)
		}
		return Result{}, err
	}
	switch v := v.(type) {
	case *model.Scalar:
		return Result{Series: 1, Value: float64(v.Value)}, nil
	case model.Vector:
		r := Result{Series: len(v)}
		if len(v) == 1 {
			r.Value = float64(v[0].Value)
		}
		return r, nil
	default:
		return Result{}, fmt.Errorf("the query returned a %s, not an instant vector or scalar", v.Type())
	}
}

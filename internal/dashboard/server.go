// Package dashboard is kubectl rainbow dashboard: a local web page showing
// TemporalWorkerDeployments live, from one set of informers whose changes
// reach the browser as Server-Sent Events, with the plugin's actions as
// buttons. Every read and every action uses the user's kubeconfig; nothing
// talks to Temporal (docs/dashboard.md).
package dashboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
	"github.com/rainbow-deploy/rainbow/internal/kubectlplugin"
	"github.com/rainbow-deploy/rainbow/internal/workload"
)

//go:embed assets
var assets embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"clock": func(t time.Time) string { return t.Local().Format("15:04:05") },
	"pct": func(p *int32) string {
		if p == nil {
			return ""
		}
		return fmt.Sprintf("%d%%", *p)
	},
	"lower": strings.ToLower,
	"add":   func(a, b int) int { return a + b },
	// readyClass colours Ready=False yellow while a rollout is on its way,
	// red only when it is stuck, as the plugin does.
	"readyClass": func(ready, reason string) string {
		if ready == "False" && kubectlplugin.Moving(reason) {
			return "ready-moving"
		}
		if ready == "" {
			ready = "Unknown"
		}
		return "ready-" + strings.ToLower(ready)
	},
}).ParseFS(assets, "assets/*.html"))

// Server serves the dashboard of one namespace ("" for all).
type Server struct {
	namespace string
	client    client.Client
	cache     cache.Cache
	history   *History
	hub       *hub
	now       func() time.Time
}

type watchedKind struct {
	resource string
	obj      client.Object
	list     client.ObjectList
}

// watched are the kinds the dashboard's informers hold.
func watched() []watchedKind {
	return []watchedKind{
		{"temporalworkerdeployments", &v1alpha1.TemporalWorkerDeployment{}, &v1alpha1.TemporalWorkerDeploymentList{}},
		{"deployments", &appsv1.Deployment{}, &appsv1.DeploymentList{}},
		{"temporalworkerownedresources", &v1alpha1.TemporalWorkerOwnedResource{}, &v1alpha1.TemporalWorkerOwnedResourceList{}},
		{"events", &corev1.Event{}, &corev1.EventList{}},
	}
}

// New prepares a dashboard that reads and acts with cfg, the user's
// credentials. It checks first that the user may list what it shows, so
// that a refusal is an error that says so rather than an informer retrying.
func New(ctx context.Context, cfg *rest.Config, namespace string) (*Server, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	where := "in namespace " + namespace
	var inNS []client.ListOption
	if namespace == "" {
		where = "in all namespaces"
	} else {
		inNS = append(inNS, client.InNamespace(namespace))
	}
	for _, w := range watched() {
		if err := c.List(ctx, w.list, append(inNS, client.Limit(1))...); err != nil {
			return nil, fmt.Errorf("the dashboard needs to list and watch %s %s (the view role has that): %w", w.resource, where, err)
		}
	}
	hasBuildID, err := labels.NewRequirement(workload.LabelBuildID, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	opts := cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		// Only the versions' Deployments and the TWDs' Events: less to hold.
		&appsv1.Deployment{}: {Label: labels.NewSelector().Add(*hasBuildID)},
		&corev1.Event{}:      {Field: fields.OneTermEqualSelector("involvedObject.kind", "TemporalWorkerDeployment")},
	}}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	informers, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return &Server{namespace: namespace, client: c, cache: informers, history: NewHistory(), hub: newHub(), now: time.Now}, nil
}

// SignInURL is the address to open the dashboard with: it carries the key
// that lets a browser in.
func SignInURL(ln net.Listener, key string) string {
	return "http://" + ln.Addr().String() + "/?key=" + key
}

// NewKey makes the secret of one dashboard's SignInURL.
func NewKey() string { return newSecret() }

// Serve runs the informers and serves the page on ln until ctx ends, to
// browsers that opened SignInURL(ln, key).
func (s *Server) Serve(ctx context.Context, ln net.Listener, key string) error {
	for _, w := range watched() {
		inf, err := s.cache.GetInformer(ctx, w.obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { s.changed(o, false) },
			UpdateFunc: func(_, o any) { s.changed(o, false) },
			DeleteFunc: func(o any) { s.changed(o, true) },
		}); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cacheDone := make(chan error, 1)
	go func() { cacheDone <- s.cache.Start(ctx) }()
	syncCtx, stop := context.WithTimeout(ctx, 2*time.Minute)
	synced := s.cache.WaitForCacheSync(syncCtx)
	stop()
	if !synced {
		return errors.New("the dashboard's watches did not sync within 2 minutes; check that the API server is reachable")
	}
	g := newGuard(key, newSecret(), ln.Addr())
	srv := &http.Server{
		Handler:           s.handler(g),
		ReadHeaderTimeout: 10 * time.Second,
		// Streams end with ctx, so that Shutdown does not wait for them.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case err := <-cacheDone:
		return err
	case <-ctx.Done():
	}
	shut, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	return srv.Shutdown(shut)
}

// changed is called by the informers: it records a TWD's ramp and wakes
// every open page.
func (s *Server) changed(o any, deleted bool) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	if twd, ok := o.(*v1alpha1.TemporalWorkerDeployment); ok {
		if deleted {
			s.history.Forget(twd.Namespace, twd.Name)
		} else {
			s.history.Observe(twd, s.now())
		}
	}
	s.hub.notify()
}

func (s *Server) handler(g guard) http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets/static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		s.page(w, r, g.token, "index", "/events")
	})
	mux.HandleFunc("GET /twd/{ns}/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.page(w, r, g.token, "twd", "/events/"+r.PathValue("ns")+"/"+r.PathValue("name"))
	})
	mux.HandleFunc("GET /events", s.stream)
	mux.HandleFunc("GET /events/{ns}/{name}", s.stream)
	mux.HandleFunc("/act/{ns}/{name}/{verb}", func(w http.ResponseWriter, r *http.Request) {
		if code, msg := g.act(r); code != 0 {
			reply(w, code, msg)
			return
		}
		s.act(w, r)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.signIn(w, r) {
			return
		}
		if code, msg := g.read(r); code != 0 {
			http.Error(w, msg, code)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		mux.ServeHTTP(w, r)
	})
}

type layout struct {
	Token, Stream, Body string
	Live                template.HTML
}

// page serves the whole page; its live part is what the stream replaces.
func (s *Server) page(w http.ResponseWriter, r *http.Request, token, name, stream string) {
	live, err := s.render(r.Context(), name, r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// The stream sends nothing until the live part differs from this one.
	stream += "?seen=" + digest(live)
	_ = pages.ExecuteTemplate(w, "layout", layout{Token: token, Stream: stream, Body: name, Live: template.HTML(live)})
}

// stream sends the page's live part once, then again after each change the
// informers saw that changes it.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	name, ns := "index", r.PathValue("ns")
	if ns != "" {
		name = "twd"
	}
	wake := s.hub.subscribe()
	defer s.hub.unsubscribe(wake)
	w.Header().Set("Content-Type", "text/event-stream")
	keepAlive := time.NewTicker(30 * time.Second)
	defer keepAlive.Stop()
	last := r.URL.Query().Get("seen")
	for {
		live, err := s.render(r.Context(), name, ns, r.PathValue("name"))
		if err != nil {
			return
		}
		if d := digest(live); d != last {
			fmt.Fprint(w, "event: live\n")
			for _, line := range strings.Split(live, "\n") {
				fmt.Fprintf(w, "data: %s\n", line)
			}
			fmt.Fprint(w, "\n")
			flusher.Flush()
			last = d
		}
		select {
		case <-r.Context().Done():
			return
		case <-keepAlive.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		case <-wake:
			// A burst of changes (a status write, its Events, the
			// Deployments' status) makes one update.
			select {
			case <-r.Context().Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

type indexData struct {
	AllNamespaces bool
	Namespace     string
	Rows          []kubectlplugin.ListRow
}

type button struct {
	Verb, Label, URL, Why string
}

type twdData struct {
	Namespace, Name string
	Found           bool
	View            kubectlplugin.View
	Buttons         []button
	Chart           Chart
}

func (s *Server) render(ctx context.Context, name, ns, twdName string) (string, error) {
	var data any
	switch name {
	case "index":
		var list v1alpha1.TemporalWorkerDeploymentList
		if err := s.cache.List(ctx, &list); err != nil {
			return "", err
		}
		d := indexData{AllNamespaces: s.namespace == "", Namespace: s.namespace}
		for i := range list.Items {
			d.Rows = append(d.Rows, kubectlplugin.NewListRow(&list.Items[i]))
		}
		sort.Slice(d.Rows, func(i, j int) bool {
			a, b := d.Rows[i], d.Rows[j]
			return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
		})
		data = d
	default:
		d, err := s.twd(ctx, ns, twdName)
		if err != nil {
			return "", err
		}
		data = d
	}
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (s *Server) twd(ctx context.Context, ns, name string) (twdData, error) {
	d := twdData{Namespace: ns, Name: name}
	var twd v1alpha1.TemporalWorkerDeployment
	if err := s.cache.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &twd); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return d, nil
		}
		return d, err
	}
	d.Found = true
	var deps appsv1.DeploymentList
	var owned v1alpha1.TemporalWorkerOwnedResourceList
	var events corev1.EventList
	for _, l := range []client.ObjectList{&deps, &owned, &events} {
		if err := s.cache.List(ctx, l, client.InNamespace(ns)); err != nil {
			return d, err
		}
	}
	d.View = kubectlplugin.NewView(kubectlplugin.NewSnapshot(&twd, deps.Items, owned.Items, events.Items))
	d.Chart = NewChart(s.history.Points(ns, name), s.now())
	d.Buttons = buttons(&twd)
	return d, nil
}

// buttons are the plugin's actions; one that does not apply now is
// disabled and says why (the same check the action makes).
func buttons(twd *v1alpha1.TemporalWorkerDeployment) []button {
	check := func(_ kubectlplugin.Change, err error) string {
		if err != nil {
			return err.Error()
		}
		return ""
	}
	_, undoErr := kubectlplugin.UndoTarget(twd, "")
	bs := []button{
		{Verb: "promote", Label: "Promote step", Why: check(kubectlplugin.Promote(twd, false))},
		{Verb: "promote-full", Label: "Promote fully", Why: check(kubectlplugin.Promote(twd, true))},
		{Verb: "pause", Label: "Pause", Why: check(kubectlplugin.Pause(twd))},
		{Verb: "resume", Label: "Resume", Why: check(kubectlplugin.Resume(twd))},
		{Verb: "abort", Label: "Abort", Why: check(kubectlplugin.Abort(twd))},
		{Verb: "retry", Label: "Retry", Why: check(kubectlplugin.Retry(twd))},
		{Verb: "undo", Label: "Undo", Why: check(kubectlplugin.Change{}, undoErr)},
	}
	for i := range bs {
		bs[i].URL = "/act/" + twd.Namespace + "/" + twd.Name + "/" + bs[i].Verb
	}
	return bs
}

// act runs one of the plugin's actions with the user's credentials; a
// refusal carries the API server's own message.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	a := kubectlplugin.Action{Verb: r.PathValue("verb")}
	if a.Verb == "promote-full" {
		a.Verb, a.Full = "promote", true
	}
	ch, err := kubectlplugin.Do(r.Context(), s.client, r.PathValue("ns"), r.PathValue("name"), a)
	if err != nil {
		reply(w, statusOf(err), err.Error())
		return
	}
	reply(w, http.StatusOK, ch.Says)
}

// statusOf is the API server's code for what it refused, else Conflict:
// the action does not apply to the object as it is.
func statusOf(err error) int {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		return int(status.Status().Code)
	}
	return http.StatusConflict
}

func reply(w http.ResponseWriter, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": code == http.StatusOK, "message": message})
}

// hub wakes every open stream; a stream that is busy misses nothing, as
// it renders the latest state when it gets to it.
type hub struct {
	mu   sync.Mutex
	subs map[chan struct{}]bool
}

func newHub() *hub { return &hub{subs: map[chan struct{}]bool{}} }

func (h *hub) subscribe() chan struct{} {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[c] = true
	h.mu.Unlock()
	return c
}

func (h *hub) unsubscribe(c chan struct{}) {
	h.mu.Lock()
	delete(h.subs, c)
	h.mu.Unlock()
}

func (h *hub) notify() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

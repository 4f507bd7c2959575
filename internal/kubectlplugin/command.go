// Package kubectlplugin is kubectl rainbow: it shows TemporalWorkerDeployments
// as the API server reports them and steers their rollouts with patches sent
// as the user, so RBAC applies. It never talks to Temporal
// (docs/kubectl-plugin.md).
package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/rainbow-deploy/rainbow/api/v1alpha1"
)

type plugin struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	output  string
	now     func() time.Time
}

// NewCommand is the kubectl-rainbow command tree.
// Each extra builds one more subcommand on the same kubeconfig flags (the
// dashboard, which lives in its own package).
func NewCommand(streams genericiooptions.IOStreams, extra ...func(*genericclioptions.ConfigFlags) *cobra.Command) *cobra.Command {
	p := &plugin{flags: genericclioptions.NewConfigFlags(true), streams: streams, now: time.Now}
	root := &cobra.Command{
		Use:           "kubectl-rainbow",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl rainbow"},
		Short:         "See and steer Rainbow rollouts (TemporalWorkerDeployments)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	p.flags.AddFlags(root.PersistentFlags())

	var watch bool
	status := &cobra.Command{
		Use:     "status NAME",
		Aliases: []string{"get"},
		Short:   "Show a TemporalWorkerDeployment as a tree: versions, pods, ramp, drainage, owned copies, Events",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return p.status(cmd.Context(), args[0], watch)
		},
	}
	status.Flags().BoolVarP(&watch, "watch", "w", false, "show it again on every change")
	status.Flags().StringVarP(&p.output, "output", "o", "", "json or yaml")

	var all bool
	list := &cobra.Command{
		Use:   "list",
		Short: "One line per TemporalWorkerDeployment",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return p.list(cmd.Context(), all)
		},
	}
	list.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
	list.Flags().StringVarP(&p.output, "output", "o", "", "json or yaml")

	var full bool
	promote := p.action("promote NAME", "End the current ramp step, or with --full make the target current now",
		func() Action { return Action{Verb: "promote", Full: full} })
	promote.Flags().BoolVar(&full, "full", false, "skip the remaining steps: make the target current (a gate still has to pass)")

	var toBuildID string
	undo := p.action("undo NAME", "Roll back: set spec.template back to an earlier version's (the current one while a rollout runs)",
		func() Action { return Action{Verb: "undo", ToBuildID: toBuildID} })
	undo.Flags().StringVar(&toBuildID, "to-build-id", "", "the version to go back to (default: the current version, or the newest earlier one)")

	verb := func(v string) func() Action { return func() Action { return Action{Verb: v} } }
	root.AddCommand(status, list, promote, undo,
		p.action("pause NAME", "Hold the rollout: set spec.rollout.paused", verb("pause")),
		p.action("resume NAME", "Go on with a paused rollout", verb("resume")),
		p.action("abort NAME", "Stop the rollout of the target: new workflows stay on the current version", verb("abort")),
		p.action("retry NAME", "Take an aborted rollout up again", verb("retry")),
		p.migrateCommand(),
	)
	for _, sub := range extra {
		root.AddCommand(sub(p.flags))
	}
	return root
}

func (p *plugin) client() (client.WithWatch, string, error) {
	cfg, err := p.flags.ToRESTConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := p.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	return c, ns, err
}

func (p *plugin) style() Style {
	f, ok := p.streams.Out.(*os.File)
	return Style{Colour: ok && term.IsTerminal(int(f.Fd())) && os.Getenv("NO_COLOR") == ""}
}

// action is a command that patches one TemporalWorkerDeployment as the user.
func (p *plugin) action(use, short string, a func() Action) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := p.client()
			if err != nil {
				return err
			}
			ch, err := Do(cmd.Context(), c, ns, args[0], a())
			if err != nil {
				return err
			}
			fmt.Fprintf(p.streams.Out, "%s/%s: %s: %s\n", ns, args[0], cmd.Name(), ch.Says)
			return nil
		},
	}
}

// An Action is one of the commands that change a TemporalWorkerDeployment.
type Action struct {
	Verb      string // promote, pause, resume, abort, retry or undo
	Full      bool   // promote straight to current
	ToBuildID string // undo to this version
}

// Do reads ns/name, decides the patch for a and sends it with c's
// credentials. Refused because only the status changed since the read, it
// reads and decides again (StatusOnlyChanged). Errors say what the API
// server refused and what to do.
func Do(ctx context.Context, c client.Client, ns, name string, a Action) (Change, error) {
	twd, err := get(ctx, c, ns, name)
	if err != nil {
		return Change{}, err
	}
	var first Change
	for attempt := 1; ; attempt++ {
		ch, err := decide(ctx, c, twd, a)
		if err != nil {
			return Change{}, err
		}
		if attempt == 1 {
			first = ch
		} else if ch.Says != first.Says {
			return Change{}, fmt.Errorf("cannot %s TemporalWorkerDeployment %s/%s: it changed meanwhile and the command would now do something else (%s); "+
				"check kubectl rainbow status %s and run the command again", a.Verb, ns, name, ch.Says, name)
		}
		perr := c.Patch(ctx, twd, client.RawPatch(ch.Type, ch.Patch))
		if perr == nil {
			return ch, nil
		}
		what := a.Verb + " TemporalWorkerDeployment " + ns + "/" + name
		if !(apierrors.IsConflict(perr) || apierrors.IsInvalid(perr)) || attempt == maxAttempts {
			return Change{}, explain(perr, what)
		}
		fresh, err := get(ctx, c, ns, name)
		if err != nil || !StatusOnlyChanged(twd, fresh) {
			return Change{}, explain(perr, what)
		}
		twd = fresh
	}
}

// maxAttempts bounds how often Do makes its change again after the object
// changed under it.
const maxAttempts = 5

// StatusOnlyChanged: between the read and fresh, only what the spec's
// generation does not count changed: the controller's status, or metadata
// such as an annotation. A
// change refused for that race (undo's patch tests the resourceVersion) is
// made again from fresh, as the person would; a changed spec is theirs to
// look at first.
func StatusOnlyChanged(read, fresh *v1alpha1.TemporalWorkerDeployment) bool {
	return fresh.ResourceVersion != read.ResourceVersion && fresh.Generation == read.Generation && fresh.UID == read.UID
}

func decide(ctx context.Context, c client.Client, twd *v1alpha1.TemporalWorkerDeployment, a Action) (Change, error) {
	switch a.Verb {
	case "promote":
		return Promote(twd, a.Full)
	case "pause":
		return Pause(twd)
	case "resume":
		return Resume(twd)
	case "abort":
		return Abort(twd)
	case "retry":
		return Retry(twd)
	case "undo":
		return undo(ctx, c, twd, a.ToBuildID)
	}
	return Change{}, fmt.Errorf("unknown action %q", a.Verb)
}

func undo(ctx context.Context, c client.Client, twd *v1alpha1.TemporalWorkerDeployment, buildID string) (Change, error) {
	v, err := UndoTarget(twd, buildID)
	if err != nil {
		return Change{}, err
	}
	var d appsv1.Deployment
	if err := c.Get(ctx, types.NamespacedName{Namespace: twd.Namespace, Name: v.Deployment}, &d); err != nil {
		return Change{}, explain(err, "read Deployment "+v.Deployment)
	}
	return Undo(twd, v, &d)
}

func get(ctx context.Context, c client.Client, ns, name string) (*v1alpha1.TemporalWorkerDeployment, error) {
	var twd v1alpha1.TemporalWorkerDeployment
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &twd); err != nil {
		return nil, explain(err, "read TemporalWorkerDeployment "+ns+"/"+name)
	}
	return &twd, nil
}

// explain turns the API server's refusals into what to do about them.
func explain(err error, what string) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not %s: %w. Ask for the edit role in this namespace (it includes Rainbow's kinds)", what, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("cannot %s: %w", what, err)
	case apierrors.IsConflict(err), apierrors.IsInvalid(err):
		return fmt.Errorf("cannot %s: %w (it changed meanwhile? run the command again)", what, err)
	}
	return fmt.Errorf("cannot %s: %w", what, err)
}

func (p *plugin) snapshot(ctx context.Context, c client.Client, ns, name string) (Snapshot, error) {
	twd, err := get(ctx, c, ns, name)
	if err != nil {
		return Snapshot{}, err
	}
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return Snapshot{TWD: twd}, explain(err, "list Deployments in "+ns)
	}
	var owned v1alpha1.TemporalWorkerOwnedResourceList
	if err := c.List(ctx, &owned, client.InNamespace(ns)); err != nil {
		return Snapshot{TWD: twd}, explain(err, "list TemporalWorkerOwnedResources in "+ns)
	}
	var events corev1.EventList
	sel := fields.SelectorFromSet(fields.Set{"involvedObject.name": name, "involvedObject.kind": "TemporalWorkerDeployment"})
	if err := c.List(ctx, &events, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: sel}); err != nil {
		return Snapshot{TWD: twd}, explain(err, "list Events in "+ns)
	}
	return NewSnapshot(twd, deps.Items, owned.Items, events.Items), nil
}

func (p *plugin) status(ctx context.Context, name string, watch bool) error {
	c, ns, err := p.client()
	if err != nil {
		return err
	}
	show := func() error {
		s, err := p.snapshot(ctx, c, ns, name)
		if err != nil {
			return err
		}
		v := NewView(s)
		if p.output != "" {
			return p.print(v)
		}
		RenderStatus(p.streams.Out, v, p.now(), p.style())
		return nil
	}
	if err := show(); err != nil || !watch {
		return err
	}
	// Each change of the object shows it again; a watch, not polling.
	for {
		w, err := c.Watch(ctx, &v1alpha1.TemporalWorkerDeploymentList{}, client.InNamespace(ns),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
		if err != nil {
			return explain(err, "watch TemporalWorkerDeployment "+ns+"/"+name)
		}
		for range w.ResultChan() {
			if p.output == "" {
				fmt.Fprintln(p.streams.Out)
			}
			if err := show(); err != nil {
				w.Stop()
				return err
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

func (p *plugin) list(ctx context.Context, all bool) error {
	c, ns, err := p.client()
	if err != nil {
		return err
	}
	var twds v1alpha1.TemporalWorkerDeploymentList
	opts := []client.ListOption{}
	if !all {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, &twds, opts...); err != nil {
		return explain(err, "list TemporalWorkerDeployments")
	}
	rows := make([]ListRow, 0, len(twds.Items))
	for i := range twds.Items {
		rows = append(rows, NewListRow(&twds.Items[i]))
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Namespace != rows[j].Namespace {
			return rows[i].Namespace < rows[j].Namespace
		}
		return rows[i].Name < rows[j].Name
	})
	if p.output != "" {
		return p.print(rows)
	}
	if len(rows) == 0 {
		fmt.Fprintln(p.streams.ErrOut, "No TemporalWorkerDeployments found.")
		return nil
	}
	RenderList(p.streams.Out, rows, all, p.style())
	return nil
}

func (p *plugin) print(v any) error {
	return printAs(p.streams.Out, p.output, v)
}

func printAs(w io.Writer, format string, v any) error {
	var b []byte
	var err error
	switch format {
	case "json":
		b, err = json.MarshalIndent(v, "", "  ")
		b = append(b, '\n')
	case "yaml":
		b, err = yaml.Marshal(v)
	default:
		return fmt.Errorf("-o %s: want json or yaml", format)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

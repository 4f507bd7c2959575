package kubectlplugin

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rainbow-deploy/rainbow/internal/migrate"
)

// migrateCommand switches from Temporal's worker controller, as the user
// (docs/migration-from-twc.md).
func (p *plugin) migrateCommand() *cobra.Command {
	var o migrate.Options
	var dryRun, all, back bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Switch from Temporal's worker controller: convert its objects and hand its running Deployments to Rainbow without a restart",
		Long: "Converts WorkerDeployments, Connections and WorkerResourceTemplates into Rainbow's kinds, hands each versioned Deployment over " +
			"(owner and labels only: no pod restarts), removes the old objects without their clean-up, and lets Rainbow take over. " +
			"Everything is done with your credentials. Run it with --dry-run first; -o yaml prints the converted manifests for your Git repository.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ns, err := p.client()
			if err != nil {
				return err
			}
			if !all {
				o.Namespace = ns
			}
			s, err := migrate.Observe(cmd.Context(), c, o)
			if err != nil {
				return err
			}
			plan := migrate.PlanSwitch(s)
			if back {
				plan = migrate.PlanBack(s)
			}
			if p.output != "" {
				return p.print(plan.Manifests())
			}
			out := p.streams.Out
			for _, r := range plan.Refusals {
				fmt.Fprintf(out, "refused: %s\n", r)
			}
			for _, n := range plan.Notes {
				fmt.Fprintf(out, "note: %s\n", n)
			}
			if len(plan.Steps) == 0 && len(plan.Refusals) == 0 {
				fmt.Fprintln(out, "nothing to switch in scope")
				return nil
			}
			if dryRun || len(plan.Refusals) > 0 {
				for i, st := range plan.Steps {
					fmt.Fprintf(out, "%d. %s\n", i+1, st.Says)
				}
				if len(plan.Refusals) > 0 {
					return fmt.Errorf("%d refusal(s); nothing was changed", len(plan.Refusals))
				}
				return nil
			}
			return migrate.Run(cmd.Context(), c, plan, out)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print every step and change nothing")
	cmd.Flags().BoolVar(&back, "back", false, "the way back: Rainbow's objects to the worker controller's, its Deployments handed back, without a restart")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "switch every namespace")
	cmd.Flags().StringVar(&o.IncumbentIdentity, "incumbent-identity", "",
		"the worker controller's Temporal identity to take the manager role from, where a WorkerDeployment's status.managerIdentity is empty")
	cmd.Flags().BoolVar(&o.GitOpsPaused, "gitops-paused", false, "you paused the automatic sync and pruning of every GitOps application holding these objects")
	cmd.Flags().StringVarP(&p.output, "output", "o", "", "yaml or json: print the converted manifests and change nothing")
	return cmd
}

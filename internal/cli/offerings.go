package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	marketplacev1alpha1 "github.com/marketplane/marketplane/api/marketplace/v1alpha1"
)

// offeringsFlags are the flags of `marketplane offerings`.
type offeringsFlags struct {
	kubeconfig string
	context    string
}

// client returns a client of the onboarding cluster with the user's own
// credentials, from --kubeconfig (default: $KUBECONFIG, then
// ~/.kube/config) as kubectl loads it.
func (f *offeringsFlags) client() (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, errors.New("no kubeconfig: pass --kubeconfig FILE or set KUBECONFIG to a kubeconfig of the onboarding cluster " +
			"(on a local landscape: .landscape/kubeconfigs/onboarding.kubeconfig; `marketplane landscape status` lists them)")
	case err != nil:
		return nil, fmt.Errorf("load the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := marketplacev1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("client of the onboarding cluster: %w", err)
	}
	return c, nil
}

func newOfferingsCommand() *cobra.Command {
	f := &offeringsFlags{}
	cmd := &cobra.Command{
		Use:   "offerings",
		Short: "List the marketplace's offerings and explain what each accepts",
		Long: "The marketplace keeps one Offering per service provider and per Service Fabrik\n" +
			"service on the onboarding cluster (docs/marketplace.md). These commands read them\n" +
			"with your own credentials (--kubeconfig, default $KUBECONFIG).",
	}
	cmd.PersistentFlags().StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the onboarding cluster (default: $KUBECONFIG, then ~/.kube/config)")
	cmd.PersistentFlags().StringVar(&f.context, "context", "", "kubeconfig context (default: the current one)")
	cmd.AddCommand(newOfferingsListCommand(f), newOfferingsExplainCommand(f))
	return cmd
}

func newOfferingsListCommand(f *offeringsFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the offerings: name, type, what to order (kinds or plans), ready",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			list := &marketplacev1alpha1.OfferingList{}
			if err := c.List(cmd.Context(), list); err != nil {
				return fmt.Errorf("list offerings: %w", err)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tTYPE\tDISPLAY NAME\tORDER WITH\tREADY")
			for i := range list.Items {
				o := &list.Items[i]
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%t\n", o.Name, o.Spec.Source.Kind, o.Spec.DisplayName, orderWith(o), o.Spec.Ready)
			}
			if err := w.Flush(); err != nil {
				return fmt.Errorf("write: %w", err)
			}
			return nil
		},
	}
}

// orderWith names what a tenant creates to order an offering: its kinds,
// or its plans.
func orderWith(o *marketplacev1alpha1.Offering) string {
	var out []string
	for _, k := range o.Spec.Kinds {
		out = append(out, k.Kind)
	}
	for _, p := range o.Spec.Plans {
		out = append(out, "plan "+p.Name)
	}
	if len(out) == 0 {
		return "-"
	}
	if len(out) > 3 {
		return fmt.Sprintf("%s, … (%d)", strings.Join(out[:2], ", "), len(out))
	}
	return strings.Join(out, ", ")
}

func newOfferingsExplainCommand(f *offeringsFlags) *cobra.Command {
	req := explainRequest{}
	cmd := &cobra.Command{
		Use:   "explain OFFERING [FIELD]",
		Short: "Describe what an offering accepts, field by field, like kubectl explain",
		Long: "For a service provider's offering: the fields of its kind's spec (--kind when it offers\n" +
			"several). For a Service Fabrik service: the parameters of a plan (--plan when it has\n" +
			"several) for a provision (--schema create, the default), an update or a bind.\n" +
			"FIELD is a dotted path, e.g. `spec.version` or `parameters.pods`.",
		Example: "  marketplane offerings explain sp-sample\n" +
			"  marketplane offerings explain sf-interoperator-kubernetes-namespace --plan small parameters.pods",
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return errors.New("name the offering to explain: marketplane offerings explain OFFERING [FIELD] (`marketplane offerings list` shows the names)")
			case len(args) > 2:
				return fmt.Errorf("%d arguments: want OFFERING and at most one FIELD (a dotted path such as spec.version)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				req.field = args[1]
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			out, err := explainNamed(cmd.Context(), c, args[0], req)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), out)
			return err
		},
	}
	cmd.Flags().StringVar(&req.kind, "kind", "", "the kind of a service provider's offering (default: its only one)")
	cmd.Flags().StringVar(&req.plan, "plan", "", "the plan (name or id) of a Service Fabrik offering (default: its only one)")
	cmd.Flags().StringVar(&req.schema, "schema", "create", "which parameters of a plan: create, update or bind")
	cmd.Flags().BoolVar(&req.recursive, "recursive", false, "list every field below, without descriptions")
	return cmd
}

// explainNamed reads the Offering name and explains it.
func explainNamed(ctx context.Context, c client.Client, name string, req explainRequest) (string, error) {
	o := &marketplacev1alpha1.Offering{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
		return "", fmt.Errorf("get offering %s: %w", name, err)
	}
	return explainOffering(o, req)
}

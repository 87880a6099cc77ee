package landscape

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// printSummary prints what the landscape offers and what to try next.
func (l *Landscape) printSummary(elapsed time.Duration, reused bool) {
	w := l.out
	how := "new"
	if reused {
		how = "resumed"
	}
	fmt.Fprintf(w, "\nMarketplane landscape is ready (%s, started in %s). State: %s\n\n", how, elapsed.Round(100*time.Millisecond), l.Layout.Dir)
	fmt.Fprintln(w, "Admin kubeconfigs:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range []*Cluster{l.Platform, l.Onboarding, l.Workload} {
		fmt.Fprintf(tw, "  %s\t%s\n", c.Name, c.KubeconfigPath)
	}
	if l.backend == BackendKCP {
		fmt.Fprintf(tw, "  %s\t%s\n", KCPProcess, l.KCPKubeconfig())
	}
	_ = tw.Flush()
	if st := l.store.Snapshot(); st.KCP != nil {
		fmt.Fprintf(w, "MCP backend: %s, kcp at https://127.0.0.1:%d (log %s)\n", describeBackend(st), st.KCP.SecurePort, l.Layout.Log(KCPProcess))
	}
	for _, line := range l.summary {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "\nNext, with kubectl:\n")
	// -A: a ClusterProvider's Clusters (kcp's MCPs) live in its own namespace.
	fmt.Fprintf(w, "  kubectl --kubeconfig %s get clusters -A\n", l.Platform.KubeconfigPath)
	fmt.Fprintf(w, "  kubectl --kubeconfig %s get managedcontrolplanes -A\n", l.Onboarding.KubeconfigPath)
	fmt.Fprintf(w, "  marketplane landscape status --state-dir %s\n", l.Layout.Dir)
	fmt.Fprintf(w, "Logs: %s\n", l.Layout.LogDir())
	if l.cfg.Detached {
		fmt.Fprintf(w, "Stop it and keep its data: marketplane landscape stop --state-dir %s ('start' resumes it)\n", l.Layout.Dir)
		fmt.Fprintf(w, "Stop and remove it: marketplane landscape down --state-dir %s\n", l.Layout.Dir)
	} else {
		fmt.Fprintln(w, "Ctrl-C stops it (the data is kept; 'marketplane landscape start' resumes it); 'marketplane landscape down' removes it.")
	}
	fmt.Fprintln(w)
}

// writeTable writes rows with aligned columns.
func writeTable(w io.Writer, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		for i, c := range r {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

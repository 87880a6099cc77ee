package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/marketplane/marketplane/internal/landscape"
	"github.com/marketplane/marketplane/internal/landscape/controlplane"
	"github.com/marketplane/marketplane/internal/landscape/validationtarget"
	"github.com/marketplane/marketplane/internal/operator/deploy/process"
	"github.com/marketplane/marketplane/pkg/validation"
)

// The outputs of `validate`.
const (
	outputText = "text"
	outputJSON = "json"
)

// runValidation runs the flow with progress reported to progress, and
// specFromFiles reads the manifests: the validation package's functions,
// which tests of the command's wiring replace.
var (
	runValidation = func(ctx context.Context, spec validation.Spec, target validation.Target, progress func(validation.Event), opts ...validation.Option) *validation.Report {
		return validation.Run(ctx, spec, target, append(opts, validation.WithProgress(progress))...)
	}
	specFromFiles = validation.SpecFromFiles
)

// errValidationFailed is the command's error when the report did not pass;
// the report itself says why.
var errValidationFailed = errors.New("validation failed")

// validateOptions are the flags of the validate command.
type validateOptions struct {
	files         []string
	check         string
	binary        string
	imageMaps     []string
	imageMapFiles []string
	// stateDir selects a running local landscape; kubeconfig and
	// onboardingKubeconfig real clusters; neither the in-process target.
	stateDir             string
	kubeconfig           string
	onboardingKubeconfig string
	binDir               string
	timeout              time.Duration
	output               string
	junit                string
	// inProcessTarget makes the target without --state-dir or
	// --kubeconfig.
	inProcessTarget InProcessTarget
}

func newValidateCommand(inProcessTarget InProcessTarget) *cobra.Command {
	o := &validateOptions{inProcessTarget: inProcessTarget}
	cmd := &cobra.Command{
		Use:   "validate -f FILE [-f FILE...]",
		Short: "Prove a service provider healthy: deploy it, consume its service, check, delete, and report",
		Long: "Validate runs the flow of openMCP's provider validation on the manifests given with -f: one\n" +
			"ServiceProvider, its ProviderConfig and what else it needs, optionally a ManagedControlPlane or\n" +
			"ControlPlane, and the service objects. It deploys the provider, waits until it is initialized and\n" +
			"ready, creates the service objects and waits until they are Ready and the DomainService exists,\n" +
			"runs --check, deletes everything and waits until it is gone.\n\n" +
			"By default it runs in this process: API servers (etcd and kube-apiserver from --bin-dir) and the\n" +
			"operator, which runs the provider image from a local binary (--binary, --image-map). With\n" +
			"--state-dir it uses a running 'marketplane landscape', whose image map comes from 'landscape up';\n" +
			"with --kubeconfig and --onboarding-kubeconfig real clusters, whose operator pulls the image.\n\n" +
			"The report is a table (and the evidence of a failed step), or JSON with --output json; --junit\n" +
			"writes JUnit XML as well. The command fails when a step failed.",
		Example: "  marketplane validate -f provider.yaml -f providerconfig.yaml -f sample.yaml --binary bin/sample-provider\n" +
			"  marketplane validate -f sp.yaml -f sample.yaml --image-map registry.invalid/acme/p:*=bin/p --junit report.xml\n" +
			"  marketplane validate -f sp.yaml -f sample.yaml --state-dir .landscape --check 'kubectl get sampleobjects'",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runValidate(cmd, o) },
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.files, "filename", "f", nil, "manifest file with the ServiceProvider, its ProviderConfig, an optional control plane and the service objects (repeatable)")
	f.StringVar(&o.check, "check", "", "shell command that checks the DomainServiceAPI once the service is Ready; KUBECONFIG is the control plane's tenant kubeconfig")
	f.StringVar(&o.binary, "binary", "", "local binary that runs the ServiceProvider's spec.image (in-process target)")
	f.StringArrayVar(&o.imageMaps, "image-map", nil, "run the provider image IMAGE from the local binary BINARY: IMAGE=BINARY, IMAGE is repo:tag, repo@digest or repo:* (repeatable; in-process target)")
	f.StringArrayVar(&o.imageMapFiles, "image-map-file", nil, "image map file (YAML: images: [{image, binary}]; repeatable; in-process target)")
	f.StringVar(&o.stateDir, "state-dir", "", "run on the local landscape of this state directory ('marketplane landscape up') instead of in this process")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "run on the platform cluster of this admin kubeconfig (with --onboarding-kubeconfig) instead of in this process")
	f.StringVar(&o.onboardingKubeconfig, "onboarding-kubeconfig", "", "admin kubeconfig of the onboarding cluster (with --kubeconfig)")
	f.StringVar(&o.binDir, "bin-dir", "", "directory with etcd and kube-apiserver for the in-process target (default: beside this binary, $KUBEBUILDER_ASSETS, or bin/ above the working directory)")
	f.DurationVar(&o.timeout, "timeout", validation.DefaultTimeout, "how long each step may wait")
	f.StringVarP(&o.output, "output", "o", outputText, "report format on stdout: text or json (json sends progress to stderr)")
	f.StringVar(&o.junit, "junit", "", "also write the report as JUnit XML to this file")
	return cmd
}

// checkFlags rejects flags that cannot work together, before anything
// is read or started.
func (o *validateOptions) checkFlags() error {
	var errs []error
	if len(o.files) == 0 {
		errs = append(errs, errors.New("no manifests: give the ServiceProvider and the service objects with -f FILE"))
	}
	if o.output != outputText && o.output != outputJSON {
		errs = append(errs, fmt.Errorf("--output %q: want %s or %s", o.output, outputText, outputJSON))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout %s: want a positive duration", o.timeout))
	}
	kubeconfigs := o.kubeconfig != "" || o.onboardingKubeconfig != ""
	switch {
	case o.stateDir != "" && kubeconfigs:
		errs = append(errs, errors.New("--state-dir and --kubeconfig/--onboarding-kubeconfig each select a target: give one of them"))
	case kubeconfigs && (o.kubeconfig == "" || o.onboardingKubeconfig == ""):
		errs = append(errs, errors.New("--kubeconfig and --onboarding-kubeconfig go together (give the same file twice when one cluster is both)"))
	}
	images := o.binary != "" || len(o.imageMaps) > 0 || len(o.imageMapFiles) > 0
	switch {
	case images && o.stateDir != "":
		errs = append(errs, errors.New("--binary, --image-map and --image-map-file are for the in-process target: the landscape's operator runs the images it was started with ('marketplane landscape up --image-map IMAGE=BINARY')"))
	case images && kubeconfigs:
		errs = append(errs, errors.New("--binary, --image-map and --image-map-file are for the in-process target: on real clusters the operator pulls the ServiceProvider's image"))
	}
	if o.binDir != "" && (o.stateDir != "" || kubeconfigs) {
		errs = append(errs, errors.New("--bin-dir is for the in-process target only"))
	}
	return errors.Join(errs...)
}

// inProcess reports whether the run starts its own API servers.
func (o *validateOptions) inProcess() bool { return o.stateDir == "" && o.kubeconfig == "" }

// checkFiles checks that the files the flags name exist, so that a typo
// fails before the spec is read or anything starts.
func (o *validateOptions) checkFiles() error {
	var errs []error
	for _, f := range o.files {
		if _, err := os.ReadFile(f); err != nil {
			errs = append(errs, fmt.Errorf("read manifest: %w", err))
		}
	}
	for _, kc := range []struct{ flag, path string }{{"--kubeconfig", o.kubeconfig}, {"--onboarding-kubeconfig", o.onboardingKubeconfig}} {
		if kc.path == "" {
			continue
		}
		if _, err := os.ReadFile(kc.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", kc.flag, err))
		}
	}
	if o.stateDir != "" {
		if fi, err := os.Stat(o.stateDir); err != nil || !fi.IsDir() {
			errs = append(errs, fmt.Errorf("--state-dir %s: no landscape state directory there ('marketplane landscape up --state-dir %s' starts one)", o.stateDir, o.stateDir))
		}
	}
	if o.junit != "" {
		dir := filepath.Dir(o.junit)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			errs = append(errs, fmt.Errorf("--junit %s: directory %s does not exist", o.junit, dir))
		}
	}
	return errors.Join(errs...)
}

// images returns the image map of the flags, --binary mapping the
// ServiceProvider's spec.image, and checks that the provider's image is
// mapped.
func (o *validateOptions) images(provider *unstructured.Unstructured) (map[string]string, error) {
	if provider == nil {
		return nil, errors.New("the manifests hold no ServiceProvider")
	}
	image, _, _ := unstructured.NestedString(provider.Object, "spec", "image")
	mappings := o.imageMaps
	if o.binary != "" {
		if image == "" {
			return nil, fmt.Errorf("--binary: ServiceProvider %s has no spec.image to map", provider.GetName())
		}
		mappings = append(append([]string(nil), o.imageMaps...), image+"="+o.binary)
	}
	list, err := landscape.UserImages(mappings, o.imageMapFiles)
	if err != nil {
		return nil, err
	}
	if image != "" {
		m := process.ImageMap{Images: list, Source: "of --binary, --image-map and --image-map-file"}
		if _, err := m.Binary(image); err != nil {
			return nil, fmt.Errorf("ServiceProvider %s: %w (or pass --binary PATH)", provider.GetName(), err)
		}
	}
	images := make(map[string]string, len(list))
	for _, m := range list {
		images[m.Image] = m.Binary
	}
	return images, nil
}

// target returns the target the flags select. The in-process one gets the
// directory of etcd and kube-apiserver as $KUBEBUILDER_ASSETS, where the
// test environment looks for them.
func (o *validateOptions) target() (validation.Target, error) {
	switch {
	case o.stateDir != "":
		return validationtarget.ExistingLandscape(o.stateDir), nil
	case o.kubeconfig != "":
		return validation.Kubeconfigs(o.kubeconfig, o.onboardingKubeconfig), nil
	}
	if o.binDir != "" {
		for _, name := range []string{"etcd", "kube-apiserver"} {
			path := filepath.Join(o.binDir, name)
			if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return nil, fmt.Errorf("--bin-dir %s: no executable %s (run 'make tools' to build it into bin/)", o.binDir, name)
			}
		}
	}
	if o.binDir != "" || os.Getenv(controlplane.AssetsEnv) == "" {
		dir, err := controlplane.BinDir(o.binDir)
		if err != nil {
			return nil, fmt.Errorf("find etcd and kube-apiserver (or pass --bin-dir): %w", err)
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, fmt.Errorf("--bin-dir %s: %w", dir, err)
		}
		if err := os.Setenv(controlplane.AssetsEnv, abs); err != nil {
			return nil, fmt.Errorf("set %s: %w", controlplane.AssetsEnv, err)
		}
	}
	if o.inProcessTarget == nil {
		return unavailableTarget{}, nil
	}
	return o.inProcessTarget()
}

// InProcessTarget returns the target `marketplane validate` runs on without
// --state-dir or --kubeconfig: API servers and the operator in this
// process, found after the command put the directory of etcd and
// kube-apiserver into $KUBEBUILDER_ASSETS. An error says what is missing.
type InProcessTarget func() (validation.Target, error)

// Option configures the root command.
type Option func(*rootConfig)

// rootConfig is what the Options set.
type rootConfig struct {
	inProcessTarget InProcessTarget
}

// WithInProcessTarget gives `marketplane validate` its in-process target.
// The command's package does not link the operator and the API-server
// harness itself; cmd/marketplane does.
func WithInProcessTarget(f InProcessTarget) Option {
	return func(c *rootConfig) { c.inProcessTarget = f }
}

// unavailableTarget stands in for the in-process target of a root command
// built without WithInProcessTarget: it fails the setup step.
type unavailableTarget struct{}

func (unavailableTarget) Name() string { return "in-process" }

func (unavailableTarget) Start(context.Context, validation.Spec) (*validation.Clusters, error) {
	return nil, errors.New("this build of marketplane has no in-process target: use --state-dir or --kubeconfig")
}

func (unavailableTarget) Stop(context.Context) error { return nil }

// runValidate checks the flags, reads the spec, runs the flow with
// progress and writes the report.
func runValidate(cmd *cobra.Command, o *validateOptions) error {
	if err := o.checkFlags(); err != nil {
		return err
	}
	if err := o.checkFiles(); err != nil {
		return err
	}
	if o.inProcess() {
		// Malformed mappings fail before the spec is read.
		if _, err := landscape.UserImages(o.imageMaps, o.imageMapFiles); err != nil {
			return err
		}
	}
	spec, err := specFromFiles(o.files...)
	if err != nil {
		return fmt.Errorf("read the manifests: %w", err)
	}
	if o.inProcess() {
		images, err := o.images(spec.Provider)
		if err != nil {
			return err
		}
		if spec.Images == nil {
			spec.Images = map[string]string{}
		}
		for image, binary := range images {
			spec.Images[image] = binary
		}
	}
	target, err := o.target()
	if err != nil {
		return err
	}

	out := cmd.OutOrStdout()
	progressOut := out
	if o.output == outputJSON {
		progressOut = cmd.ErrOrStderr()
	}
	progress := newProgressPrinter(progressOut, isTerminal(progressOut))
	opts := []validation.Option{validation.WithTimeout(o.timeout)}
	if o.check != "" {
		opts = append(opts, validation.WithCheck(validation.CommandCheck(o.check)))
	}

	// The controllers and client-go log to nowhere: the terminal shows
	// progress and the report, which carries the provider's logs.
	ctrl.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	report := runValidation(ctx, spec, target, progress.event, opts...)
	progress.close()
	if report == nil {
		return errors.New("validation returned no report")
	}
	err = writeReport(out, o, report)
	if ctx.Err() != nil {
		// The flow ran its clean-up steps before it returned: processes
		// and temporary directories are gone.
		if err == nil {
			err = errValidationFailed
		}
		return fmt.Errorf("interrupted by a signal, cleaned up: %w", err)
	}
	return err
}

// writeReport writes the report in the format the flags ask for, and the
// JUnit file; it returns an error when the report did not pass.
func writeReport(out io.Writer, o *validateOptions, report *validation.Report) error {
	if o.junit != "" {
		if err := writeJUnitFile(o.junit, report); err != nil {
			return err
		}
	}
	switch o.output {
	case outputJSON:
		if err := report.WriteJSON(out); err != nil {
			return err
		}
	default:
		fmt.Fprintln(out)
		if err := report.WriteTable(out); err != nil {
			return err
		}
		if text := report.FailureText(); text != "" {
			fmt.Fprintln(out)
			fmt.Fprint(out, text)
		}
	}
	if report.Err() == nil {
		return nil
	}
	if s := report.FailedStep(); s != nil {
		return fmt.Errorf("%w at step %s", errValidationFailed, s.ID)
	}
	return errValidationFailed
}

// writeJUnitFile writes the report as JUnit XML to path.
func writeJUnitFile(path string, report *validation.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	if err := report.WriteJUnit(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	return nil
}

// event is the run's progress callback: a step that starts gets the
// running line, a step that ended its outcome.
func (p *progressPrinter) event(e validation.Event) {
	if !e.Done {
		p.begin(stepTitle(e.Step))
		return
	}
	p.end(stepLine(e.Step))
}

// stepTitle is what a progress line calls a step.
func stepTitle(s validation.Step) string {
	if s.Title != "" {
		return s.Title
	}
	return s.ID
}

// stepLine is the line of an ended step.
func stepLine(s validation.Step) string {
	d := formatSeconds(s.Duration)
	switch s.Result {
	case validation.ResultFailed:
		line := fmt.Sprintf("✗ %s (%s)", stepTitle(s), d)
		if msg := shorten(s.Message, 100); msg != "" {
			line += ": " + msg
		}
		return line
	case validation.ResultSkipped:
		return fmt.Sprintf("- %s (skipped)", stepTitle(s))
	default:
		return fmt.Sprintf("✓ %s (%s)", stepTitle(s), d)
	}
}

// formatSeconds formats a step's duration as the report's table does:
// "1.2s" below a minute, "3m0s" above.
func formatSeconds(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// shorten is the first line of s, cut to limit characters.
func shorten(s string, limit int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if utf8.RuneCountInString(s) > limit {
		s = string([]rune(s)[:limit-1]) + "…"
	}
	return s
}

// Package contract holds the provider deployment contract of seed 04 as
// code: the flags every provider binary's init and run subcommands take, the
// environment variables they can expect, and the logger the verbosity
// selects. The provider operator passes these; providers (and the operator
// itself, which follows the same contract) parse them with this package.
package contract

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	providerv1alpha1 "github.com/marketplane/marketplane/api/provider/v1alpha1"
)

// Flag names of the contract.
const (
	FlagEnvironment  = "environment"
	FlagProviderName = "provider-name"
	FlagVerbosity    = "verbosity"
)

// Verbosity levels of the contract.
const (
	VerbosityDebug = "DEBUG"
	VerbosityInfo  = "INFO"
	VerbosityError = "ERROR"
)

var lowercaseName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// Flags are the arguments the operator passes to both subcommands.
type Flags struct {
	// Environment distinguishes platform clusters that watch the same
	// onboarding cluster; a provider ignores objects labelled for another.
	Environment string
	// ProviderName is the name of the provider object this process was
	// started for.
	ProviderName string
	// Verbosity is DEBUG, INFO or ERROR.
	Verbosity string
}

// AddFlags registers the contract flags on fs.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Environment, FlagEnvironment, "", "environment (platform cluster) this provider serves; any lowercase string")
	fs.StringVar(&f.ProviderName, FlagProviderName, "", "name of the provider object this process runs for; any lowercase string")
	fs.StringVarP(&f.Verbosity, FlagVerbosity, "v", VerbosityInfo, "log verbosity: DEBUG, INFO or ERROR")
}

// Validate checks the flags and normalises the verbosity to upper case. The
// error names the flag and what it accepts.
func (f *Flags) Validate() error {
	if !lowercaseName.MatchString(f.Environment) {
		return fmt.Errorf("--%s=%q: want a non-empty lowercase name (letters, digits, '-', '.')", FlagEnvironment, f.Environment)
	}
	if !lowercaseName.MatchString(f.ProviderName) {
		return fmt.Errorf("--%s=%q: want a non-empty lowercase name (letters, digits, '-', '.')", FlagProviderName, f.ProviderName)
	}
	v := strings.ToUpper(f.Verbosity)
	switch v {
	case VerbosityDebug, VerbosityInfo, VerbosityError:
		f.Verbosity = v
		return nil
	}
	return fmt.Errorf("--%s=%q: want DEBUG, INFO or ERROR", FlagVerbosity, f.Verbosity)
}

// Logger returns a structured JSON logger at the flags' verbosity: ERROR logs
// errors only, INFO logs V(0), DEBUG logs V(0) to V(2) (decisions and flow,
// in docs/style.md's terms).
func (f *Flags) Logger() logr.Logger {
	level := zapcore.InfoLevel
	switch strings.ToUpper(f.Verbosity) {
	case VerbosityDebug:
		level = zapcore.Level(-2)
	case VerbosityError:
		level = zapcore.ErrorLevel
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(level)
	cfg.Sampling = nil
	cfg.EncoderConfig.TimeKey = "ts"
	cfg.EncoderConfig.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	z, err := cfg.Build()
	if err != nil {
		// The configuration above is static; this cannot fail in practice.
		panic(fmt.Sprintf("build logger: %v", err))
	}
	return zapr.NewLogger(z)
}

// Environment variables every provider process can expect; the names are
// defined with the API types.
const (
	EnvPodName               = providerv1alpha1.EnvPodName
	EnvPodNamespace          = providerv1alpha1.EnvPodNamespace
	EnvPodIP                 = providerv1alpha1.EnvPodIP
	EnvPodServiceAccountName = providerv1alpha1.EnvPodServiceAccountName
)

// Pod is what the contract's environment tells a provider about itself.
type Pod struct {
	Name, Namespace, IP, ServiceAccountName string
}

// PodFromEnv reads the contract's environment variables. Namespace is
// required (a provider keeps its Secrets and leases there); the others may be
// empty outside a pod.
func PodFromEnv() (Pod, error) {
	p := Pod{
		Name:               os.Getenv(EnvPodName),
		Namespace:          os.Getenv(EnvPodNamespace),
		IP:                 os.Getenv(EnvPodIP),
		ServiceAccountName: os.Getenv(EnvPodServiceAccountName),
	}
	if p.Namespace == "" {
		return p, fmt.Errorf("environment variable %s is not set; the provider operator sets it", EnvPodNamespace)
	}
	return p, nil
}

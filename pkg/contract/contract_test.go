package contract

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestFlagsValidate(t *testing.T) {
	cases := map[string]struct {
		args          []string
		wantErr       string
		wantVerbosity string
	}{
		"Contract": {
			args:          []string{"--environment=live", "--provider-name=velero", "--verbosity=DEBUG"},
			wantVerbosity: VerbosityDebug,
		},
		"ShortVerbosityLowerCase": {
			args:          []string{"--environment=canary", "--provider-name=sp-1", "-v", "error"},
			wantVerbosity: VerbosityError,
		},
		"DefaultVerbosity": {
			args:          []string{"--environment=live", "--provider-name=velero"},
			wantVerbosity: VerbosityInfo,
		},
		"LoudVerbosity": {
			args:    []string{"--environment=live", "--provider-name=velero", "--verbosity=LOUD"},
			wantErr: `--verbosity="LOUD": want DEBUG, INFO or ERROR`,
		},
		"MissingEnvironment": {
			args:    []string{"--provider-name=velero"},
			wantErr: "--environment",
		},
		"UpperCaseProviderName": {
			args:    []string{"--environment=live", "--provider-name=Velero"},
			wantErr: "--provider-name",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var f Flags
			fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
			f.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := f.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate(): want an error containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate(): %v", err)
			}
			if f.Verbosity != tc.wantVerbosity {
				t.Errorf("Verbosity = %q, want %q", f.Verbosity, tc.wantVerbosity)
			}
			// The logger must build at every accepted verbosity.
			f.Logger().V(1).Info("Probe")
		})
	}
}

func TestPodFromEnv(t *testing.T) {
	t.Setenv(EnvPodNamespace, "")
	if _, err := PodFromEnv(); err == nil {
		t.Error("PodFromEnv without POD_NAMESPACE: want an error, got none")
	}
	t.Setenv(EnvPodNamespace, "sp-velero")
	t.Setenv(EnvPodName, "sp-velero-0")
	p, err := PodFromEnv()
	if err != nil || p.Namespace != "sp-velero" || p.Name != "sp-velero-0" {
		t.Errorf("PodFromEnv() = %+v, %v", p, err)
	}
}

package landscape

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marketplane/marketplane/internal/landscape/controlplane"
)

// TestChooseBackend checks which MCP backend a start takes: the one asked
// for, else the recorded one (a resumed landscape recorded before the
// field had kube-apiservers), else apiserver; a resumed landscape refuses
// the other one. A kcp backend gets three ports, none of kcp's defaults.
func TestChooseBackend(t *testing.T) {
	bin := t.TempDir()
	for _, b := range []string{KCPBinary, KCPProviderBinary} {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]struct {
		recorded, asked string
		resumed         bool
		want, wantErr   string
	}{
		"new, nothing asked":                  {want: BackendAPIServer},
		"new, kcp asked":                      {asked: BackendKCP, want: BackendKCP},
		"resumed kcp, nothing asked":          {recorded: BackendKCP, resumed: true, want: BackendKCP},
		"resumed kcp, kcp asked":              {recorded: BackendKCP, asked: BackendKCP, resumed: true, want: BackendKCP},
		"resumed apiserver, kcp asked":        {recorded: BackendAPIServer, asked: BackendKCP, resumed: true, wantErr: "cannot change to kcp"},
		"resumed before the field, kcp asked": {asked: BackendKCP, resumed: true, wantErr: "serves its MCPs with the apiserver backend"},
		"resumed kcp, apiserver asked":        {recorded: BackendKCP, asked: BackendAPIServer, resumed: true, wantErr: "cannot change to apiserver"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := &Landscape{Layout: controlplane.Layout{Dir: t.TempDir()}, Binaries: controlplane.Binaries{Dir: bin}, cfg: Config{MCPBackend: tc.asked}}
			s := &controlplane.State{MCPBackend: tc.recorded, Etcd: controlplane.Etcd{ClientPort: 20001, PeerPort: 20002}}
			if tc.recorded == BackendKCP {
				s.KCP = &controlplane.KCP{SecurePort: 20003, EtcdClientPort: 20004, EtcdPeerPort: 20005}
			}
			err := l.chooseBackend(s, tc.resumed)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("chooseBackend = %v; want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.MCPBackend() != tc.want || s.MCPBackend != tc.want {
				t.Fatalf("backend %q, recorded %q; want %q", l.MCPBackend(), s.MCPBackend, tc.want)
			}
			if tc.want != BackendKCP {
				if s.KCP != nil {
					t.Errorf("kcp recorded for the %s backend: %+v", tc.want, s.KCP)
				}
				return
			}
			ports := []int{s.KCP.SecurePort, s.KCP.EtcdClientPort, s.KCP.EtcdPeerPort}
			distinct := slices.Compact(slices.Sorted(slices.Values(ports)))
			for _, p := range ports {
				if p == 0 || slices.Contains(kcpDefaultPorts, p) || p == 20001 || p == 20002 || len(distinct) != len(ports) {
					t.Errorf("kcp ports %v: want three distinct ones, none of kcp's defaults or etcd's", ports)
				}
			}
		})
	}
}

package cli

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// namespaceCredentials are the bind credentials of the sample catalog's
// kubernetes-namespace service, or, with Kubeconfig, of its
// dedicated-cluster service.
type namespaceCredentials struct {
	APIServer string `json:"apiServer"`
	CAData    string `json:"caData"`
	Token     string `json:"token"`
	Namespace string `json:"namespace"`
	// Kubeconfig is a whole kubeconfig (the dedicated-cluster service's
	// credentials).
	Kubeconfig string `json:"kubeconfig"`
}

func newKubeconfigFromCredentialsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kubeconfig-from-credentials",
		Short: "Turn the credentials of a kubernetes-namespace or dedicated-cluster binding (an OSB bind response on stdin) into a kubeconfig",
		Long: "Reads an OSB bind response ({\"credentials\": {apiServer, caData, token, namespace}}) or just its\n" +
			"credentials object from standard input and writes a kubeconfig for that namespace to standard output.\n" +
			"Credentials with a whole kubeconfig ({\"kubeconfig\": \"...\"}, the dedicated-cluster service) are\n" +
			"checked and written as they are.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := kubeconfigFromCredentials(cmd.InOrStdin())
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
}

func kubeconfigFromCredentials(in io.Reader) ([]byte, error) {
	var body struct {
		Credentials *namespaceCredentials `json:"credentials"`
		namespaceCredentials
	}
	if err := json.NewDecoder(in).Decode(&body); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("read credentials: standard input is empty; pipe in an OSB bind response, e.g. the body of PUT /v2/service_instances/ID/service_bindings/BID")
		}
		return nil, fmt.Errorf("read credentials: standard input is not a JSON bind response (%w); want {\"credentials\": {...}} as the broker answers a bind, or just the credentials object", err)
	}
	c := body.namespaceCredentials
	if body.Credentials != nil {
		c = *body.Credentials
	}
	if c.Kubeconfig != "" {
		if _, err := clientcmd.Load([]byte(c.Kubeconfig)); err != nil {
			return nil, fmt.Errorf("read credentials: kubeconfig: %w", err)
		}
		return []byte(c.Kubeconfig), nil
	}
	if c.APIServer == "" || c.Token == "" {
		return nil, errors.New("read credentials: want apiServer and token (a kubernetes-namespace bind response)")
	}
	ca, err := base64.StdEncoding.DecodeString(c.CAData)
	if err != nil {
		return nil, fmt.Errorf("read credentials: caData is not base64: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["service"] = &clientcmdapi.Cluster{Server: c.APIServer, CertificateAuthorityData: ca}
	cfg.AuthInfos["binding"] = &clientcmdapi.AuthInfo{Token: c.Token}
	cfg.Contexts["service"] = &clientcmdapi.Context{Cluster: "service", AuthInfo: "binding", Namespace: c.Namespace}
	cfg.CurrentContext = "service"
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}
	return out, nil
}

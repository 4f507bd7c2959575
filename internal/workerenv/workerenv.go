// Package workerenv is the environment contract between the controller and
// the workers it runs: the variable names the controller injects into every
// worker container, and how a Go worker turns them into client options.
package workerenv

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"

	"go.temporal.io/sdk/client"
)

// Variable names. The TLS and API key names follow the Temporal SDKs'
// environment configuration, so stock clients pick them up too.
const (
	Address        = "TEMPORAL_ADDRESS"
	Namespace      = "TEMPORAL_NAMESPACE"
	DeploymentName = "TEMPORAL_DEPLOYMENT_NAME"
	BuildID        = "TEMPORAL_WORKER_BUILD_ID"
	TLS            = "TEMPORAL_TLS"
	TLSClientCert  = "TEMPORAL_TLS_CLIENT_CERT_PATH"
	TLSClientKey   = "TEMPORAL_TLS_CLIENT_KEY_PATH"
	TLSServerCA    = "TEMPORAL_TLS_SERVER_CA_CERT_PATH"
	TLSServerName  = "TEMPORAL_TLS_SERVER_NAME"
	APIKey         = "TEMPORAL_API_KEY"
)

// Config is the contract read back from the environment.
type Config struct {
	Address, Namespace, DeploymentName, BuildID string
	TLS                                         bool
	ClientCertPath, ClientKeyPath, ServerCAPath string
	ServerName                                  string
	APIKey                                      string
}

// FromEnv reads the contract; lookup is os.LookupEnv in production.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	get := func(k string) string { v, _ := lookup(k); return v }
	c := Config{
		Address:        get(Address),
		Namespace:      get(Namespace),
		DeploymentName: get(DeploymentName),
		BuildID:        get(BuildID),
		ClientCertPath: get(TLSClientCert),
		ClientKeyPath:  get(TLSClientKey),
		ServerCAPath:   get(TLSServerCA),
		ServerName:     get(TLSServerName),
		APIKey:         get(APIKey),
	}
	for _, k := range []string{Address, Namespace, DeploymentName, BuildID} {
		if get(k) == "" {
			return Config{}, fmt.Errorf("environment variable %s is not set; the controller injects it into worker pods", k)
		}
	}
	if v := get(TLS); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Config{}, fmt.Errorf("%s=%q is not a boolean", TLS, v)
		}
		c.TLS = b
	}
	if c.ClientCertPath != "" || c.ServerCAPath != "" {
		c.TLS = true
	}
	if (c.ClientCertPath == "") != (c.ClientKeyPath == "") {
		return Config{}, fmt.Errorf("%s and %s must be set together", TLSClientCert, TLSClientKey)
	}
	return c, nil
}

// ClientOptions turns the contract into Temporal client options.
func (c Config) ClientOptions() (client.Options, error) {
	opts := client.Options{HostPort: c.Address, Namespace: c.Namespace}
	if c.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(c.APIKey)
	}
	if !c.TLS {
		return opts, nil
	}
	tlsCfg := &tls.Config{ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
	if c.ClientCertPath != "" {
		cert, err := tls.LoadX509KeyPair(c.ClientCertPath, c.ClientKeyPath)
		if err != nil {
			return opts, fmt.Errorf("load client certificate: %w", err)
		}
		tlsCfg.Certificates = []tls.Certificate{cert}
	}
	if c.ServerCAPath != "" {
		pem, err := os.ReadFile(c.ServerCAPath)
		if err != nil {
			return opts, fmt.Errorf("read server CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return opts, fmt.Errorf("%s holds no PEM certificate", c.ServerCAPath)
		}
		tlsCfg.RootCAs = pool
	}
	opts.ConnectionOptions.TLS = tlsCfg
	return opts, nil
}

package externalmetrics

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager reads AuthConfigMap through the RoleBinding to the Role
// extension-apiserver-authentication-reader that
// config/components/external-metrics makes, as aggregated API servers do.

// AuthConfigMap is where the API server publishes how its front proxy
// authenticates to aggregated APIs (--requestheader-* flags).
var AuthConfigMap = types.NamespacedName{Namespace: "kube-system", Name: "extension-apiserver-authentication"}

// authConfigMaxAge: the request-header settings are read again this often,
// so a rotated front-proxy CA is picked up.
const authConfigMaxAge = time.Minute

// FrontProxyAuth authenticates the requests the API server's aggregation
// layer proxies, as every aggregated API server does: by the front proxy's
// client certificate, checked against the request-header CA (with its
// common name among the allowed names), and the user it names in request
// headers; and authorizes them with a SubjectAccessReview. A nil
// *FrontProxyAuth lets every request through (for tests).
type FrontProxyAuth struct {
	// Reader reads AuthConfigMap; an uncached reader (the manager's API
	// reader) needs no watch on ConfigMaps.
	Reader client.Reader
	// Reviews creates SubjectAccessReviews.
	Reviews client.Client

	mu     sync.Mutex
	cfg    *headerConfig
	readAt time.Time
}

// headerConfig is what AuthConfigMap says about the front proxy.
type headerConfig struct {
	roots                                    *x509.CertPool
	allowedNames                             []string
	userHeaders, groupHeaders, extraPrefixes []string
}

// caller is the user the front proxy names.
type caller struct {
	name   string
	groups []string
	extra  map[string][]string
}

func (a *FrontProxyAuth) config(ctx context.Context) (*headerConfig, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg != nil && time.Since(a.readAt) < authConfigMaxAge {
		return a.cfg, nil
	}
	var cm corev1.ConfigMap
	if err := a.Reader.Get(ctx, AuthConfigMap, &cm); err != nil {
		return nil, fmt.Errorf("read the front proxy's settings from ConfigMap %s: %w", AuthConfigMap, err)
	}
	cfg, err := parseHeaderConfig(cm.Data)
	if err != nil {
		return nil, err
	}
	a.cfg, a.readAt = cfg, time.Now()
	return cfg, nil
}

func parseHeaderConfig(data map[string]string) (*headerConfig, error) {
	ca := data["requestheader-client-ca-file"]
	if ca == "" {
		return nil, fmt.Errorf("ConfigMap %s has no requestheader-client-ca-file: the API server runs without --requestheader-client-ca-file, so aggregated APIs cannot authenticate it", AuthConfigMap)
	}
	cfg := &headerConfig{roots: x509.NewCertPool()}
	if !cfg.roots.AppendCertsFromPEM([]byte(ca)) {
		return nil, fmt.Errorf("ConfigMap %s: no certificate in requestheader-client-ca-file", AuthConfigMap)
	}
	for key, dst := range map[string]*[]string{
		"requestheader-allowed-names": &cfg.allowedNames, "requestheader-username-headers": &cfg.userHeaders,
		"requestheader-group-headers": &cfg.groupHeaders, "requestheader-extra-headers-prefix": &cfg.extraPrefixes,
	} {
		if v := data[key]; v != "" {
			if err := json.Unmarshal([]byte(v), dst); err != nil {
				return nil, fmt.Errorf("ConfigMap %s: %s: %w", AuthConfigMap, key, err)
			}
		}
	}
	return cfg, nil
}

// authenticate returns the user a request from the front proxy names.
func (a *FrontProxyAuth) authenticate(r *http.Request) (caller, error) {
	if a == nil {
		return caller{name: "anonymous"}, nil
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return caller{}, errors.New("no client certificate: only the API server's aggregation layer may call this API")
	}
	cfg, err := a.config(r.Context())
	if err != nil {
		return caller{}, err
	}
	return cfg.caller(r)
}

func (cfg *headerConfig) caller(r *http.Request) (caller, error) {
	certs := r.TLS.PeerCertificates
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: cfg.roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return caller{}, fmt.Errorf("the client certificate is not the front proxy's: %w", err)
	}
	if cn := certs[0].Subject.CommonName; len(cfg.allowedNames) > 0 && !slices.Contains(cfg.allowedNames, cn) {
		return caller{}, fmt.Errorf("client certificate %q is not among the front proxy's allowed names %v", cn, cfg.allowedNames)
	}
	var u caller
	for _, h := range cfg.userHeaders {
		if u.name = r.Header.Get(h); u.name != "" {
			break
		}
	}
	if u.name == "" {
		return caller{}, fmt.Errorf("the front proxy named no user (headers %v)", cfg.userHeaders)
	}
	for _, h := range cfg.groupHeaders {
		u.groups = append(u.groups, r.Header.Values(h)...)
	}
	for h, vs := range r.Header {
		for _, p := range cfg.extraPrefixes {
			if len(h) > len(p) && strings.EqualFold(h[:len(p)], p) {
				key, err := url.PathUnescape(strings.ToLower(h[len(p):]))
				if err != nil {
					continue
				}
				if u.extra == nil {
					u.extra = map[string][]string{}
				}
				u.extra[key] = append(u.extra[key], vs...)
			}
		}
	}
	return u, nil
}

// authorize asks the API server whether u may list metric in namespace,
// the verb the API server itself would check.
func (a *FrontProxyAuth) authorize(ctx context.Context, u caller, namespace, metric string) error {
	if a == nil {
		return nil
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.name, Groups: u.groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: "list", Group: Group, Version: Version, Resource: metric,
		},
	}}
	for k, v := range u.extra {
		if sar.Spec.Extra == nil {
			sar.Spec.Extra = map[string]authorizationv1.ExtraValue{}
		}
		sar.Spec.Extra[k] = v
	}
	if err := a.Reviews.Create(ctx, sar); err != nil {
		return fmt.Errorf("authorization failed: %w", err)
	}
	if !sar.Status.Allowed {
		return fmt.Errorf("user %q may not list %s.%s in namespace %q", u.name, metric, Group, namespace)
	}
	return nil
}

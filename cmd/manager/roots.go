package main

// The image holds no CA bundle (dev/image: one static binary on no base), yet
// a TemporalConnection with TLS and no ca.crt (Temporal Cloud with an API
// key, say) checks the server against the system roots. This package makes
// Mozilla's roots, compiled in, the roots to use when the system has none;
// where it has some (a host, or SSL_CERT_FILE / SSL_CERT_DIR pointing at a
// mounted bundle), those win and these are not used. Upgrading the module
// upgrades the roots.
import _ "golang.org/x/crypto/x509roots/fallback"

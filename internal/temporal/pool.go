package temporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"google.golang.org/grpc"

	"github.com/rainbow-deploy/rainbow/internal/inflight"
)

// ErrPoolClosed is returned by Get after Close.
var ErrPoolClosed = errors.New("temporal client pool is closed")

// dialTimeout bounds one dial and health check. The dial is shared by every
// owner waiting for the same key, so it does not use one caller's context.
const dialTimeout = 15 * time.Second

// Pool caches one SDK client per connection key and hands it to owners
// (for example "ns/twd-name", or a TemporalConnection's name). Owners with
// the same key share a client; a client is closed when its last owner moves
// to another key (a rotated Secret) or is forgotten.
type Pool struct {
	identity string
	logger   log.Logger
	// dial is client.DialContext; a field so tests can count dials.
	dial func(context.Context, client.Options) (client.Client, error)
	// interceptors run before the pool's own on every call.
	interceptors []grpc.UnaryClientInterceptor
	// allowed are the addresses the pool dials at all.
	allowed AllowedHosts
	// inFlight adapts each client's calls in flight (WithInFlight); off
	// while not Valid.
	inFlight inflight.Config

	mu      sync.Mutex
	closed  bool
	owners  map[string]string // owner -> key
	clients map[string]*pooled
}

type pooled struct {
	refs  int           // owners mapped to this key
	ready chan struct{} // closed once the dial finished
	c     client.Client // set when ready and the dial succeeded
	err   error         // set when ready and the dial failed
	// namespaceID is the namespace's ID on the server dialed: it tells two
	// servers apart when only an address changed.
	namespaceID string
}

// NewPool returns an empty pool. identity is the Temporal identity of every
// client (the controller's). logger may be nil to drop the SDK's logs.
func NewPool(identity string, logger log.Logger) *Pool {
	if logger == nil {
		logger = log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	}
	return &Pool{
		identity: identity,
		logger:   logger,
		dial:     client.DialContext,
		owners:   map[string]string{},
		clients:  map[string]*pooled{},
	}
}

// Dialer makes an SDK client; client.DialContext in production.
type Dialer func(context.Context, client.Options) (client.Client, error)

// WithDialer makes the pool dial with d, so tests of the controller can
// hand it a stub Temporal client.
func (p *Pool) WithDialer(d Dialer) *Pool {
	p.dial = d
	return p
}

// WithInterceptor adds a unary interceptor to the clients dialed from now
// on, before the pool's own (a call it refuses is not counted as sent).
func (p *Pool) WithInterceptor(i grpc.UnaryClientInterceptor) *Pool {
	p.interceptors = append(p.interceptors, i)
	return p
}

// WithAllowedHosts makes the pool refuse to dial any other address, with
// ErrAddressNotAllowed: the last line of defence, whatever its callers
// checked before.
func (p *Pool) WithAllowedHosts(a AllowedHosts) *Pool {
	p.allowed = a
	return p
}

// WithInFlight makes each client dialed from now on keep its Temporal
// worker-deployment calls within an adaptive limit (package inflight); an
// invalid cfg (the zero Config) leaves them unlimited.
func (p *Pool) WithInFlight(cfg inflight.Config) *Pool {
	p.inFlight = cfg
	return p
}

// AllowedHosts are the addresses the pool dials.
func (p *Pool) AllowedHosts() AllowedHosts { return p.allowed }

// Identity is the identity the pool's clients use.
func (p *Pool) Identity() string { return p.identity }

// Get returns owner's client for params, dialing it if no owner has one for
// the same key yet. A dial runs one health check and one DescribeNamespace,
// so a returned client has reached the server with working credentials and
// an existing namespace; callers report a dial error as
// TemporalClientCreationFailed. Failed dials are not cached: the next Get
// dials again. ctx bounds only this caller's wait; the dial itself runs
// detached (up to 15s) because other owners may wait for the same key.
// A rotation closes the owner's old client at once if no other owner uses
// it, so calls still in flight on it fail and are retried by the caller.
func (p *Pool) Get(ctx context.Context, owner string, params ConnectionParams) (client.Client, error) {
	key := params.Key()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	var toClose client.Client
	if old, ok := p.owners[owner]; ok && old != key {
		toClose = p.releaseLocked(owner)
	}
	e, ok := p.clients[key]
	if !ok {
		e = &pooled{ready: make(chan struct{})}
		p.clients[key] = e
	}
	if _, ok := p.owners[owner]; !ok {
		p.owners[owner] = key
		e.refs++
	}
	first := !ok
	p.mu.Unlock()
	if toClose != nil {
		toClose.Close()
	}
	if first {
		go p.finishDial(ctx, key, e, params)
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		// The dial goes on for the other owners (and our next Get).
		return nil, ctx.Err()
	}
	if e.err != nil {
		return nil, e.err
	}
	p.mu.Lock()
	released := p.clients[key] != e
	p.mu.Unlock()
	if released {
		// Forgotten, rotated away or closed while dialing (the client is
		// closed by whoever released it): start over.
		return p.Get(ctx, owner, params)
	}
	return e.c, nil
}

// finishDial dials for every owner waiting on e.
func (p *Pool) finishDial(ctx context.Context, key string, e *pooled, params ConnectionParams) {
	c, nsID, err := p.connect(ctx, params)
	p.mu.Lock()
	defer p.mu.Unlock()
	e.c, e.err, e.namespaceID = c, err, nsID
	close(e.ready)
	if err != nil {
		p.dropFailedLocked(key, e)
	}
}

// dropFailedLocked forgets a failed dial and the owners that waited for it,
// so that their next Get dials again.
func (p *Pool) dropFailedLocked(key string, e *pooled) {
	if p.clients[key] != e {
		// Already released; the owners mapped to key now are another entry's.
		return
	}
	delete(p.clients, key)
	for o, k := range p.owners {
		if k == key {
			delete(p.owners, o)
		}
	}
}

// releaseLocked unmaps owner and returns the client to close, if owner
// was its last user.
func (p *Pool) releaseLocked(owner string) client.Client {
	key, ok := p.owners[owner]
	if !ok {
		return nil
	}
	delete(p.owners, owner)
	e := p.clients[key]
	if e == nil {
		return nil
	}
	e.refs--
	if e.refs > 0 {
		return nil
	}
	delete(p.clients, key)
	select {
	case <-e.ready:
		return e.c // nil if the dial failed
	default:
		// Still dialing: the dialer gets a client nobody maps; close it
		// when it arrives.
		go func() {
			<-e.ready
			if e.c != nil {
				e.c.Close()
			}
		}()
		return nil
	}
}

// Forget drops owner's client, closing it if no other owner uses it. Call
// it when the owner is deleted.
func (p *Pool) Forget(owner string) {
	p.mu.Lock()
	c := p.releaseLocked(owner)
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

// Close closes every client. Get fails afterwards.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	entries := p.clients
	p.clients, p.owners = map[string]*pooled{}, map[string]string{}
	p.mu.Unlock()
	for _, e := range entries {
		select {
		case <-e.ready:
			if e.c != nil {
				e.c.Close()
			}
		default:
			go func() {
				<-e.ready
				if e.c != nil {
					e.c.Close()
				}
			}()
		}
	}
}

// Len is the number of clients held (dialed or dialing), for tests.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clients)
}

func (p *Pool) options(params ConnectionParams) (client.Options, error) {
	if err := p.allowed.Check(params.HostPort); err != nil {
		return client.Options{}, err
	}
	tlsCfg, err := params.tlsConfig()
	if err != nil {
		return client.Options{}, err
	}
	opts := client.Options{
		HostPort:  params.HostPort,
		Namespace: params.Namespace,
		Identity:  p.identity,
		Logger:    p.logger,
		ConnectionOptions: client.ConnectionOptions{
			TLS:         tlsCfg,
			TLSDisabled: !params.TLS,
			DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(p.chain(params)...)},
		},
	}
	if params.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(params.APIKey)
	}
	return opts, nil
}

// chain is the interceptors of a client for params: the pool's, the
// in-flight limit (its waits are not Temporal's latency, so it goes
// after them), then the count of calls sent.
func (p *Pool) chain(params ConnectionParams) []grpc.UnaryClientInterceptor {
	chain := slices.Clone(p.interceptors)
	if p.inFlight.Valid() {
		chain = append(chain, limitInFlight(p.inFlight, params.Namespace))
	}
	return append(chain, countRPCs)
}

func (p *Pool) connect(ctx context.Context, params ConnectionParams) (client.Client, string, error) {
	opts, err := p.options(params)
	if err != nil {
		return nil, "", fmt.Errorf("temporal connection %s: %w", params, err)
	}
	// Detached: other owners may be waiting for this dial, and one
	// reconcile's cancellation must not fail theirs.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dialTimeout)
	defer cancel()
	c, err := p.dial(ctx, opts)
	if err != nil {
		return nil, "", explain(ctx, params, fmt.Errorf("connect to Temporal at %s: %w", params, err))
	}
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		c.Close()
		return nil, "", explain(ctx, params, fmt.Errorf("Temporal at %s is not healthy: %w", params, err))
	}
	// The health check is not namespaced; this checks that the namespace
	// exists and the credentials may use it.
	ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: params.Namespace})
	if err != nil {
		c.Close()
		return nil, "", fmt.Errorf("Temporal at %s: namespace %q: %w", params, params.Namespace, err)
	}
	return c, ns.GetNamespaceInfo().GetId(), nil
}

// NamespaceID is the ID of the namespace owner's client was dialed for,
// "" if owner has no dialed client.
func (p *Pool) NamespaceID(owner string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.clients[p.owners[owner]]
	if !ok {
		return ""
	}
	select {
	case <-e.ready:
		return e.namespaceID
	default:
		return ""
	}
}

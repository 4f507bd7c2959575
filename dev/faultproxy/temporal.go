// Package faultproxy puts faults between the controller and the servers it
// talks to, for the chaos tests: a gRPC proxy in front of the Temporal
// frontend and an HTTP proxy in front of the kube-apiserver. Both forward
// everything unchanged until a fault is switched on, and record every call
// so that tests can count calls and check what was written when.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	errordetailspb "go.temporal.io/api/errordetails/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TemporalFault is what the Temporal proxy does to calls. The zero value
// forwards everything.
type TemporalFault struct {
	// Down refuses every connection and closes the open ones, as a stopped
	// server would: calls fail with Unavailable.
	Down bool
	// Delay holds each matching call this long before forwarding it.
	Delay time.Duration
	// Exhausted answers matching calls with ResourceExhausted (cause
	// RPS_LIMIT, as Temporal's rate limiter does) without forwarding them.
	Exhausted bool
	// Rewrite, if set, replaces the first response message of each
	// matching call with what it returns (serialized; it gets its own copy
	// of the server's). It stands for a server that answers wrongly, such
	// as a stale summary; return resp itself to pass a message unchanged.
	Rewrite func(method string, resp []byte) []byte
	// Match selects the calls Delay, Exhausted and Rewrite apply to, by
	// full method name ("/temporal.api.workflowservice.v1.WorkflowService/...");
	// nil selects all.
	Match func(method string) bool
}

// WorkerDeploymentAPIs matches the worker deployment RPCs, which only the
// controller calls: workers keep polling while they are faulted.
func WorkerDeploymentAPIs(method string) bool { return strings.Contains(method, "WorkerDeployment") }

// RoutingWrite reports whether a method changes which version Temporal
// routes new workflows to.
func RoutingWrite(method string) bool {
	return strings.HasSuffix(method, "/SetWorkerDeploymentCurrentVersion") ||
		strings.HasSuffix(method, "/SetWorkerDeploymentRampingVersion")
}

// Call is one call through the Temporal proxy.
type Call struct {
	Method   string        `json:"method"`
	Start    time.Time     `json:"start"`
	Duration time.Duration `json:"duration"`
	Code     codes.Code    `json:"code"`
	// Fault names what the proxy did to it ("", "delay", "exhausted",
	// "down", "rewrite"; "rewrite" only when Rewrite changed the message).
	Fault string `json:"fault,omitempty"`
	// Request and Response are the first message each way, serialized,
	// for the methods Capture selects; Response is what the client got,
	// after any Rewrite.
	Request  []byte `json:"-"`
	Response []byte `json:"-"`
}

// Temporal is a transparent gRPC proxy: it forwards any method as raw
// bytes, so it needs no knowledge of the services behind it.
type Temporal struct {
	// Capture selects the calls whose messages are kept in Call; set it
	// before the first call.
	Capture func(method string) bool

	addr   string
	ln     *gateListener
	srv    *grpc.Server
	cc     *grpc.ClientConn
	mu     sync.Mutex
	fault  TemporalFault
	calls  []Call
	served chan struct{}
}

// NewTemporal listens on a free local port and forwards to target.
func NewTemporal(target string) (*Temporal, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cc, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(maxMessage), grpc.MaxCallSendMsgSize(maxMessage)))
	if err != nil {
		ln.Close()
		return nil, err
	}
	p := &Temporal{addr: ln.Addr().String(), ln: newGateListener(ln), cc: cc, served: make(chan struct{})}
	p.srv = grpc.NewServer(
		grpc.UnknownServiceHandler(p.forward),
		grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxRecvMsgSize(maxMessage), grpc.MaxSendMsgSize(maxMessage))
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(p.ln)
	}()
	return p, nil
}

// maxMessage is far above anything Temporal sends, so that the proxy never
// refuses what the server would have passed.
const maxMessage = 256 << 20

// Addr is the host:port to give clients instead of the server's.
func (p *Temporal) Addr() string { return p.addr }

// Set switches the fault; calls already waiting keep the one they met.
func (p *Temporal) Set(f TemporalFault) {
	p.mu.Lock()
	p.fault = f
	p.mu.Unlock()
	p.ln.setDown(f.Down)
}

// Pass forwards everything again.
func (p *Temporal) Pass() { p.Set(TemporalFault{}) }

// Calls returns a copy of the calls recorded so far, in the order they
// ended.
func (p *Temporal) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

// Close stops the proxy and drops every connection.
func (p *Temporal) Close() {
	p.ln.setDown(true)
	p.srv.Stop()
	<-p.served
	p.cc.Close()
}

func (p *Temporal) record(c Call) {
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
}

// forward relays one call of any kind (unary or streaming) to the server.
func (p *Temporal) forward(_ any, in grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(in)
	call := Call{Method: method, Start: time.Now()}
	p.mu.Lock()
	f := p.fault
	capture := p.Capture != nil && p.Capture(method)
	p.mu.Unlock()
	err := p.relay(in, method, f, capture, &call)
	call.Duration = time.Since(call.Start)
	call.Code = status.Code(err)
	p.record(call)
	return err
}

func (p *Temporal) relay(in grpc.ServerStream, method string, f TemporalFault, capture bool, call *Call) error {
	ctx := in.Context()
	matched := f.Match == nil || f.Match(method)
	switch {
	case f.Down:
		// A call on a connection accepted just before the switch.
		call.Fault = "down"
		return status.Error(codes.Unavailable, "faultproxy: Temporal is down")
	case matched && f.Exhausted:
		call.Fault = "exhausted"
		st, _ := status.New(codes.ResourceExhausted, "faultproxy: namespace rate limit exceeded").
			WithDetails(&errordetailspb.ResourceExhaustedFailure{Cause: enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT})
		return st.Err()
	case matched && f.Delay > 0:
		call.Fault = "delay"
		select {
		case <-time.After(f.Delay):
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}

	md, _ := metadata.FromIncomingContext(ctx)
	md = md.Copy()
	for k := range md {
		// Transport headers are the client connection's own business.
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "user-agent" || k == "te" {
			delete(md, k)
		}
	}
	outCtx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, md))
	defer cancel()
	out, err := p.cc.NewStream(outCtx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}

	// Requests upstream, in the background; a client that goes away
	// cancels the upstream call.
	var (
		reqMu sync.Mutex
		req   []byte
	)
	go func() {
		first := true
		for {
			var m frame
			if err := in.RecvMsg(&m); err != nil {
				if errors.Is(err, io.EOF) {
					_ = out.CloseSend()
				} else {
					cancel()
				}
				return
			}
			if first && capture {
				reqMu.Lock()
				req = append([]byte(nil), m...)
				reqMu.Unlock()
			}
			first = false
			if out.SendMsg(&m) != nil {
				// The server's status arrives on the receiving side.
				return
			}
		}
	}()
	defer func() {
		reqMu.Lock()
		defer reqMu.Unlock()
		call.Request = req
	}()

	// Responses downstream.
	first := true
	for {
		var m frame
		err := out.RecvMsg(&m)
		if first {
			if h, herr := out.Header(); herr == nil {
				_ = in.SendHeader(h)
			}
		}
		if err != nil {
			in.SetTrailer(out.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if first && matched && f.Rewrite != nil {
			if r := f.Rewrite(method, append([]byte(nil), m...)); !bytes.Equal(r, m) {
				m = r
				if call.Fault == "" {
					call.Fault = "rewrite"
				} else {
					call.Fault += ",rewrite"
				}
			}
		}
		if first && capture {
			call.Response = append([]byte(nil), m...)
		}
		first = false
		if err := in.SendMsg(&m); err != nil {
			return err
		}
	}
}

// frame is one serialized message, passed through untouched.
type frame []byte

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("faultproxy: cannot marshal %T", v)
	}
	return *f, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("faultproxy: cannot unmarshal into %T", v)
	}
	*f = append((*f)[:0], data...)
	return nil
}

// gateListener hands connections to the gRPC server while up; down, it
// closes every open connection and each new one at once, so clients see
// the connection refused as they would by a stopped server.
type gateListener struct {
	net.Listener
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func newGateListener(l net.Listener) *gateListener {
	return &gateListener{Listener: l, conns: map[net.Conn]struct{}{}}
}

func (g *gateListener) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		if g.down {
			g.mu.Unlock()
			c.Close()
			continue
		}
		tc := &trackedConn{Conn: c, g: g}
		g.conns[tc] = struct{}{}
		g.mu.Unlock()
		return tc, nil
	}
}

func (g *gateListener) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
	if !down {
		return
	}
	for c := range g.conns {
		c.(*trackedConn).Conn.Close()
		delete(g.conns, c)
	}
}

type trackedConn struct {
	net.Conn
	g    *gateListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.g.mu.Lock()
		delete(c.g.conns, c)
		c.g.mu.Unlock()
	})
	return c.Conn.Close()
}

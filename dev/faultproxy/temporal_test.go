package faultproxy

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// backend is a real gRPC server (the health service) that remembers the
// metadata of the last call.
func backend(t *testing.T) (addr string, lastMD func() metadata.MD) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mdCh := make(chan metadata.MD, 100)
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mdCh <- md
		return h(ctx, req)
	}))
	hs := health.NewServer()
	hs.SetServingStatus("orders", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String(), func() metadata.MD {
		select {
		case md := <-mdCh:
			return md
		case <-time.After(5 * time.Second):
			return nil
		}
	}
}

func proxied(t *testing.T) (*Temporal, healthpb.HealthClient, func() metadata.MD) {
	t.Helper()
	addr, lastMD := backend(t)
	p, err := NewTemporal(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	cc, err := grpc.NewClient(p.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return p, healthpb.NewHealthClient(cc), lastMD
}

const checkMethod = "/grpc.health.v1.Health/Check"

func check(ctx context.Context, c healthpb.HealthClient) (*healthpb.HealthCheckResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Check(ctx, &healthpb.HealthCheckRequest{Service: "orders"})
}

func TestTemporalProxyForwardsAndRecords(t *testing.T) {
	p, c, lastMD := proxied(t)
	p.Capture = func(m string) bool { return m == checkMethod }
	ctx := metadata.AppendToOutgoingContext(context.Background(), "temporal-namespace", "default")
	resp, err := check(ctx, c)
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check through the proxy: %v %v", resp, err)
	}
	if md := lastMD(); len(md.Get("temporal-namespace")) != 1 || md.Get("temporal-namespace")[0] != "default" {
		t.Fatalf("metadata not forwarded: %v", md)
	}
	// A server-streaming call passes too.
	w, err := c.Watch(context.Background(), &healthpb.HealthCheckRequest{Service: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch through the proxy: %v %v", m, err)
	}

	calls := p.Calls()
	if len(calls) != 1 || calls[0].Method != checkMethod || calls[0].Code != codes.OK || calls[0].Fault != "" {
		t.Fatalf("calls = %+v, want one OK Check (the Watch is still open)", calls)
	}
	var req healthpb.HealthCheckRequest
	var got healthpb.HealthCheckResponse
	if err := proto.Unmarshal(calls[0].Request, &req); err != nil || req.Service != "orders" {
		t.Fatalf("captured request %q: %v", req.Service, err)
	}
	if err := proto.Unmarshal(calls[0].Response, &got); err != nil || got.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("captured response %v: %v", got.Status, err)
	}
}

func TestTemporalProxyExhausted(t *testing.T) {
	p, c, _ := proxied(t)
	p.Set(TemporalFault{Exhausted: true, Match: func(m string) bool { return m == checkMethod }})
	_, err := check(context.Background(), c)
	var re *serviceerror.ResourceExhausted
	if !errors.As(serviceerror.FromStatus(status.Convert(err)), &re) || re.Cause != enumspb.RESOURCE_EXHAUSTED_CAUSE_RPS_LIMIT {
		t.Fatalf("err = %v, want ResourceExhausted with cause RPS_LIMIT", err)
	}
	p.Pass()
	if _, err := check(context.Background(), c); err != nil {
		t.Fatalf("after Pass: %v", err)
	}
	calls := p.Calls()
	if len(calls) != 2 || calls[0].Fault != "exhausted" || calls[0].Code != codes.ResourceExhausted || calls[1].Code != codes.OK {
		t.Fatalf("calls = %+v", calls)
	}
}

func TestTemporalProxyMatchSparesOtherMethods(t *testing.T) {
	p, c, _ := proxied(t)
	p.Set(TemporalFault{Exhausted: true, Match: WorkerDeploymentAPIs})
	if _, err := check(context.Background(), c); err != nil {
		t.Fatalf("a method the fault does not match failed: %v", err)
	}
}

func TestTemporalProxyDelay(t *testing.T) {
	p, c, _ := proxied(t)
	const delay = 300 * time.Millisecond
	p.Set(TemporalFault{Delay: delay})
	start := time.Now()
	if _, err := check(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("the call took %s, less than the delay %s", took, delay)
	}
	// A client that gives up during the delay gets its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	p.Set(TemporalFault{Delay: time.Minute})
	if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "orders"}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if calls := p.Calls(); calls[0].Fault != "delay" {
		t.Fatalf("calls = %+v", calls)
	}
}

func TestTemporalProxyDown(t *testing.T) {
	p, c, _ := proxied(t)
	if _, err := check(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	p.Set(TemporalFault{Down: true})
	for i := 0; i < 3; i++ {
		if _, err := check(context.Background(), c); status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d while down: %v, want Unavailable", i, err)
		}
	}
	p.Pass()
	// The client reconnects on its own, with its backoff.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := check(context.Background(), c)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call passed within a minute of the proxy coming back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestTemporalProxyRewrite(t *testing.T) {
	p, c, _ := proxied(t)
	p.Capture = func(m string) bool { return m == checkMethod }
	notServing := func(method string, resp []byte) []byte {
		var m healthpb.HealthCheckResponse
		if method != checkMethod || proto.Unmarshal(resp, &m) != nil {
			return resp
		}
		m.Status = healthpb.HealthCheckResponse_NOT_SERVING
		out, err := proto.Marshal(&m)
		if err != nil {
			return resp
		}
		return out
	}
	p.Set(TemporalFault{Rewrite: notServing})
	resp, err := check(context.Background(), c)
	if err != nil || resp.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("Check through the rewriting proxy: %v %v, want NOT_SERVING", resp, err)
	}
	// A Match that leaves the method out, and a Rewrite that changes
	// nothing, pass the server's answer and record no fault.
	p.Set(TemporalFault{Rewrite: notServing, Match: WorkerDeploymentAPIs})
	if resp, err := check(context.Background(), c); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("unmatched method: %v %v, want SERVING", resp, err)
	}
	p.Set(TemporalFault{Rewrite: func(_ string, resp []byte) []byte { return resp }})
	if resp, err := check(context.Background(), c); err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("unchanged rewrite: %v %v, want SERVING", resp, err)
	}

	calls := p.Calls()
	if len(calls) != 3 || calls[0].Fault != "rewrite" || calls[1].Fault != "" || calls[2].Fault != "" {
		t.Fatalf("calls = %+v, want the first one rewritten", calls)
	}
	// The captured response is what the client got.
	var got healthpb.HealthCheckResponse
	if err := proto.Unmarshal(calls[0].Response, &got); err != nil || got.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("captured response %v: %v, want NOT_SERVING", got.Status, err)
	}
}

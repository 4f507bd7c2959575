package temporaldev

import (
	"context"
	"os"
	"strings"
	"time"

	"go.temporal.io/server/api/matchingservice/v1"
	"go.temporal.io/server/client"
	"go.temporal.io/server/common"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/testing/testhooks"
	"google.golang.org/grpc"
)

// PropagationHoldFile is the file, in devenv's state directory, whose
// content (a Go duration such as "2s") holds back every routing change on
// its way to the task queues. Temporal answers a routing write before it
// applies it: a worker deployment workflow then writes the change into
// each task queue's root partition, and the other partitions fetch it from
// there with a long poll. The hold delays both steps, so a test that
// writes this file widens that window from milliseconds to seconds and
// sees every time what a client sees rarely: a workflow started right
// after a routing write was answered, routed as before. A task queue name
// after the duration ("2s orders") limits the hold to the task queues whose
// name contains it, so that tests running beside that one are not slowed.
// Absent or empty: no hold.
const PropagationHoldFile = "temporal-propagation-hold"

// propagationHold reads the hold from its file on each use: a test changes
// it while the server runs, and the reads are rare (one per partition per
// change of its task queue's data).
type propagationHold struct{ file string }

// duration is the hold of a change to taskQueue (a task queue's name, or
// one of its partitions' names, which contain it).
func (h propagationHold) duration(taskQueue string) time.Duration {
	if h.file == "" {
		return 0
	}
	b, err := os.ReadFile(h.file)
	if err != nil {
		return 0
	}
	hold, only, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	d, err := time.ParseDuration(hold)
	if err != nil || d < 0 {
		return 0
	}
	if only = strings.TrimSpace(only); only != "" && !strings.Contains(taskQueue, only) {
		return 0
	}
	return d
}

// holdingFactoryProvider gives the server matching clients that apply the
// hold; everything else is the default factory's.
type holdingFactoryProvider struct {
	client.FactoryProvider
	hold propagationHold
}

func newHoldingFactoryProvider(file string) holdingFactoryProvider {
	return holdingFactoryProvider{FactoryProvider: client.NewFactoryProvider(), hold: propagationHold{file: file}}
}

func (p holdingFactoryProvider) NewFactory(rpc common.RPCFactory, monitor membership.Monitor, mh metrics.Handler, dc *dynamicconfig.Collection,
	hooks testhooks.TestHooks, shards int32, logger, throttled log.Logger) client.Factory {
	return holdingFactory{Factory: p.FactoryProvider.NewFactory(rpc, monitor, mh, dc, hooks, shards, logger, throttled), hold: p.hold}
}

type holdingFactory struct {
	client.Factory
	hold propagationHold
}

func (f holdingFactory) NewMatchingClientWithTimeout(names client.NamespaceIDToNameFunc, timeout, longPoll time.Duration) (matchingservice.MatchingServiceClient, error) {
	c, err := f.Factory.NewMatchingClientWithTimeout(names, timeout, longPoll)
	if err != nil {
		return nil, err
	}
	return holdingMatching{MatchingServiceClient: c, hold: f.hold}, nil
}

type holdingMatching struct {
	matchingservice.MatchingServiceClient
	hold propagationHold
}

// SyncDeploymentUserData is how Temporal's worker deployment workflows
// write a routing change into a task queue's root partition, after the
// routing write was answered: a change that carries routing reaches the
// root partition the hold's duration late. Registrations are not held.
func (m holdingMatching) SyncDeploymentUserData(ctx context.Context, req *matchingservice.SyncDeploymentUserDataRequest,
	opts ...grpc.CallOption) (*matchingservice.SyncDeploymentUserDataResponse, error) {
	if req.GetUpdateRoutingConfig() != nil {
		m.wait(ctx, req.GetTaskQueue())
	}
	return m.MatchingServiceClient.SyncDeploymentUserData(ctx, req, opts...)
}

func (m holdingMatching) wait(ctx context.Context, taskQueue string) {
	d := m.hold.duration(taskQueue)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// GetTaskQueueUserData is how a non-root partition long-polls its parent
// for new task queue data, routing included: new data reaches it the
// hold's duration late. The first fetch of a loading partition is not
// held.
func (m holdingMatching) GetTaskQueueUserData(ctx context.Context, req *matchingservice.GetTaskQueueUserDataRequest,
	opts ...grpc.CallOption) (*matchingservice.GetTaskQueueUserDataResponse, error) {
	resp, err := m.MatchingServiceClient.GetTaskQueueUserData(ctx, req, opts...)
	if err != nil || !req.GetWaitNewData() || resp.GetUserData() == nil {
		return resp, err
	}
	m.wait(ctx, req.GetTaskQueue())
	return resp, err
}

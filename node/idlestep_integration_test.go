package node

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/keyviz"
)

// A step change on a cluster that nobody reports to takes effect (config
// get shows the new step, nothing pending) instead of staying pending for
// want of a column; a data node that starts afterwards on the old step is
// refused once, learns the step from that refusal, and reports on the new
// step from the next boundary on.
func TestIntegrationStepChangeOnAnIdleCluster(t *testing.T) {
	skipShort(t)
	const oldStep, newStep = 200, 400
	c := newTestCluster(t, 1, func(n *Config) { n.BootstrapConfig = &api.Config{StepMs: oldStep, GraceMs: 100} })
	leader := c.waitLeaderReady(10 * time.Second)
	ctx := ctxT(t, time.Minute)
	resp, err := c.autoClient(leader).SetConfig(ctx, &api.SetConfigRequest{Actor: "test", Patch: &api.ConfigPatch{StepMs: proto.Uint64(newStep)}})
	if err != nil {
		t.Fatal(err)
	}
	at := resp.GetConfig().GetNextStepAtMs()
	if at == 0 || resp.GetConfig().GetStepMs() != oldStep {
		t.Fatalf("not scheduled: %v", resp.GetConfig())
	}
	testutil.WaitFor(t, 20*time.Second, "the step change in force without a column", func() bool {
		r, err := c.autoClient(leader).GetConfig(ctx, &api.GetConfigRequest{})
		return err == nil && r.GetConfig().GetStepMs() == newStep && r.GetConfig().GetNextStepAtMs() == 0
	})
	if c.node(leader).FSM().State().LastColumnAtMs() != 0 {
		t.Fatal("a column came: the cluster was not idle")
	}

	// A data node configured with the old step.
	cl, err := client.New(client.Config{Endpoints: c.endpoints(), TLS: adminTLS(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := keyviz.NewSampler(keyviz.SamplerConfig{Load: keyviz.LoadConfig{StepMs: oldStep, Buckets: 16, WriteWeight: 4, ReadWeight: 1}, SampleRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := keyviz.NewReporter(keyviz.ReporterConfig{ReporterID: testAdmin + "/data-1", Sampler: s, Sender: cl, Routes: cl, Logger: slog.New(slog.DiscardHandler),
		Permanent: func(err error) bool { return status.Code(err) == codes.InvalidArgument }})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { stop(); <-done }()
	testutil.WaitFor(t, 20*time.Second, "columns on the new step acknowledged", func() bool {
		_, step, _ := s.Window()
		return r.Stats().ColumnsAcked >= 2 && step == newStep
	})
	if st := r.Stats(); st.ColumnsRejected == 0 || st.ColumnsRejected > 2 {
		t.Fatalf("stats %+v: want the old step refused once or twice (the columns opened before the refusal), then taken", st)
	}
}

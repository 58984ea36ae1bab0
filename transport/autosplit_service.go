package transport

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/columns"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
)

type autoSplitServer struct {
	api.UnimplementedAutoSplitServer
	s *Server
}

const defaultStatusLimit = 20

func (a *autoSplitServer) Status(ctx context.Context, req *api.StatusRequest) (*api.StatusResponse, error) {
	if resp, handled, err := forwardRead(ctx, a.s, req.GetConsistency(), func(ctx context.Context, cc *grpc.ClientConn) (*api.StatusResponse, error) {
		return api.NewAutoSplitClient(cc).Status(ctx, req)
	}); handled {
		return resp, err
	}
	st, info, err := a.s.readState(ctx, req.GetConsistency())
	if err != nil {
		return nil, err
	}
	if !st.Bootstrapped() {
		return nil, unavailable(nil, "cluster not bootstrapped yet")
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultStatusLimit
	}
	now := a.s.nowMs()
	resp := &api.StatusResponse{
		Switch:              st.Switch(),
		Config:              st.Config(),
		LastColumnAtMs:      st.LastColumnAtMs(),
		LiveOps:             st.LiveOps(),
		LiveRoutes:          uint64(st.Catalog().Len()),
		NowMs:               now,
		Read:                info,
		LastColumnReporters: st.LastColumnReporters(),
		Warnings:            append(a.s.warnings(st), a.s.operationWarnings(st, now)...),
	}
	if at := st.LastColumnAtMs(); at > 0 && now > at {
		resp.LastColumnLagMs = now - at
	}
	tracked := st.Detector().Tracked()
	var candidates, cooling []detector.Tracked
	for _, t := range tracked {
		if t.ConsecutiveOver > 0 {
			candidates = append(candidates, t)
		}
		if t.CooldownUntilMs > now {
			cooling = append(cooling, t)
		}
	}
	slices.SortStableFunc(candidates, func(x, y detector.Tracked) int {
		if c := cmp.Compare(y.LastScore, x.LastScore); c != 0 {
			return c
		}
		return cmp.Compare(x.RouteID, y.RouteID)
	})
	slices.SortStableFunc(cooling, func(x, y detector.Tracked) int { return cmp.Compare(x.CooldownUntilMs, y.CooldownUntilMs) })
	for _, t := range candidates[:min(limit, len(candidates))] {
		resp.Candidates = append(resp.Candidates, fsm.TrackedProto(t))
	}
	merges := mergeCandidates(st, tracked)
	for _, t := range merges[:min(limit, len(merges))] {
		resp.Candidates = append(resp.Candidates, fsm.TrackedProto(t))
	}
	for _, t := range cooling[:min(limit, len(cooling))] {
		resp.Cooldowns = append(resp.Cooldowns, fsm.TrackedProto(t))
	}
	resp.Recent, resp.NextDecisionsBeforeSeq = decisionPage(st.Decisions(), req.GetDecisionsBeforeSeq(), limit)
	resp.DecisionsKept = uint64(len(st.Decisions()))
	resp.FinishedOps = finishedOps(st.Ops(), limit)
	return resp, nil
}

// mergeCandidates are the pairs the detector explained for a merge in the
// last column (cluster version 3), one entry per pair — its left route,
// whose merge explanation names the right one — coldest first (lowest
// merged estimate), ties by route id. Status lists them among the
// candidates with consecutive_over 0 and merge_explanation set.
func mergeCandidates(st *fsm.State, tracked []detector.Tracked) []detector.Tracked {
	var out []detector.Tracked
	for _, t := range tracked {
		x := t.Merge
		if x.Reason == detector.ReasonUnspecified || x.AtMs != st.LastColumnAtMs() || t.ConsecutiveOver > 0 {
			continue
		}
		r, ok := st.Catalog().Route(t.RouteID)
		p, okP := st.Catalog().Route(x.MergePartner)
		if !ok || !okP || bytes.Compare(r.Start, p.Start) > 0 {
			continue
		}
		out = append(out, t)
	}
	slices.SortStableFunc(out, func(x, y detector.Tracked) int {
		if c := cmp.Compare(x.Merge.MergedEstimate, y.Merge.MergedEstimate); c != 0 {
			return c
		}
		return cmp.Compare(x.RouteID, y.RouteID)
	})
	return out
}

// decisionPage returns the newest limit decisions with seq below beforeSeq
// (0: the newest of all), oldest first, and the seq to pass for the next
// older page (0 when this page reaches the oldest kept decision). ds is
// oldest first with increasing seq.
func decisionPage(ds []*api.Decision, beforeSeq uint64, limit int) ([]*api.Decision, uint64) {
	end := len(ds)
	if beforeSeq != 0 {
		end, _ = slices.BinarySearchFunc(ds, beforeSeq, func(d *api.Decision, seq uint64) int { return cmp.Compare(d.GetSeq(), seq) })
	}
	start := max(0, end-limit)
	var next uint64
	if start > 0 {
		next = ds[start].GetSeq()
	}
	return ds[start:end], next
}

// finishedOps returns the newest limit DONE and ABORTED ops, newest first.
func finishedOps(ops []*api.Op, limit int) []*api.Op {
	var out []*api.Op
	for i := len(ops) - 1; i >= 0 && len(out) < limit; i-- {
		switch ops[i].GetState() {
		case api.OpState_OP_STATE_DONE, api.OpState_OP_STATE_ABORTED:
			out = append(out, ops[i])
		}
	}
	return out
}

// nowMs is this node's physical HLC reading: on the leader it includes
// every timestamp it issued, elsewhere it is the local clock.
func (s *Server) nowMs() uint64 { return hlc.Physical(s.cfg.Sched.Clock().Now()) }

// warnings lists conditions an operator should look at.
func (s *Server) warnings(st *fsm.State) []string {
	var w []string
	if sw := st.Switch(); sw.GetSource() == api.SwitchSource_SWITCH_SOURCE_OPERATOR {
		for _, m := range st.Members() {
			if f := m.GetAutoSplitFlag(); f != api.AutoSplitFlag_AUTO_SPLIT_FLAG_UNSET && (f == api.AutoSplitFlag_AUTO_SPLIT_FLAG_ON) != sw.GetEnabled() {
				w = append(w, fmt.Sprintf("member %s was started with --autoSplit=%v but an operator set the switch %s; the flag is ignored",
					m.GetNodeId(), f == api.AutoSplitFlag_AUTO_SPLIT_FLAG_ON, onOff(sw.GetEnabled())))
			}
		}
	}
	if n := st.FenceViolations(); n > 0 {
		w = append(w, fmt.Sprintf("fence violations recorded: %d (a SplitRange or MergeRange arrived with a commit HLC that did not move forward)", n))
	}
	if c := st.Config(); c.GetNextStepAtMs() != 0 {
		w = append(w, fmt.Sprintf("step change pending: step_ms %d -> %d from window %d (announced to reporters in every Report response)",
			c.GetStepMs(), c.GetNextStepMs(), c.GetNextStepAtMs()))
	}
	if rs, ok := s.cfg.Loads.(RefusalSource); ok {
		for _, r := range rs.RecentRefusals() {
			w = append(w, fmt.Sprintf("load reports refused (reason %s): %d since %s, last from %s at %s: %s",
				r.Reason, r.Count, hlc.Format(hlc.Make(r.FirstMs, 0)), r.Reporter, hlc.Format(hlc.Make(r.LastMs, 0)), r.Detail))
		}
	}
	if s.cfg.Sched != nil {
		w = append(w, s.cfg.Sched.Warnings()...)
	}
	return w
}

// RefusalSource lists the load reports this node refused recently, by
// reason (the leader's column aggregator): Status shows them as warnings.
type RefusalSource interface {
	RecentRefusals() []columns.Refusal
}

func (a *autoSplitServer) Explain(ctx context.Context, req *api.ExplainRequest) (*api.ExplainResponse, error) {
	if req.GetRouteId() == 0 {
		return nil, invalid("route_id: must be set")
	}
	if resp, handled, err := forwardRead(ctx, a.s, req.GetConsistency(), func(ctx context.Context, cc *grpc.ClientConn) (*api.ExplainResponse, error) {
		return api.NewAutoSplitClient(cc).Explain(ctx, req)
	}); handled {
		return resp, err
	}
	st, info, err := a.s.readState(ctx, req.GetConsistency())
	if err != nil {
		return nil, err
	}
	if !st.Bootstrapped() {
		return nil, unavailable(nil, "cluster not bootstrapped yet")
	}
	id := req.GetRouteId()
	if id >= st.Catalog().NextRouteID() {
		return nil, statusNotFound("route_id: route %d was never created (next route id %d)", id, st.Catalog().NextRouteID())
	}
	resp := &api.ExplainResponse{NowMs: a.s.nowMs(), Read: info, LastColumnAtMs: st.LastColumnAtMs(), AutoSplitEnabled: st.Switch().GetEnabled(),
		MinSideShareBp: detector.MinSideShareBP, ConfidenceZMilli: detector.ConfidenceZMilli}
	if r, ok := st.Catalog().Route(id); ok {
		resp.Route = r.ToProto()
	}
	if t, ok := st.Detector().Get(id); ok {
		resp.Tracked = fsm.TrackedProto(t)
	}
	for _, d := range st.Decisions() {
		if d.GetRouteId() == id {
			resp.Decisions = append(resp.Decisions, d)
		}
	}
	for _, op := range st.Ops() {
		if op.GetParentRouteId() == id || op.GetTargetRouteId() == id || op.GetRightRouteId() == id {
			resp.Ops = append(resp.Ops, op)
		}
	}
	return resp, nil
}

func (a *autoSplitServer) GetConfig(ctx context.Context, req *api.GetConfigRequest) (*api.GetConfigResponse, error) {
	if resp, handled, err := forwardRead(ctx, a.s, req.GetConsistency(), func(ctx context.Context, cc *grpc.ClientConn) (*api.GetConfigResponse, error) {
		return api.NewAutoSplitClient(cc).GetConfig(ctx, req)
	}); handled {
		return resp, err
	}
	st, info, err := a.s.readState(ctx, req.GetConsistency())
	if err != nil {
		return nil, err
	}
	return &api.GetConfigResponse{Config: st.Config(), Read: info}, nil
}

func (a *autoSplitServer) SetEnabled(ctx context.Context, req *api.SetEnabledRequest) (*api.SetEnabledResponse, error) {
	if err := checkMutationMeta(req.GetRequestId(), req.GetActor()); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.GetReason(), maxReasonLen); err != nil {
		return nil, err
	}
	if !req.GetEnabled() && req.GetReason() == "" {
		return nil, invalid("reason: required when disabling automatic splits")
	}
	if resp, handled, err := forwardWrite(ctx, a.s, req.GetRequestId(), func(ctx context.Context, cc *grpc.ClientConn) (*api.SetEnabledResponse, error) {
		return api.NewAutoSplitClient(cc).SetEnabled(ctx, req)
	}); handled {
		return resp, err
	}
	actor, note := a.s.actor(ctx, req.GetActor())
	res, err := a.s.propose(ctx, &api.Command{RequestId: req.GetRequestId(), Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{
		Enabled: req.GetEnabled(), Actor: actor, Note: note, Reason: req.GetReason(), Source: api.SwitchSource_SWITCH_SOURCE_OPERATOR,
	}}})
	if err != nil {
		return nil, err
	}
	return &api.SetEnabledResponse{Switch: res.GetSwitch()}, nil
}

func (a *autoSplitServer) SetConfig(ctx context.Context, req *api.SetConfigRequest) (*api.SetConfigResponse, error) {
	if err := checkMutationMeta(req.GetRequestId(), req.GetActor()); err != nil {
		return nil, err
	}
	if fsm.PatchIsEmpty(req.GetPatch()) {
		return nil, invalid("patch: must set at least one field")
	}
	if resp, handled, err := forwardWrite(ctx, a.s, req.GetRequestId(), func(ctx context.Context, cc *grpc.ClientConn) (*api.SetConfigResponse, error) {
		return api.NewAutoSplitClient(cc).SetConfig(ctx, req)
	}); handled {
		return resp, err
	}
	// Validate against the current config first so a bad value never reaches
	// the log; the FSM validates again against the config at apply time.
	st := a.s.cfg.FSM.State()
	cfg, err := fsm.PatchConfig(st.Config(), st.ClusterVersion(), req.GetPatch(), a.s.nowMs())
	if err == nil {
		// The bounds of version 2 hold for new requests whatever the
		// cluster's version: refusing before the log changes no replica.
		err = fsm.ValidateConfigAt(cfg, clusterversion.Supported)
	}
	if err != nil {
		return nil, invalid("%v", err)
	}
	actor, note := a.s.actor(ctx, req.GetActor())
	res, err := a.s.propose(ctx, &api.Command{RequestId: req.GetRequestId(), Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Patch: req.GetPatch(), Actor: actor, Note: note}}})
	if err != nil {
		return nil, err
	}
	return &api.SetConfigResponse{Config: res.GetConfig()}, nil
}

func (a *autoSplitServer) AbortOp(ctx context.Context, req *api.AbortOpRequest) (*api.AbortOpResponse, error) {
	if req.GetOpId() == 0 {
		return nil, invalid("op_id: must be set")
	}
	if err := checkMutationMeta(req.GetRequestId(), req.GetActor()); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.GetReason(), maxReasonLen); err != nil {
		return nil, err
	}
	if resp, handled, err := forwardWrite(ctx, a.s, req.GetRequestId(), func(ctx context.Context, cc *grpc.ClientConn) (*api.AbortOpResponse, error) {
		return api.NewAutoSplitClient(cc).AbortOp(ctx, req)
	}); handled {
		return resp, err
	}
	actor, note := a.s.actor(ctx, req.GetActor())
	res, err := a.s.propose(ctx, &api.Command{RequestId: req.GetRequestId(), Body: &api.Command_AbortOp{AbortOp: &api.AbortOp{OpId: req.GetOpId(), Actor: actor, Note: note, Reason: req.GetReason()}}})
	if err != nil {
		return nil, err
	}
	return &api.AbortOpResponse{Op: res.GetOp()}, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

package fsm

import (
	"bytes"
	"crypto/sha256"
	"io"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

// harness drives one FSM with raft.Log entries, stamping each with the next
// index and a strictly increasing HLC (1 ms apart) unless told otherwise.
type harness struct {
	t     testing.TB
	f     *FSM
	index uint64
	ms    uint64 // physical ms of the next stamp
	halts []error
}

const startMs = 1_700_000_000_000

func newHarness(t testing.TB, opts Options) *harness {
	h := &harness{t: t, ms: startMs}
	opts.Halt = func(err error) { h.halts = append(h.halts, err) }
	h.f = newQuiet(opts)
	return h
}

// newQuiet is New with logs discarded unless opts has a logger.
func newQuiet(opts Options) *FSM {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return New(opts)
}

// bootstrapped returns a harness after a Bootstrap with the given splits
// and config (nil: defaults) and the switch on.
func bootstrapped(t testing.TB, splits [][]byte, cfg *api.Config) *harness {
	h := newHarness(t, Options{})
	r := h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
		ClusterId: "c1", InitialSplits: splits, GroupId: 7, Config: cfg, AutoSplit: true}}})
	if r.Code != api.ResultCode_RESULT_CODE_OK {
		t.Fatalf("bootstrap: %v %s", r.Code, r.Message)
	}
	return h
}

// stamp returns the next HLC, advancing the clock by advanceMs.
func (h *harness) stamp(advanceMs uint64) uint64 {
	ts := hlc.Make(h.ms, 0)
	h.ms += advanceMs
	return ts
}

// run applies c with the next stamp unless c.Hlc is already set.
func (h *harness) run(c *api.Command) *Result {
	h.t.Helper()
	if c.Hlc == 0 {
		c.Hlc = h.stamp(1)
	}
	b, err := EncodeCommand(c)
	if err != nil {
		h.t.Fatalf("encode: %v", err)
	}
	return h.raw(b)
}

// raw applies entry bytes as they are.
func (h *harness) raw(b []byte) *Result {
	h.t.Helper()
	h.index++
	res, ok := h.f.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: b}).(*Result)
	if !ok || res == nil || res.CommandResult == nil {
		h.t.Fatalf("Apply returned %#v", res)
	}
	return res
}

func (h *harness) state() *State { return h.f.State() }

// install replaces the state with p (through a snapshot round trip), for
// tests that need ops, tracked routes or catalogs no command sequence
// produces directly.
func (h *harness) install(p *api.StateSnapshot) {
	h.t.Helper()
	s, err := stateFromProto(p, h.f.limits())
	if err != nil {
		h.t.Fatalf("install: %v", err)
	}
	s.index = h.index
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, s); err != nil {
		h.t.Fatalf("install: write: %v", err)
	}
	if err := h.f.Restore(io.NopCloser(&buf)); err != nil {
		h.t.Fatalf("install: restore: %v", err)
	}
	if h.ms <= hlc.Physical(p.GetLastHlc()) {
		h.ms = hlc.Physical(p.GetLastHlc()) + 1
	}
}

// editState applies edit to a copy of the current state's Proto and
// installs the result.
func (h *harness) editState(edit func(p *api.StateSnapshot)) {
	h.t.Helper()
	p := proto.Clone(h.state().Proto()).(*api.StateSnapshot)
	edit(p)
	h.install(p)
}

// assertUnchanged fails unless after equals before in everything but
// last_hlc (which every entry advances) and, if a request id was given,
// the request table.
func assertUnchanged(t testing.TB, before, after *State) {
	t.Helper()
	b := proto.Clone(before.Proto()).(*api.StateSnapshot)
	a := proto.Clone(after.Proto()).(*api.StateSnapshot)
	if a.LastHlc < b.LastHlc {
		t.Fatalf("last_hlc moved backwards: %d -> %d", b.LastHlc, a.LastHlc)
	}
	b.LastHlc = a.LastHlc
	if !proto.Equal(a, b) {
		t.Fatalf("state changed:\nbefore %v\nafter  %v", b, a)
	}
	if hashOf(a) != hashOf(b) {
		t.Fatal("state hash changed")
	}
}

func hashOf(p *api.StateSnapshot) [32]byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		panic(err)
	}
	return sha256.Sum256(b)
}

func split(routeID uint64, key string) *api.Command {
	return &api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{RouteId: routeID, SplitKey: []byte(key), Actor: "test"}}}
}

func splitCAS(routeID uint64, key string, version uint64) *api.Command {
	c := split(routeID, key)
	c.GetSplitRange().ExpectedVersion = proto.Uint64(version)
	return c
}

func step(opID uint64, n uint32, routeID uint64, key []byte) *api.Command {
	return &api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{RouteId: routeID, SplitKey: key, OpId: opID, Step: n}}}
}

func setSwitch(enabled bool, src api.SwitchSource) *api.Command {
	return &api.Command{Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{
		Enabled: enabled, Actor: "alice", Reason: "test", Source: src}}}
}

func operatorSwitch(enabled bool) *api.Command {
	return setSwitch(enabled, api.SwitchSource_SWITCH_SOURCE_OPERATOR)
}

func abort(opID uint64, reason string) *api.Command {
	return &api.Command{Body: &api.Command_AbortOp{AbortOp: &api.AbortOp{OpId: opID, Actor: "alice", Reason: reason}}}
}

func setConfig(p *api.ConfigPatch) *api.Command {
	return &api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Patch: p, Actor: "alice"}}}
}

func wantCode(t testing.TB, r *Result, code api.ResultCode) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("code %v (%s), want %v", r.Code, r.Message, code)
	}
}

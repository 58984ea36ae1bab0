package fsm

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// Entries this build cannot apply safely halt the process; nothing is
// published, not even the applied index.
func TestHalt(t *testing.T) {
	valid, err := EncodeCommand(split(1, "g"))
	if err != nil {
		t.Fatal(err)
	}
	unknownTopLevel := protowire.AppendTag(append([]byte(nil), valid...), 99, protowire.VarintType)
	unknownTopLevel = protowire.AppendVarint(unknownTopLevel, 1)
	// An unknown field inside the SplitRange body (field 14, length-delimited).
	body := protowire.AppendTag(nil, 1, protowire.VarintType)
	body = protowire.AppendVarint(body, 1)
	body = protowire.AppendTag(body, 55, protowire.BytesType)
	body = protowire.AppendBytes(body, []byte("new"))
	unknownNested := protowire.AppendTag(nil, 14, protowire.BytesType)
	unknownNested = protowire.AppendBytes(unknownNested, body)
	// A oneof case this build does not know (field 999).
	unknownBody := protowire.AppendTag(nil, 999, protowire.BytesType)
	unknownBody = protowire.AppendBytes(unknownBody, nil)
	tooNew, err := EncodeCommand(&api.Command{MinVersion: clusterversion.Supported + 1, Body: split(1, "g").Body})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want error
	}{
		{"empty entry", nil, ErrUnknownCommand},
		{"no body", []byte{0x10, 0x05}, ErrUnknownCommand},
		{"unknown command body", unknownBody, ErrDecode},
		{"unknown top-level field", unknownTopLevel, ErrDecode},
		{"unknown nested field", unknownNested, ErrDecode},
		{"garbage", []byte{0xff, 0xff, 0xff}, ErrDecode},
		{"min_version above supported", tooNew, ErrVersion},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := bootstrapped(t, [][]byte{[]byte("m")}, nil)
			before := h.state()
			r := h.raw(tc.data)
			if len(h.halts) != 1 || !errors.Is(h.halts[0], tc.want) {
				t.Fatalf("halts %v, want one wrapping %v", h.halts, tc.want)
			}
			if h.state() != before {
				t.Fatal("a halted entry published a state")
			}
			if r.Code == api.ResultCode_RESULT_CODE_OK {
				t.Fatal("a halted entry answered OK")
			}
		})
	}
}

// A min_version above the replicated cluster version (but supported by
// this build) is a leader bug: refused, nothing applied. With
// SupportedVersion 1 no log entry can reach that gap (min_version 2 halts
// first), so the guard is driven directly; min_version equal to the
// cluster version applies.
func TestMinVersionAboveClusterVersion(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	c := split(1, "g")
	c.MinVersion = h.state().ClusterVersion()
	wantCode(t, h.run(c), api.ResultCode_RESULT_CODE_OK)

	before := h.state()
	a := &applier{f: h.f, s: new(*before), cmd: &api.Command{MinVersion: before.ClusterVersion() + 1, Body: split(3, "c").Body}}
	r := a.dispatch()
	if r.Code != api.ResultCode_RESULT_CODE_INVALID_ARGUMENT || a.s.cat != before.cat || a.s.Hash() != before.Hash() {
		t.Fatalf("result %v", r)
	}
}

func TestRequestIDs(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	c := split(1, "g")
	c.RequestId = "req-1"
	first := h.run(c)
	wantCode(t, first, api.ResultCode_RESULT_CODE_OK)
	if first.Duplicate {
		t.Fatal("first answer marked duplicate")
	}
	again := split(1, "g")
	again.RequestId = "req-1"
	before := h.state()
	second := h.run(again)
	if !second.Duplicate || second.CommandResult != first.CommandResult {
		t.Fatalf("retry answered %v (duplicate %v), want the first answer", second.CommandResult, second.Duplicate)
	}
	assertUnchanged(t, before, h.state())
	if h.state().Catalog().Version() != 2 {
		t.Fatal("the retried split applied twice")
	}
	// Failures are answers too: a retry gets the same failure even after
	// the state changed so that the command would now succeed.
	bad := split(3, "a") // route 3 = [-inf, g): "a" is fine, but use a CAS that fails now
	bad.GetSplitRange().ExpectedVersion = new(uint64(1))
	bad.RequestId = "req-2"
	wantCode(t, h.run(bad), api.ResultCode_RESULT_CODE_VERSION_MISMATCH)
	retry := split(3, "a")
	retry.GetSplitRange().ExpectedVersion = new(uint64(1))
	retry.RequestId = "req-2"
	r := h.run(retry)
	if !r.Duplicate || r.Code != api.ResultCode_RESULT_CODE_VERSION_MISMATCH {
		t.Fatalf("retried failure answered %v", r.CommandResult)
	}
	if res, ok := h.state().RequestResult("req-1"); !ok || res != first.CommandResult {
		t.Fatal("RequestResult(req-1) lost")
	}
}

// The table evicts the oldest request first; an evicted id applies again.
func TestRequestTableEviction(t *testing.T) {
	h := newHarness(t, Options{RequestTableSize: 2})
	h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c1"}}})
	adv := func(id string, ms uint64) *api.Command {
		return &api.Command{RequestId: id, Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: ms}}}
	}
	h.run(adv("a", 1))
	h.run(adv("b", 2))
	h.run(adv("c", 3)) // evicts a
	recs := h.state().Proto().Requests
	if len(recs) != 2 || recs[0].RequestId != "b" || recs[1].RequestId != "c" || recs[0].Seq != 2 || recs[1].Seq != 3 {
		t.Fatalf("records %v", recs)
	}
	if _, ok := h.state().RequestResult("a"); ok {
		t.Fatal("a not evicted")
	}
	if r := h.run(adv("b", 9)); !r.Duplicate || h.state().CeilingMs() != 3 {
		t.Fatal("b should still be a duplicate")
	}
	if r := h.run(adv("a", 9)); r.Duplicate || h.state().CeilingMs() != 9 {
		t.Fatal("evicted a should apply again")
	}
}

// "now" never moves backwards: last_hlc is the max over every entry.
func TestLastHLCIsMax(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	top := h.state().LastHLC()
	c := &api.Command{Hlc: top - 10, Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: 1}}}
	h.run(c)
	if h.state().LastHLC() != top {
		t.Fatalf("last_hlc %d, want %d", h.state().LastHLC(), top)
	}
	h.run(&api.Command{Hlc: top + 10, Body: c.Body})
	if h.state().LastHLC() != top+10 {
		t.Fatal("last_hlc did not advance")
	}
}

func TestEncodeDecodeCommand(t *testing.T) {
	c := splitCAS(4, "key", 9)
	c.Hlc, c.RequestId, c.MinVersion = 77, "r", 1
	b1, err := EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := EncodeCommand(c)
	if string(b1) != string(b2) {
		t.Fatal("encoding not deterministic")
	}
	d, err := DecodeCommand(b1)
	if err != nil || d.GetSplitRange().GetExpectedVersion() != 9 || d.Hlc != 77 || d.RequestId != "r" {
		t.Fatalf("decode: %v %v", d, err)
	}
	if _, err := EncodeCommand(&api.Command{}); !errors.Is(err, ErrUnknownCommand) {
		t.Fatalf("encode without body: %v", err)
	}
}

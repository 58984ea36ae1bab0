package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

func TestBootstrap(t *testing.T) {
	boot := func(b *api.Bootstrap) *api.Command { return &api.Command{Body: &api.Command_Bootstrap{Bootstrap: b}} }
	tests := []struct {
		name    string
		b       *api.Bootstrap
		code    api.ResultCode
		message string // substring of the result message
	}{
		{name: "one route, defaults", b: &api.Bootstrap{ClusterId: "c1"}},
		{name: "initial splits", b: &api.Bootstrap{ClusterId: "c1", InitialSplits: [][]byte{[]byte("g"), []byte("p")}}},
		{name: "empty cluster id", b: &api.Bootstrap{}, code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, message: "cluster_id"},
		{name: "unsorted splits", b: &api.Bootstrap{ClusterId: "c1", InitialSplits: [][]byte{[]byte("p"), []byte("g")}},
			code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, message: "initial_splits"},
		{name: "empty split key", b: &api.Bootstrap{ClusterId: "c1", InitialSplits: [][]byte{{}}},
			code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, message: "key 0 is empty"},
		{name: "split key too long", b: &api.Bootstrap{ClusterId: "c1", InitialSplits: [][]byte{make([]byte, 4098)}},
			code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, message: "4098 bytes"},
		{name: "bad config field", b: &api.Bootstrap{ClusterId: "c1", Config: &api.Config{Buckets: 300}},
			code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, message: "buckets"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			before := h.state()
			r := h.run(boot(tc.b))
			wantCode(t, r, tc.code)
			if !strings.Contains(r.Message, tc.message) {
				t.Fatalf("message %q does not name %q", r.Message, tc.message)
			}
			s := h.state()
			if tc.code != api.ResultCode_RESULT_CODE_OK {
				assertUnchanged(t, before, s)
				if s.Bootstrapped() {
					t.Fatal("bootstrapped after a rejected Bootstrap")
				}
				return
			}
			if !s.Bootstrapped() || s.ClusterID() != "c1" || s.ClusterVersion() != 1 {
				t.Fatalf("bootstrapped=%v id=%q version=%d", s.Bootstrapped(), s.ClusterID(), s.ClusterVersion())
			}
			if got, want := s.Catalog().Len(), len(tc.b.InitialSplits)+1; got != want {
				t.Fatalf("%d routes, want %d", got, want)
			}
			if s.Config().GetThreshold() != 50000 || s.Config().GetTopKeyAbsoluteFloor() != 25000 {
				t.Fatalf("defaults not applied: %v", s.Config())
			}
			if r.CatalogVersion != 1 || r.Config == nil || r.Switch == nil {
				t.Fatalf("result %v", r.CommandResult)
			}
			if s.History().Base() != 1 || s.Detector() == nil {
				t.Fatal("history or detector state missing")
			}
		})
	}
}

func TestBootstrapSwitchAndDerivedDefaults(t *testing.T) {
	h := newHarness(t, Options{})
	r := h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c1", AutoSplit: true,
		Config: &api.Config{Threshold: 1000, CooldownMs: 5000, StepMs: 1000}}}})
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	s := h.state()
	sw := s.Switch()
	if !sw.GetEnabled() || sw.GetActor() != "bootstrap" || sw.GetSource() != api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG ||
		sw.GetChangedAtHlc() != s.LastHLC() {
		t.Fatalf("switch %v", sw)
	}
	c := s.Config()
	if c.GetTopKeyAbsoluteFloor() != 500 || c.GetOpTtlMs() != 5000 || c.GetGraceMs() != 500 || c.GetBuckets() != 16 {
		t.Fatalf("derived defaults: %v", c)
	}
	if d := s.DetectorConfig(); d.Threshold != 1000 || d.CooldownMs != 5000 || d.TopKeyAbsoluteFloor != 500 {
		t.Fatalf("detector config %+v", d)
	}
}

func TestBootstrapTwice(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	before := h.state()
	r := h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c2"}}})
	wantCode(t, r, api.ResultCode_RESULT_CODE_ALREADY_BOOTSTRAPPED)
	assertUnchanged(t, before, h.state())
}

func TestBootstrapVersionAboveSupportedHalts(t *testing.T) {
	h := newHarness(t, Options{})
	before := h.state()
	h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c1", ClusterVersion: clusterversion.Supported + 1}}})
	if len(h.halts) != 1 {
		t.Fatalf("halts %v", h.halts)
	}
	if h.state() != before {
		t.Fatal("a halted entry published a state")
	}
}

func TestCommandsNeedBootstrap(t *testing.T) {
	cmds := map[string]*api.Command{
		"advance_ceiling": {Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: 5}}},
		"set_member":      {Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n1", SupportedVersion: 1}}}},
		"remove_member":   {Body: &api.Command_RemoveMember{RemoveMember: &api.RemoveMember{NodeId: "n1"}}},
		"split_range":     split(1, "k"),
		"observe_column":  {Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{WindowStartMs: 0, AtMs: 1000}}},
		"set_auto_split":  operatorSwitch(true),
		"set_config":      setConfig(&api.ConfigPatch{Threshold: new(uint64(5))}),
		"abort_op":        abort(1, "x"),
	}
	for name, c := range cmds {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			before := h.state()
			wantCode(t, h.run(c), api.ResultCode_RESULT_CODE_NOT_BOOTSTRAPPED)
			assertUnchanged(t, before, h.state())
		})
	}
}

func TestAdvanceCeiling(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	adv := func(ms uint64) *api.Command {
		return &api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: ms}}}
	}
	for _, tc := range []struct{ arg, want uint64 }{{1000, 1000}, {5000, 5000}, {3000, 5000}, {5000, 5000}, {5001, 5001}} {
		wantCode(t, h.run(adv(tc.arg)), api.ResultCode_RESULT_CODE_OK)
		if got := h.state().CeilingMs(); got != tc.want {
			t.Fatalf("AdvanceCeiling(%d): ceiling %d, want %d", tc.arg, got, tc.want)
		}
	}
}

func member(id string, version uint32) *api.Command {
	return &api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{
		NodeId: id, GrpcAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", SupportedVersion: version}}}}
}

func admit(id, raftAddr string) *api.Command {
	return &api.Command{Body: &api.Command_AdmitMember{AdmitMember: &api.AdmitMember{NodeId: id, RaftAddr: raftAddr, Actor: "alice"}}}
}

// Admissions (cluster version 2): admitted ids wait for their node; the
// member record or a removal ends them; version 1 refuses the command.
func TestAdmissions(t *testing.T) {
	v1 := bootstrappedAt(t, clusterversion.Version1, nil, nil)
	before := v1.state()
	wantCode(t, v1.run(admit("n4", "127.0.0.1:9")), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
	assertUnchanged(t, before, v1.state())

	h := bootstrappedAt(t, clusterversion.Version2, nil, nil)
	h.run(member("n1", clusterversion.Version2))
	for _, tc := range []struct {
		cmd  *api.Command
		code api.ResultCode
	}{
		{admit("N4", "127.0.0.1:9"), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT},
		{admit("n4", ""), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT},
		{admit("n1", "127.0.0.1:9"), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT},
	} {
		before := h.state()
		wantCode(t, h.run(tc.cmd), tc.code)
		assertUnchanged(t, before, h.state())
	}
	wantCode(t, h.run(admit("n4", "127.0.0.1:9")), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(admit("n5", "127.0.0.1:8")), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(admit("n4", "127.0.0.1:7")), api.ResultCode_RESULT_CODE_OK)
	if a, ok := h.state().Admission("n4"); !ok || a.GetRaftAddr() != "127.0.0.1:7" || a.GetActor() != "alice" || len(h.state().Admissions()) != 2 {
		t.Fatalf("admissions %v", h.state().Admissions())
	}
	wantCode(t, h.run(member("n4", clusterversion.Version2)), api.ResultCode_RESULT_CODE_OK)
	if _, ok := h.state().Admission("n4"); ok {
		t.Fatal("a joined node kept its admission")
	}
	wantCode(t, h.run(&api.Command{Body: &api.Command_RemoveMember{RemoveMember: &api.RemoveMember{NodeId: "n5"}}}), api.ResultCode_RESULT_CODE_OK)
	if len(h.state().Admissions()) != 0 {
		t.Fatalf("admissions %v after remove", h.state().Admissions())
	}
	wantCode(t, h.run(&api.Command{Body: &api.Command_RemoveMember{RemoveMember: &api.RemoveMember{NodeId: "n5"}}}), api.ResultCode_RESULT_CODE_MEMBER_NOT_FOUND)
}

func TestMembers(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	for _, id := range []string{"n3", "n1", "n2"} {
		wantCode(t, h.run(member(id, 1)), api.ResultCode_RESULT_CODE_OK)
	}
	wantCode(t, h.run(member("n2", 1)), api.ResultCode_RESULT_CODE_OK) // upsert
	var ids []string
	for _, m := range h.state().Members() {
		ids = append(ids, m.GetNodeId())
	}
	if strings.Join(ids, ",") != "n1,n2,n3" {
		t.Fatalf("members %v, want sorted n1,n2,n3", ids)
	}
	if m, ok := h.state().Member("n2"); !ok || m.GetRaftAddr() != "127.0.0.1:2" {
		t.Fatalf("Member(n2) = %v, %v", m, ok)
	}
	wantCode(t, h.run(&api.Command{Body: &api.Command_RemoveMember{RemoveMember: &api.RemoveMember{NodeId: "n2"}}}),
		api.ResultCode_RESULT_CODE_OK)
	if _, ok := h.state().Member("n2"); ok || len(h.state().Members()) != 2 {
		t.Fatal("n2 not removed")
	}
}

func TestMemberRejections(t *testing.T) {
	tests := []struct {
		name string
		c    *api.Command
		code api.ResultCode
		msg  string
	}{
		{"no member", &api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{}}}, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "member: required"},
		{"empty node id", member("", 1), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "member.node_id"},
		{"version 0", member("n9", 0), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "member.supported_version"},
		{"remove unknown", &api.Command{Body: &api.Command_RemoveMember{RemoveMember: &api.RemoveMember{NodeId: "zz"}}}, api.ResultCode_RESULT_CODE_MEMBER_NOT_FOUND, "zz"},
		{"remove empty", &api.Command{Body: &api.Command_RemoveMember{RemoveMember: &api.RemoveMember{}}}, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "node_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := bootstrapped(t, nil, nil)
			h.run(member("n1", 1))
			before := h.state()
			r := h.run(tc.c)
			wantCode(t, r, tc.code)
			if !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("message %q does not name %q", r.Message, tc.msg)
			}
			assertUnchanged(t, before, h.state())
		})
	}
}

// The cluster version follows the lowest supported version of the members
// upwards only; a version above this build halts instead of diverging.
func TestClusterVersion(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	h.run(member("n1", 1))
	if v := h.state().ClusterVersion(); v != 1 {
		t.Fatalf("version %d", v)
	}
	before := h.state()
	h.run(member("n1", clusterversion.Supported+1))
	if len(h.halts) != 1 || h.state() != before {
		t.Fatalf("version above supported: halts %v, state replaced %v", h.halts, h.state() != before)
	}
}

// The state check marker is a version-2 command: refused below it with the
// state unchanged; at version 2 it hands the state at its index to the
// hook before publishing, and changes nothing replicated.
func TestCheckState(t *testing.T) {
	type capture struct {
		index uint64
		s     *State
	}
	for _, version := range []uint32{clusterversion.Version1, clusterversion.Version2} {
		var got []capture
		h := &harness{t: t, ms: startMs}
		h.f = newQuiet(Options{Halt: func(err error) { h.halts = append(h.halts, err) }, OnCheckState: func(i uint64, s *State) {
			if h.f.State().Index() >= i {
				t.Errorf("state at %d published before the capture", i)
			}
			got = append(got, capture{i, s})
		}})
		h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c1", GroupId: 1, ClusterVersion: version}}})
		before := h.f.State()
		r := h.run(&api.Command{Body: &api.Command_CheckState{CheckState: &api.CheckState{Actor: "op"}}})
		after := h.f.State()
		if version < clusterversion.Version2 {
			if r.Code != api.ResultCode_RESULT_CODE_INVALID_ARGUMENT || len(got) != 0 {
				t.Fatalf("v1: check_state answered %v %q, %d captures; want refused, none", r.Code, r.Message, len(got))
			}
			continue
		}
		if r.Code != api.ResultCode_RESULT_CODE_OK || len(got) != 1 || got[0].index != h.index || got[0].s != after {
			t.Fatalf("v2: %v %q, captures %+v; want OK and the published state at %d", r.Code, r.Message, got, h.index)
		}
		b, a := before.Proto(), after.Proto()
		b.LastHlc, a.LastHlc = 0, 0
		if !proto.Equal(b, a) {
			t.Fatalf("the marker changed replicated state")
		}
	}
}

package fsm

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// withID sets a request id on c.
func withID(c *api.Command, rid string) *api.Command {
	c.RequestId = rid
	return c
}

// From cluster version 3 a request id is bound to its first request: a
// retry of that request (a new leader stamp, another note) gets the first
// answer; any other request under the id (another route, key, method,
// argument or actor) is refused with REQUEST_ID_REUSED naming the id and
// the first request, applies nothing and leaves the id's record as it was.
func TestRequestIDBoundToItsRequest(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, nil, nil)
	first := h.run(withID(split(1, "user:9"), "test-req-1"))
	wantCode(t, first, api.ResultCode_RESULT_CODE_OK)
	rec := h.state().Proto().Requests[0]
	if len(rec.GetFingerprint()) != 32 || rec.GetDescription() != `split r1 at "user:9" by test` {
		t.Fatalf("record %v", rec)
	}

	retry := withID(split(1, "user:9"), "test-req-1")
	retry.GetSplitRange().Note = "reworded self-declared text"
	retry.MinVersion = clusterversion.Version3
	before := h.state()
	r := h.run(retry)
	if !r.Duplicate || r.CommandResult != first.CommandResult {
		t.Fatalf("retry answered %v (duplicate %v), want the first answer", r.CommandResult, r.Duplicate)
	}
	assertUnchanged(t, before, h.state())

	other := func(f func(*api.SplitRange)) *api.Command {
		c := withID(split(1, "user:9"), "test-req-1")
		f(c.GetSplitRange())
		return c
	}
	for _, tc := range []struct {
		name string
		cmd  *api.Command
		this string
	}{
		{"another route", other(func(s *api.SplitRange) { s.RouteId = 3 }), `split r3 at "user:9" by test`},
		{"another key", other(func(s *api.SplitRange) { s.SplitKey = []byte("user:55") }), `split r1 at "user:55"`},
		{"a compare-and-set added", other(func(s *api.SplitRange) { s.ExpectedVersion = proto.Uint64(2) }), "if the catalog is at version 2"},
		{"another actor", other(func(s *api.SplitRange) { s.Actor = "mallory" }), "by mallory"},
		{"another method", withID(operatorSwitch(false), "test-req-1"), `autosplit disable (reason "test") by alice`},
		{"a config patch", withID(setConfig(&api.ConfigPatch{Threshold: proto.Uint64(5000)}), "test-req-1"), "config set threshold=5000 by alice"},
		{"an abort", withID(abort(7, "no"), "test-req-1"), `abort op7 (reason "no") by alice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.state()
			r := h.run(tc.cmd)
			wantCode(t, r, api.ResultCode_RESULT_CODE_REQUEST_ID_REUSED)
			if r.Duplicate {
				t.Fatal("a refused reuse marked duplicate")
			}
			for _, want := range []string{`request id test-req-1 was used for split r1 at "user:9" by test`, tc.this, "new request id"} {
				if !strings.Contains(r.Message, want) {
					t.Errorf("message %q lacks %q", r.Message, want)
				}
			}
			assertUnchanged(t, before, h.state())
		})
	}
	if got, _ := h.state().RequestResult("test-req-1"); got != first.CommandResult {
		t.Fatal("the id's first answer was replaced")
	}
}

// Below version 3 the table keeps no fingerprint and a known id answers
// with its first result whatever the request (the version 2 behaviour,
// which every replica of a mixed cluster keeps); records written then stay
// unbound after the raise to 3, while ids first used at 3 are bound.
func TestRequestIDUnboundBelowVersion3(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version2, nil, nil)
	first := h.run(withID(split(1, "user:9"), "old"))
	wantCode(t, first, api.ResultCode_RESULT_CODE_OK)
	if rec := h.state().Proto().Requests[0]; rec.GetFingerprint() != nil || rec.GetDescription() != "" {
		t.Fatalf("a version 2 record carries %v", rec)
	}
	if r := h.run(withID(operatorSwitch(false), "old")); !r.Duplicate || r.CommandResult != first.CommandResult || !h.state().Switch().GetEnabled() {
		t.Fatalf("at version 2 another request under a known id answered %v (duplicate %v)", r.CommandResult, r.Duplicate)
	}
	h.run(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n1", SupportedVersion: clusterversion.Version3}}}})
	if !h.state().Has(clusterversion.RequestFingerprints) {
		t.Fatal("not raised to version 3")
	}
	if r := h.run(withID(operatorSwitch(false), "old")); !r.Duplicate {
		t.Fatalf("an unbound version 2 record refused a reuse: %v", r.CommandResult)
	}
	wantCode(t, h.run(withID(split(2, "user:5"), "new")), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(withID(split(4, "x"), "new")), api.ResultCode_RESULT_CODE_REQUEST_ID_REUSED)
}

// The fingerprint is generic over the command body: every body kind, and
// every field of it but the note, changes it; the envelope does not.
func TestRequestFingerprintCoversEveryField(t *testing.T) {
	base := func() *api.Command {
		return &api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{RouteId: 1, SplitKey: []byte("k"), Actor: "a"}}}
	}
	fp := requestFingerprint(base())
	env := base()
	env.Hlc, env.MinVersion, env.RequestId = 99, 3, "x"
	env.GetSplitRange().Note = "n"
	if !bytes.Equal(requestFingerprint(env), fp) {
		t.Fatal("the envelope or the note changed the fingerprint")
	}
	if c := base(); requestFingerprint(c) == nil || c.GetSplitRange().GetNote() != "" || !proto.Equal(c, base()) {
		t.Fatal("fingerprinting changed the command")
	}
	// Every other field of every body kind, set to a non-zero value.
	m := (&api.Command{}).ProtoReflect()
	oneof := m.Descriptor().Oneofs().ByName("body")
	seen := map[string]bool{}
	for i := range oneof.Fields().Len() {
		fd := oneof.Fields().Get(i)
		empty := &api.Command{}
		empty.ProtoReflect().Set(fd, empty.ProtoReflect().NewField(fd))
		efp := requestFingerprint(empty)
		if seen[string(efp)] {
			t.Errorf("body %s fingerprints like another body", fd.Name())
		}
		seen[string(efp)] = true
		body := empty.ProtoReflect().Get(fd).Message().Descriptor()
		for j := range body.Fields().Len() {
			f := body.Fields().Get(j)
			c := &api.Command{}
			msg := c.ProtoReflect().Mutable(fd).Message()
			setNonZero(msg, f)
			if got := requestFingerprint(c); bytes.Equal(got, efp) != (f.Name() == "note") {
				t.Errorf("%s.%s: changing it changes the fingerprint: %v", fd.Name(), f.Name(), !bytes.Equal(got, efp))
			}
		}
	}
}

// setNonZero gives field f of m a value other than its zero value.
func setNonZero(m protoreflect.Message, f protoreflect.FieldDescriptor) {
	one := func() protoreflect.Value {
		switch f.Kind() {
		case protoreflect.BoolKind:
			return protoreflect.ValueOfBool(true)
		case protoreflect.StringKind:
			return protoreflect.ValueOfString("x")
		case protoreflect.BytesKind:
			return protoreflect.ValueOfBytes([]byte{1})
		case protoreflect.EnumKind:
			return protoreflect.ValueOfEnum(1)
		case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
			return protoreflect.ValueOfInt32(1)
		case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
			return protoreflect.ValueOfInt64(1)
		case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
			return protoreflect.ValueOfUint32(1)
		case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			return protoreflect.ValueOfUint64(1)
		case protoreflect.FloatKind:
			return protoreflect.ValueOfFloat32(1)
		case protoreflect.DoubleKind:
			return protoreflect.ValueOfFloat64(1)
		}
		return protoreflect.Value{}
	}
	switch {
	case f.IsMap():
		panic("no command field is a map: " + string(f.FullName()))
	case f.IsList():
		l := m.Mutable(f).List()
		if f.Message() != nil {
			l.Append(protoreflect.ValueOfMessage(l.NewElement().Message()))
		} else {
			l.Append(one())
		}
	case f.Message() != nil:
		m.Mutable(f)
	default:
		m.Set(f, one())
	}
}

// A bound record survives a snapshot and stays bound; a snapshot with a
// bound record below version 3, or a malformed binding, is refused.
func TestRequestBindingRestore(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, nil, nil)
	h.run(withID(split(1, "user:9"), "r1"))
	p := proto.Clone(h.state().Proto()).(*api.StateSnapshot)
	h2 := newHarness(t, Options{})
	h2.install(p)
	h2.index, h2.ms = h.index, h.ms
	wantCode(t, h2.run(withID(split(3, "x"), "r1")), api.ResultCode_RESULT_CODE_REQUEST_ID_REUSED)

	for _, tc := range []struct {
		name string
		edit func(p *api.StateSnapshot)
	}{
		// (Without the version 3 merge settings, heat history and operator
		// marks, which restore refuses first at version 2.)
		{"bound below version 3", func(p *api.StateSnapshot) {
			p.ClusterVersion = clusterversion.Version2
			clearMerge(p.Config)
			p.HeatHistory = nil
			unmarkStarts(p)
		}},
		{"short fingerprint", func(p *api.StateSnapshot) { p.Requests[0].Fingerprint = p.Requests[0].Fingerprint[:8] }},
		{"no description", func(p *api.StateSnapshot) { p.Requests[0].Description = "" }},
		{"a description without a fingerprint", func(p *api.StateSnapshot) { p.Requests[0].Fingerprint = nil }},
	} {
		q := proto.Clone(p).(*api.StateSnapshot)
		tc.edit(q)
		if _, err := stateFromProto(q, h.f.limits()); err == nil || !strings.Contains(err.Error(), "requests[0]") {
			t.Errorf("%s: restore answered %v", tc.name, err)
		}
	}
}

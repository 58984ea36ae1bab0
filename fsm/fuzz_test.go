package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// FuzzDecodeCommand: arbitrary entry bytes decode to a command with a body
// or fail with ErrDecode/ErrUnknownCommand; a decoded command re-encodes
// and decodes to the same message. Never panics.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []*api.Command{split(1, "k"), splitCAS(2, "a", 3), column(0, 1000, &api.ColumnRow{RouteId: 1, Buckets: []uint64{1, 2}}),
		operatorSwitch(true), setConfig(&api.ConfigPatch{Threshold: new(uint64(5))}), abort(1, "x"), member("n1", 1), mergeCAS(2, 3, 4)} {
		b, _ := EncodeCommand(c)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrUnknownCommand) {
				t.Fatalf("unexpected error class: %v", err)
			}
			return
		}
		if c.GetBody() == nil {
			t.Fatal("decoded a command without a body")
		}
		again, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := DecodeCommand(again)
		if err != nil || !bytes.Equal(mustEncode(t, c2), again) {
			t.Fatalf("re-encode round trip: %v", err)
		}
	})
}

func mustEncode(t *testing.T, c *api.Command) []byte {
	b, err := EncodeCommand(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzRestore: arbitrary snapshot bytes either restore to a state that
// passes every check and persists back to the same state, or fail with
// ErrSnapshot leaving the FSM untouched; it halts exactly when the error is
// ErrVersion (a cluster version this build cannot apply). Never panics;
// allocation follows the bytes present (frames grow as data arrives).
func FuzzRestore(f *testing.F) {
	h := bootstrapped(f, [][]byte{[]byte("m")}, nil)
	h.run(split(1, "g"))
	h.run(member("n1", 1))
	f.Add(persist(f, h.f))
	// A version 3 state with a merged route.
	m := bootstrappedAt(f, clusterversion.Version3, [][]byte{[]byte("f"), []byte("m")}, nil)
	m.run(merge(1, 2))
	f.Add(persist(f, m.f))
	f.Add(persist(f, newQuiet(Options{})))
	f.Add(persist(f, heatState(f, 6, 8).f)) // a heat history in pages
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		var halted error
		fsm := newQuiet(Options{Halt: func(err error) { halted = err }})
		before := fsm.State()
		err := fsm.Restore(io.NopCloser(bytes.NewReader(b)))
		if (halted != nil) != errors.Is(err, ErrVersion) {
			t.Fatalf("halted with %v on error %v: want a halt exactly on ErrVersion", halted, err)
		}
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("error not ErrSnapshot: %v", err)
			}
			if fsm.State() != before {
				t.Fatal("failed restore replaced the state")
			}
			return
		}
		s := fsm.State()
		if s.Bootstrapped() {
			if err := s.Catalog().CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		}
		again := newQuiet(Options{})
		if err := restore(again, persist(t, fsm)); err != nil || again.State().Hash() != s.Hash() {
			t.Fatalf("restored state does not round trip: %v", err)
		}
	})
}

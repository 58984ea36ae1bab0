package catalog

import (
	"errors"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func splitN(t testing.TB, c *Catalog, keys ...string) *Catalog {
	for i, k := range keys {
		next, _, err := c.Split(c.Lookup([]byte(k)).ID, []byte(k), uint64(100+i))
		if err != nil {
			t.Fatal(err)
		}
		c = next
	}
	return c
}

func TestCodecRoundTrip(t *testing.T) {
	c, _ := New([][]byte{[]byte("g")}, 3)
	c = splitN(t, c, "b", "x", "\x00", "gg")
	got, err := Decode(c.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !Equal(c, got) {
		t.Fatalf("round trip changed the catalog")
	}
}

func TestDecodeRejects(t *testing.T) {
	c, _ := New(nil, 1)
	good := c.Encode()
	withUnknown := protowire.AppendTag(append([]byte{}, good...), 99, protowire.VarintType)
	withUnknown = protowire.AppendVarint(withUnknown, 1)

	broken := c.ToProto()
	broken.Routes[0].End = []byte("m") // leaves a gap to +inf
	brokenBytes, _ := proto.Marshal(broken)

	nested := c.ToProto()
	nested.Routes[0].ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 50, protowire.VarintType), 7))
	nestedBytes, _ := proto.Marshal(nested)

	for name, b := range map[string][]byte{
		"unknown top-level field": withUnknown,
		"unknown nested field":    nestedBytes,
		"trailing garbage":        append(append([]byte{}, good...), 0xff, 0xff),
		"invariant broken":        brokenBytes,
		"empty":                   nil,
	} {
		if _, err := Decode(b); err == nil {
			t.Errorf("%s: decoded without error", name)
		} else if name == "invariant broken" && !errors.Is(err, ErrInvariant) {
			t.Errorf("%s: err = %v, want ErrInvariant", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	c, _ := New([][]byte{[]byte("k")}, 1)
	f.Add(c.Encode())
	f.Add(splitN(f, c, "a", "z").Encode())
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}) // huge length prefix
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Decode(b)
		if err != nil {
			return
		}
		if err := got.CheckInvariants(); err != nil {
			t.Fatalf("decoded catalog breaks invariants: %v", err)
		}
		again, err := Decode(got.Encode())
		if err != nil || !Equal(got, again) {
			t.Fatalf("round trip of a decoded catalog failed: %v", err)
		}
	})
}

// A decoded snapshot owns its keys: mutating the input afterwards must not
// reach into the catalog.
func TestDecodeCopiesKeys(t *testing.T) {
	c := splitN(t, mustNew(t), "abc")
	b := c.Encode()
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 0
	}
	if err := got.CheckInvariants(); err != nil || got.Lookup([]byte("abc")).ID != 3 {
		t.Fatalf("decoded catalog aliases its input: %v", err)
	}
}

func mustNew(t testing.TB) *Catalog {
	c, err := New(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var _ = api.RouteState_ROUTE_STATE_ACTIVE

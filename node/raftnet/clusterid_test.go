package raftnet

import (
	"bytes"
	"testing"
)

// FuzzReadClusterFrame: any bytes a peer sends decode to an id within
// the bound or to an error, never a panic; a frame this node writes reads
// back as the id it carried, consuming exactly its bytes.
func FuzzReadClusterFrame(f *testing.F) {
	f.Add([]byte{1, 4, 'a', 'b', 'c', 'd'})
	f.Add([]byte{1, 0})
	f.Add([]byte{2, 1, 'x'})
	f.Add([]byte{1, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		id, err := readClusterFrame(r)
		if err != nil {
			return
		}
		if len(id) > maxClusterIDLen || len(b)-r.Len() != 2+len(id) {
			t.Fatalf("read %q from %x, consuming %d bytes", id, b, len(b)-r.Len())
		}
		var w bytes.Buffer
		if err := writeClusterFrame(&w, id); err != nil {
			t.Fatal(err)
		}
		if back, err := readClusterFrame(&w); err != nil || back != id {
			t.Fatalf("round trip of %q: %q, %v", id, back, err)
		}
	})
}

package backupfile_test

import (
	"bytes"
	"testing"

	"github.com/hotsplit/hotsplit/backupfile"
	"github.com/hotsplit/hotsplit/fsm"
)

// TestFixtureRestores runs the checks a restore runs on the old file
// (node's recovery: checksum, then the state's invariants, hash, index and
// cluster id against the header), so an existing backup still seeds a
// cluster.
func TestFixtureRestores(t *testing.T) {
	b, err := backupfile.Open("testdata/format1.hsnap")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	st, err := fsm.ReadState(b.Payload())
	if err != nil {
		t.Fatal(err)
	}
	if h := st.Hash(); !bytes.Equal(h[:], b.Header.GetStateHash()) {
		t.Fatalf("state hashes to %x, header says %x", h, b.Header.GetStateHash())
	}
	if st.Index() != b.Header.GetIndex() || st.ClusterID() != b.Header.GetClusterId() || st.Catalog().Len() != int(b.Header.GetRoutes()) {
		t.Fatalf("state at index %d of %q with %d routes, header %v", st.Index(), st.ClusterID(), st.Catalog().Len(), b.Header)
	}
}

package node

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/node/storage"
)

// A data dir that has run at a cluster version above this build's is
// refused before raft starts, naming both versions.
func TestIntegrationDataDirAboveSupportedVersionIsRefused(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 1, nil)
	cfg := c.cfgs["n1"]
	testutil.WaitFor(t, 5*time.Second, "cluster version recorded", func() bool {
		v, err := c.node("n1").stores.Stable.GetUint64(storage.ClusterVersionKey)
		return err == nil && v == uint64(c.node("n1").FSM().State().ClusterVersion())
	})
	c.stop("n1")

	stores, err := storage.Open(storage.Config{DataDir: cfg.DataDir, Halt: func(err error) { t.Error(err) }, Logger: quietLogger(), RaftLogger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := stores.Stable.SetUint64(storage.ClusterVersionKey, clusterversion.Supported+1); err != nil {
		t.Fatal(err)
	}
	stores.Close()

	_, err = Start(cfg)
	if err == nil {
		t.Fatal("a data dir at a newer cluster version started")
	}
	if want := "has run at cluster version"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

// checksummedFromKey is the stable-store key that marks where this build's
// checksums begin (and that every stable-store value carries a CRC).
var checksummedFromKey = []byte("hotsplit_checksummed_from")

// A data dir written by an earlier build — entries without checksums,
// stable-store values without CRC — starts under this build: its values
// are sealed once, checksummed_from marks where checksums begin, the old
// entries are read as legacy (and counted), and new ones are checksummed.
func TestIntegrationLegacyDataDirIsAdopted(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 1, nil)
	c.mustSplit("n1", "m")
	want := businessHash(t, c.node("n1"))
	cfg := c.cfgs["n1"]
	c.stop("n1")

	// Rewrite it as an earlier build left it: the stable-store values an
	// earlier build wrote lose their CRC, and the mark of where checksums
	// begin goes.
	path := filepath.Join(cfg.DataDir, "raft.db")
	raw, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := raw.LastIndex()
	for i := uint64(1); i <= last; i++ {
		var l raft.Log
		if err := raw.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		l.Extensions = nil
		if err := raw.StoreLog(&l); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	legacy := int(last)
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		conf := tx.Bucket([]byte("conf"))
		for _, k := range []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand", string(storage.ClusterVersionKey)} {
			if v := conf.Get([]byte(k)); v != nil {
				if err := conf.Put([]byte(k), bytes.Clone(v[:len(v)-4])); err != nil {
					return err
				}
			}
		}
		return conf.Delete(checksummedFromKey)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	n := c.restart("n1")
	c.waitLeaderReady(10 * time.Second)
	if got := businessHash(t, n); got != want {
		t.Fatalf("after adopting the legacy data dir the state is %s, want %s", got, want)
	}
	if got := n.stores.LegacyEntries(); got < uint64(legacy) {
		t.Fatalf("%d legacy entries read, want at least %d", got, legacy)
	}
	from, err := n.stores.Stable.GetUint64(checksummedFromKey)
	if err != nil || from != uint64(legacy)+1 {
		t.Fatalf("checksummed_from = %d (%v), want %d", from, err, legacy+1)
	}
	c.mustSplit("n1", "t") // written with a checksum from here on
	c.stop("n1")
	c.restart("n1")
	c.waitLeaderReady(10 * time.Second)
}

package node

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/hotsplit/hotsplit/fsm"
)

// A data dir that has run at a cluster version above this build's is
// refused before raft starts, naming both versions.
func TestIntegrationDataDirAboveSupportedVersionIsRefused(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 1, nil)
	cfg := c.cfgs["n1"]
	waitFor(t, 5*time.Second, "cluster version recorded", func() bool {
		v, err := c.node("n1").store.GetUint64(clusterVersionKey)
		return err == nil && v == uint64(c.node("n1").FSM().State().ClusterVersion())
	})
	c.stop("n1")

	store, err := raftboltdb.NewBoltStore(filepath.Join(cfg.DataDir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	sealed := &checksumStableStore{inner: store, path: "raft.db"}
	if err := sealed.SetUint64(clusterVersionKey, fsm.SupportedVersion+1); err != nil {
		t.Fatal(err)
	}
	store.Close()

	_, err = Start(cfg)
	if err == nil {
		t.Fatal("a data dir at a newer cluster version started")
	}
	if want := "has run at cluster version"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

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

	// Rewrite it as an earlier build left it.
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
		for _, k := range legacyStableKeys {
			if v := conf.Get(k.key); v != nil {
				if err := conf.Put(k.key, bytes.Clone(v[:len(v)-4])); err != nil {
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
	if got := n.legacyEntries.Load(); got < uint64(legacy) {
		t.Fatalf("%d legacy entries read, want at least %d", got, legacy)
	}
	from, err := (&checksumStableStore{inner: n.store, path: path}).GetUint64(checksummedFromKey)
	if err != nil || from != uint64(legacy)+1 {
		t.Fatalf("checksummed_from = %d (%v), want %d", from, err, legacy+1)
	}
	c.mustSplit("n1", "t") // written with a checksum from here on
	c.stop("n1")
	c.restart("n1")
	c.waitLeaderReady(10 * time.Second)
}

//go:build jepsen

package jepsen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"go.etcd.io/bbolt"
)

// The disk faults of the bit-flip nemesis and the storage tests: they
// damage a stopped node's raft.db in place.

// entryValue returns the stored (encoded) value of log entry index,
// through a read-only bbolt open of a stopped node's raft.db.
func entryValue(dbPath string, index uint64) ([]byte, error) {
	db, err := bbolt.Open(dbPath, 0o600, &bbolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("open %s read-only: %w", dbPath, err)
	}
	defer db.Close()
	var val []byte
	err = db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte("logs"))
		if b == nil {
			return fmt.Errorf("%s has no logs bucket", dbPath)
		}
		v := b.Get(binary.BigEndian.AppendUint64(nil, index))
		if v == nil {
			return fmt.Errorf("%s holds no entry %d", dbPath, index)
		}
		val = bytes.Clone(v)
		return nil
	})
	return val, err
}

// damageEntry rewrites raft.db so that entry index's stored value is
// damaged by damage(value, file offset of the value): at every place the
// file holds that value — the live leaf page, and stale copies bbolt's
// copy-on-write left in free pages — so the live one is hit for sure. It
// returns how many places it changed.
func damageEntry(dbPath string, index uint64, damage func(file []byte, at int, val []byte)) (int, error) {
	val, err := entryValue(dbPath, index)
	if err != nil {
		return 0, err
	}
	file, err := os.ReadFile(dbPath)
	if err != nil {
		return 0, err
	}
	n := 0
	for from := 0; ; {
		i := bytes.Index(file[from:], val)
		if i < 0 {
			break
		}
		damage(file, from+i, val)
		from += i + len(val)
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: entry %d's value not found in the file", dbPath, index)
	}
	return n, os.WriteFile(dbPath, file, 0o600)
}

// flipDataByte flips one byte in the middle of entry index's Data (a
// command's bytes, given as data) in a stopped node's raft.db.
func flipDataByte(dbPath string, index uint64, data []byte) (int, error) {
	return damageEntry(dbPath, index, func(file []byte, at int, val []byte) {
		if j := bytes.Index(val, data); j >= 0 {
			file[at+j+len(data)/2] ^= 0x20
		}
	})
}

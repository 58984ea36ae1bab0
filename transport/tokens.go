package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// ErrTokenFile wraps every refusal of a token file; the message names the
// file, the line and what is wrong.
var ErrTokenFile = errors.New("token file")

// tokenEntry is one line of a token file: `name role sha256-of-token`.
type tokenEntry struct {
	name string
	role Role
	hash [sha256.Size]byte
}

// TokenTable holds the bearer tokens of --tokenFile for clients that cannot
// hold a certificate. Only SHA-256 hashes are stored; a presented token is
// hashed and compared with every entry in constant time.
//
// Concurrency: safe for concurrent use; the table is swapped atomically on
// reload.
type TokenTable struct {
	path    string
	log     *slog.Logger
	entries atomic.Pointer[[]tokenEntry]
	stamp   fileStamp // touched only by Watch's goroutine after Load
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadTokenFile reads path; it refuses a file that group or others may
// read, a line that is not `name role sha256hex`, a role that is not one of
// reporter, reader, operator, admin (node identities need certificates).
func LoadTokenFile(path string, log *slog.Logger) (*TokenTable, error) {
	if log == nil {
		log = slog.Default()
	}
	t := &TokenTable{path: path, log: log}
	entries, stamp, err := readTokenFile(path)
	if err != nil {
		return nil, err
	}
	t.entries.Store(&entries)
	t.stamp = stamp
	return t, nil
}

func readTokenFile(path string) ([]tokenEntry, fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("%w %s: %w", ErrTokenFile, path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fileStamp{}, fmt.Errorf("%w %s: mode %v lets group or others read it; chmod 600 it", ErrTokenFile, path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("%w %s: %w", ErrTokenFile, path, err)
	}
	entries, err := parseTokens(b)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("%w %s: %w", ErrTokenFile, path, err)
	}
	return entries, fileStamp{fi.ModTime(), fi.Size()}, nil
}

func parseTokens(b []byte) ([]tokenEntry, error) {
	var out []tokenEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		f := strings.Fields(text)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want `name role sha256hex`, got %d fields", line, len(f))
		}
		role, ok := ParseRole(f[1])
		if !ok || role == RoleNode {
			return nil, fmt.Errorf("line %d: role %q is not one of reporter, reader, operator, admin", line, f[1])
		}
		h, err := hex.DecodeString(f[2])
		if err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("line %d: %q is not a hex SHA-256 (64 hex digits)", line, f[2])
		}
		e := tokenEntry{name: f[0], role: role}
		copy(e.hash[:], h)
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// Lookup returns the identity a token belongs to. Every entry is compared,
// in constant time, whatever matches.
func (t *TokenTable) Lookup(token string) (*Principal, bool) {
	sum := sha256.Sum256([]byte(token))
	var found *tokenEntry
	entries := *t.entries.Load()
	for i := range entries {
		if subtle.ConstantTimeCompare(sum[:], entries[i].hash[:]) == 1 {
			found = &entries[i]
		}
	}
	if found == nil {
		return nil, false
	}
	return &Principal{Name: found.name, Roles: []Role{found.role}, Via: "token"}, true
}

// Watch re-reads the file whenever its modification time or size changes,
// until ctx ends. A file that no longer loads keeps the previous table and
// logs one line per change; an empty file is ignored (to revoke every
// token, leave a comment line). Replace the file by renaming a complete one
// into place.
func (t *TokenTable) Watch(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fi, err := os.Stat(t.path)
		if err == nil && ((fileStamp{fi.ModTime(), fi.Size()}) == t.stamp || fi.Size() == 0) {
			// Unchanged, or emptied: most likely rewritten in place and
			// caught mid-write; the completed file is a change of its own.
			continue
		}
		entries, stamp, err := readTokenFile(t.path)
		if err != nil {
			if fi != nil {
				t.stamp = fileStamp{fi.ModTime(), fi.Size()} // one line per change, not per tick
			}
			t.log.Warn("token file not reloaded; keeping the previous tokens", "reason", err.Error())
			continue
		}
		t.entries.Store(&entries)
		t.stamp = stamp
		t.log.Info("token file reloaded", "path", t.path, "tokens", len(entries))
	}
}

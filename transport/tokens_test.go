package transport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotsplit/hotsplit/internal/testutil"
)

func tokenLine(name, role, token string) string {
	sum := sha256.Sum256([]byte(token))
	return name + " " + role + " " + hex.EncodeToString(sum[:]) + "\n"
}

func writeTokens(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestTokenFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, "# reporters without certificates\n\n"+tokenLine("dn1", "reporter", "s3cret-1")+tokenLine("ops", "operator", "s3cret-2"), 0o600)
	tt, err := LoadTokenFile(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tt.Lookup("s3cret-2")
	if !ok || p.Name != "ops" || !p.Has(RoleOperator) || p.Has(RoleAdmin) || p.Via != "token" {
		t.Fatalf("lookup: %+v %v", p, ok)
	}
	if _, ok := tt.Lookup("s3cret-3"); ok {
		t.Fatal("an unknown token was accepted")
	}
	if _, ok := tt.Lookup(""); ok {
		t.Fatal("an empty token was accepted")
	}
}

func TestTokenFileRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		want          string
	}{
		{"world readable", tokenLine("a", "reader", "x"), 0o644, "chmod 600"},
		{"group readable", tokenLine("a", "reader", "x"), 0o640, "chmod 600"},
		{"two fields", "a reader\n", 0o600, "line 1"},
		{"node role", tokenLine("n1", "node", "x"), 0o600, `role "node"`},
		{"unknown role", tokenLine("a", "root", "x"), 0o600, `role "root"`},
		{"short hash", "a reader abcd\n", 0o600, "SHA-256"},
		{"second line bad", tokenLine("a", "reader", "x") + "b reader zz\n", 0o600, "line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			writeTokens(t, path, tc.content, tc.mode)
			_, err := LoadTokenFile(path, nil)
			if !errors.Is(err, ErrTokenFile) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v, want ErrTokenFile naming the file and %q", err, tc.want)
			}
		})
	}
}

// A change is picked up; a bad file keeps the old table and says so once.
func TestTokenFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, path, tokenLine("a", "reader", "old"), 0o600)
	var logs testutil.LogBuffer
	tt, err := LoadTokenFile(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tt.Watch(ctx, 5*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()

	writeTokens(t, path, tokenLine("a", "reader", "new")+"\n", 0o600)
	testutil.WaitFor(t, 5*time.Second, "new token accepted", func() bool { _, ok := tt.Lookup("new"); return ok })
	if _, ok := tt.Lookup("old"); ok {
		t.Fatal("the replaced token is still accepted")
	}
	writeTokens(t, path, "garbage\n", 0o600)
	testutil.WaitFor(t, 5*time.Second, "reload refusal logged", func() bool { return strings.Contains(logs.String(), "keeping the previous tokens") })
	if _, ok := tt.Lookup("new"); !ok {
		t.Fatal("a bad file replaced the table")
	}
}

package node

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestNodeConfigRequiresTLSOrInsecure(t *testing.T) {
	base := Config{ID: "n1", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:1", GRPCAddr: "127.0.0.1:2"}
	for _, tc := range []struct {
		name string
		tls  *TLSFiles
		ins  bool
		ok   bool
	}{
		{"neither", nil, false, false},
		{"both", &TLSFiles{CertFile: "a", KeyFile: "b", CAFile: "c"}, true, false},
		{"no CA", &TLSFiles{CertFile: "a", KeyFile: "b"}, false, false},
		{"insecure", nil, true, true},
		{"tls", &TLSFiles{CertFile: "a", KeyFile: "b", CAFile: "c"}, false, true},
	} {
		cfg := base
		cfg.TLS, cfg.Insecure = tc.tls, tc.ins
		if err := cfg.validate(); (err == nil) != tc.ok {
			t.Errorf("%s: validate = %v", tc.name, err)
		}
	}
	// A certificate of another node is refused at start, naming both ids.
	f := nodeTLS(t, filepath.Join(t.TempDir(), "certs"), "n2")
	cfg := base
	cfg.TLS = f
	if _, err := Start(cfg); err == nil || !contains(err.Error(), `"n2"`, `"n1"`) {
		t.Fatalf("start with n2's certificate as n1: %v", err)
	}
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

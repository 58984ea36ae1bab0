package node

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// The integrity durations: zero takes the default, negative turns the
// check off (0), positive is kept.
func TestIntegrityDurationSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config, time.Duration)
		get  func(*Config) time.Duration
		def  time.Duration
	}{
		{"MaxClockOffset", func(c *Config, d time.Duration) { c.MaxClockOffset = d }, (*Config).maxClockOffset, DefaultMaxClockOffset},
		{"StateCheckInterval", func(c *Config, d time.Duration) { c.StateCheckInterval = d }, (*Config).stateCheckInterval, DefaultStateCheckInterval},
	} {
		for _, in := range []struct{ d, want time.Duration }{{0, tc.def}, {-time.Second, 0}, {3 * time.Second, 3 * time.Second}} {
			var c Config
			tc.set(&c, in.d)
			if got := tc.get(&c); got != in.want {
				t.Errorf("%s %v: got %v, want %v", tc.name, in.d, got, in.want)
			}
		}
	}
}

// A recovery's clock offset: its own when positive; the node's when its
// own is zero and the node's positive; else the default, even with the
// node's offset check off.
func TestRecoveryClockOffset(t *testing.T) {
	const def = DefaultMaxClockOffset
	for _, tc := range []struct{ recovery, node, want time.Duration }{
		{0, 0, def}, {0, -time.Second, def}, {0, 2 * time.Second, 2 * time.Second},
		{-time.Second, 0, def}, {-time.Second, -time.Second, def}, {-time.Second, 2 * time.Second, def},
		{3 * time.Second, 0, 3 * time.Second}, {3 * time.Second, -time.Second, 3 * time.Second}, {3 * time.Second, 2 * time.Second, 3 * time.Second},
	} {
		c := Config{MaxClockOffset: tc.node, Recovery: Recovery{MaxClockOffset: tc.recovery}}
		if got := c.recoveryClockOffset(); got != tc.want {
			t.Errorf("Recovery.MaxClockOffset %v, MaxClockOffset %v: got %v, want %v", tc.recovery, tc.node, got, tc.want)
		}
	}
}

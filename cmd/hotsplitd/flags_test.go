package main

import (
	"io"
	"strings"
	"testing"
)

// TestTLSFlags: secure by default. No TLS flags and no --insecure is an
// error naming the flags and the fix; the three flags go together;
// --insecure excludes them; --dev makes its own.
func TestTLSFlags(t *testing.T) {
	base := []string{"--id", "n1", "--dataDir", "/tmp/x"}
	for _, tc := range []struct {
		args []string
		want string // "" = accepted
	}{
		{nil, "no TLS certificate: give --tlsCert, --tlsKey and --tlsCA"},
		{[]string{"--tlsCert", "a", "--tlsKey", "b"}, "--tlsCA missing"},
		{[]string{"--tlsCA", "c"}, "--tlsCert and --tlsKey missing"},
		{[]string{"--insecure", "--tlsCA", "c"}, "--insecure together with"},
		{[]string{"--insecure"}, ""},
		{[]string{"--tlsCert", "a", "--tlsKey", "b", "--tlsCA", "c"}, ""},
	} {
		o, err := parseFlags(append(append([]string{}, base...), tc.args...), io.Discard)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want an error saying %q", tc.args, err, tc.want)
		case tc.want == "" && len(tc.args) > 1 && (o.node.TLS == nil || o.node.TLS.CAFile != "c" || o.node.TLS.ReloadInterval <= 0):
			t.Errorf("%q: node TLS %+v", tc.args, o.node.TLS)
		}
	}
	if _, err := parseFlags([]string{"--dev", "--insecure"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--dev") {
		t.Errorf("--dev --insecure: %v", err)
	}
	if o, err := parseFlags([]string{"--id", "n1", "--dataDir", "/tmp/x", "--tlsCert", "a", "--tlsKey", "b", "--tlsCA", "c", "--tlsReloadInterval", "0"}, io.Discard); err != nil || o.node.TLS.ReloadInterval >= 0 {
		t.Errorf("--tlsReloadInterval 0 must mean SIGHUP only: %v %+v", err, o)
	}
}

// The help states the --devLog default the demo uses.
func TestDevLogHelpNamesTheDefault(t *testing.T) {
	var help strings.Builder
	if _, err := parseFlags([]string{"--help"}, &help); err == nil {
		t.Fatal("--help parsed without flag.ErrHelp")
	}
	_, usage, _ := strings.Cut(help.String(), "-devLog")
	usage, _, _ = strings.Cut(usage, "\n  -")
	if want := "(default " + devLogPath("") + ", kept after exit)"; !strings.Contains(usage, want) || strings.Contains(usage, "nodes.log") {
		t.Fatalf("--devLog help %q, want it to name the default: %s", usage, want)
	}
	if devLogPath("x.log") != "x.log" {
		t.Fatal("--devLog x.log is not used as given")
	}
}

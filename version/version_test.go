package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestInfoString(t *testing.T) {
	for _, c := range []struct {
		in   Info
		want string
	}{
		{Info{Release: "v1.2.3", Revision: "0123456789ab", GoVersion: "go1.27.3"}, "v1.2.3 (rev 0123456789ab, go1.27.3)"},
		{Info{Release: "dev", Revision: "0123456789ab", Modified: true, GoVersion: "go1.27.3"}, "dev (rev 0123456789ab+modified, go1.27.3)"},
		{Info{Release: "dev", GoVersion: "go1.27.3"}, "dev (go1.27.3)"},
	} {
		if got := c.in.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.in, got, c.want)
		}
	}
}

func TestGetNamesTheToolchain(t *testing.T) {
	i := Get()
	if i.GoVersion != runtime.Version() || i.Release == "" {
		t.Fatalf("Get() = %+v", i)
	}
	if !strings.Contains(String(), runtime.Version()) {
		t.Fatalf("String() = %q lacks %s", String(), runtime.Version())
	}
}

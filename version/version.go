// Package version says which build of hotsplit is running: the release
// (set at link time, else the module version the binary was built from)
// and the VCS revision when the build recorded one. It imports only the
// standard library and holds nothing else: cluster versions (what the
// replicated state machine supports) live in package fsm.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
)

// Release is the release this build claims. Release builds set it with
// -ldflags "-X github.com/hotsplit/hotsplit/version.Release=v1.2.3"; an
// unset Release falls back to the module version Go recorded ("(devel)"
// for a build from a checkout, shown as "dev").
var Release = ""

var (
	once sync.Once
	info Info
)

// Info describes this build.
type Info struct {
	// Release, e.g. "v1.2.3" or "dev".
	Release string
	// Revision is the VCS commit (12 hex digits) and Modified whether the
	// tree had uncommitted changes; empty when the build did not record
	// them (-buildvcs=false, go run).
	Revision string
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Get returns this build's Info.
func Get() Info {
	once.Do(func() {
		info = Info{Release: Release, GoVersion: runtime.Version()}
		bi, ok := debug.ReadBuildInfo()
		if ok {
			if info.Release == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				info.Release = bi.Main.Version
			}
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					info.Revision = s.Value[:min(12, len(s.Value))]
				case "vcs.modified":
					info.Modified = s.Value == "true"
				}
			}
		}
		if info.Release == "" {
			info.Release = "dev"
		}
	})
	return info
}

// String is the one-line form: "v1.2.3 (rev 0123456789ab, go1.27.3)",
// "dev (rev 0123456789ab+modified, go1.27.3)" or "dev (go1.27.3)".
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Release)
	b.WriteString(" (")
	if i.Revision != "" {
		b.WriteString("rev ")
		b.WriteString(i.Revision)
		if i.Modified {
			b.WriteString("+modified")
		}
		b.WriteString(", ")
	}
	b.WriteString(i.GoVersion)
	b.WriteString(")")
	return b.String()
}

// String is Get().String().
func String() string { return Get().String() }

package clusterversion

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every feature has a complete row: a unique snake_case name, a version
// this build supports and a one-line doc.
func TestFeatureTableIsComplete(t *testing.T) {
	name := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	seen := map[string]bool{}
	for f := range numFeatures {
		r := table[f]
		switch {
		case !name.MatchString(r.name) || seen[r.name]:
			t.Errorf("feature %d: name %q missing, not snake_case or repeated", f, r.name)
		case !IsVersion(r.version) || !IsSupported(r.version):
			t.Errorf("%s: version %d outside [%d, %d]", r.name, r.version, Version1, Supported)
		case r.doc == "" || strings.ContainsAny(r.doc, "\n|"):
			t.Errorf("%s: doc %q empty or not one table cell", r.name, r.doc)
		}
		seen[r.name] = true
		if f.String() != r.name || f.Version() != r.version || f.Doc() != r.doc {
			t.Errorf("%s: String %q Version %d", r.name, f, f.Version())
		}
	}
	if got := All(); len(got) != int(numFeatures) || got[0] != 0 || got[len(got)-1] != numFeatures-1 {
		t.Errorf("All() = %v", got)
	}
}

func TestFeatureGates(t *testing.T) {
	for _, f := range All() {
		v := f.Version()
		if f.EnabledAt(v-1) || !f.EnabledAt(v) || !f.EnabledAt(v+1) {
			t.Errorf("%s (version %d): on at %d/%d/%d = %v/%v/%v", f, v, v-1, v, v+1, f.EnabledAt(v-1), f.EnabledAt(v), f.EnabledAt(v+1))
		}
		if err := f.CheckAt(v); err != nil {
			t.Errorf("%s at %d: %v", f, v, err)
		}
		err := f.CheckAt(v - 1)
		want := fmt.Sprintf("%s needs cluster version %d, the cluster runs %d", f, v, v-1)
		if !errors.Is(err, ErrVersionTooLow) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s at %d: %v, want ErrVersionTooLow saying %q", f, v-1, err, want)
		}
	}
	if got := Versions(); !slices.Equal(got, []uint32{Version1, Version2, Version3, Version4}) {
		t.Errorf("Versions() = %v", got)
	}
	for _, tc := range []struct {
		v                    uint64
		supported, isVersion bool
	}{{0, true, false}, {Version1, true, true}, {Supported, true, true}, {Supported + 1, false, true}, {1 << 40, false, true}} {
		if IsSupported(tc.v) != tc.supported || (tc.v < 1<<32 && IsVersion(uint32(tc.v)) != tc.isVersion) {
			t.Errorf("version %d: IsSupported %v IsVersion %v", tc.v, IsSupported(tc.v), IsVersion(uint32(tc.v)))
		}
	}
	if !Reaches(3, 3) || !Reaches(3, 2) || Reaches(2, 3) {
		t.Error("Reaches is not v >= need")
	}
}

// docs/design.md lists the table, row for row.
func TestDesignDocListsTheFeatureTable(t *testing.T) {
	b, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, section, ok := strings.Cut(doc, "## Cluster versions and features")
	if !ok {
		t.Fatal(`docs/design.md has no section "Cluster versions and features"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows int
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "| `") {
			rows++
		}
	}
	for _, f := range All() {
		if line := fmt.Sprintf("| `%s` | %d | %s |", f, f.Version(), f.Doc()); !strings.Contains(section, line+"\n") {
			t.Errorf("docs/design.md lacks the row\n%s", line)
		}
	}
	if rows != int(numFeatures) {
		t.Errorf("docs/design.md lists %d feature rows, the table has %d", rows, numFeatures)
	}
}

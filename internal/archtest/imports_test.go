package archtest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// leaves are the stdlib-only packages every package may import: they
// import nothing of ours, so importing them cannot close a cycle or drag
// anything in.
var leaves = []string{"hlc", "internal/saturate", "clusterversion"}

// allowedImports is the import table of docs/design.md ("Packages and
// imports"): for each listed package, the packages of ours it may import
// directly besides the leaves. A package without a row is not checked.
var allowedImports = map[string]string{
	"api/hotsplitv1":      "",
	"hlc":                 "",
	"clusterversion":      "",
	"pki":                 "",
	"version":             "",
	"internal/saturate":   "",
	"internal/raftfuture": "",
	"internal/loglimit":   "",
	"internal/testutil":   "",
	"internal/loadgen":    "api/hotsplitv1 catalog keyviz",
	"backupfile":          "api/hotsplitv1",
	"catalog":             "api/hotsplitv1",
	"detector":            "catalog internal/saturate",
	"columns":             "api/hotsplitv1 catalog detector internal/loglimit",
	"fsm":                 "api/hotsplitv1 catalog clusterversion detector heatmap hlc placement",
	"scheduler":           "api/hotsplitv1 clusterversion columns fsm hlc internal/raftfuture",
	"transport":           "api/hotsplitv1 catalog clusterversion columns detector fsm hlc scheduler version",
	"client":              "api/hotsplitv1 backupfile",
	"keyviz":              "api/hotsplitv1 catalog internal/saturate",
	"datanode":            "api/hotsplitv1 catalog client keyviz",
	"heatmap":             "api/hotsplitv1 catalog",
	"placement":           "catalog",
	"webui":               "api/hotsplitv1 catalog heatmap",
	"node/storage":        "api/hotsplitv1 catalog clusterversion detector fsm hlc internal/saturate",
	"node/raftnet":        "internal/loglimit pki",
	"node/raftobs":        "internal/loglimit",
	"node/health":         "api/hotsplitv1 catalog clusterversion detector fsm hlc internal/loglimit internal/raftfuture internal/saturate scheduler transport version",
	"node/webauth":        "api/hotsplitv1 transport",
	"node/pagesource":     "api/hotsplitv1 clusterversion fsm heatmap transport webui",
	"node":                "api/hotsplitv1 backupfile catalog client clusterversion columns detector fsm heatmap hlc internal/loglimit internal/raftfuture internal/saturate node/health node/pagesource node/raftnet node/raftobs node/storage node/webauth pki scheduler transport version webui",
	"sim":                 "api/hotsplitv1 catalog client keyviz",
	"simlab":              "api/hotsplitv1 catalog clusterversion columns detector fsm hlc keyviz sim",
	"cmd/simtable":        "simlab",
	"cmd/hotsplitd":       "api/hotsplitv1 catalog client fsm node pki sim transport version",
	"cmd/hotsplitctl":     "api/hotsplitv1 catalog client hlc pki sim version",
}

// notYetBuilt are packages the table has rows for (or lets others import)
// before they exist, so that each is held to its rule from its first
// commit. Any other name in the table must be a package of the tree.
var notYetBuilt = map[string]string{
	"datanode": "the data node's embeddable server: client, keyviz, catalog, api and pebble",
}

// importFinding is one import of ours outside the importer's row.
type importFinding struct {
	tags     string
	from, to string
	pos      string // file:line of the import, relative to the module root
}

func (f importFinding) String() string {
	return fmt.Sprintf("import rule (tags %s): %s must not import %s (%s)", tagName(f.tags), f.from, f.to, f.pos)
}

// checkImports reports every import of ours, by a package with a row in
// allowed, of a package outside that row and the leaves.
func checkImports(tr *tree, allowed map[string]string, leaves []string) []importFinding {
	var out []importFinding
	for _, from := range tr.ours {
		row, listed := allowed[from]
		if !listed {
			continue
		}
		ok := strings.Fields(row)
		p := tr.pkgs[abs(from)]
		for _, imp := range p.Imports {
			to := rel(imp)
			if to == imp || slices.Contains(leaves, to) || slices.Contains(ok, to) {
				continue // not ours, or allowed
			}
			out = append(out, importFinding{tags: tr.tags, from: from, to: to, pos: tr.importPos(p, imp)})
		}
	}
	return out
}

// TestImportRule: on the real tree, in every tag set, each package with a
// row imports only its row and the leaves.
func TestImportRule(t *testing.T) {
	trees := loadTrees(t, repoRoot(t))
	byFrom := map[string][]importFinding{}
	for _, tr := range trees {
		for _, f := range checkImports(tr, allowedImports, leaves) {
			byFrom[f.from] = append(byFrom[f.from], f)
		}
	}
	rows := make([]string, 0, len(allowedImports))
	for from := range allowedImports {
		rows = append(rows, from)
	}
	sort.Strings(rows)
	for _, from := range rows {
		t.Run(from, func(t *testing.T) {
			for _, f := range byFrom[from] {
				t.Error(f)
			}
		})
	}
}

// TestImportTableNamesPackages: every package the table names, as a row
// or as an allowed import, is a package of the tree or one of notYetBuilt,
// so that a misspelt or removed name cannot leave a rule that checks
// nothing.
func TestImportTableNamesPackages(t *testing.T) {
	trees := loadTrees(t, repoRoot(t))
	exists := map[string]bool{}
	for _, tr := range trees {
		for _, p := range tr.ours {
			exists[p] = true
		}
	}
	named := map[string]bool{}
	for from, row := range allowedImports {
		named[from] = true
		for _, to := range strings.Fields(row) {
			named[to] = true
		}
	}
	for _, l := range leaves {
		named[l] = true
	}
	for name := range named {
		if !exists[name] && notYetBuilt[name] == "" {
			t.Errorf("the import table names %s, which is no package of the module", name)
		}
	}
}

// TestImportRuleReportsViolations is the negative control: the violations
// module breaks the table in the default build and in the jepsen build
// only, and has simlab import scheduler; each is reported with its file
// and line.
func TestImportRuleReportsViolations(t *testing.T) {
	var got []string
	for _, tr := range loadTrees(t, violations(t)) {
		for _, f := range checkImports(tr, allowedImports, leaves) {
			got = append(got, f.String())
		}
	}
	simlab := " must not import scheduler (simlab/simlab.go:6)"
	want := []string{
		"import rule (tags default): catalog must not import fsm (catalog/catalog.go:11)",
		"import rule (tags default): columns must not import fsm (columns/columns.go:6)",
		"import rule (tags default): datanode must not import internal/loglimit (datanode/datanode.go:8)",
		"import rule (tags default): simlab" + simlab,
		"import rule (tags jepsen): catalog must not import fsm (catalog/catalog.go:11)",
		"import rule (tags jepsen): columns must not import fsm (columns/columns.go:6)",
		"import rule (tags jepsen): datanode must not import internal/loglimit (datanode/datanode.go:8)",
		"import rule (tags jepsen): detector must not import scheduler (detector/controls_jepsen.go:8)",
		"import rule (tags jepsen): simlab" + simlab,
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("checkImports on testdata/violations:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

package archtest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
)

// embeddable are the packages data nodes link (docs/design.md#packages-and-imports): a data node must
// not carry the control plane's consensus, storage or servers.
var embeddable = []string{"keyviz", "sim", "datanode"}

// forbiddenDeps are the import-path prefixes no embeddable package may
// depend on at any depth: raft and its bolt stores and codec.
var forbiddenDeps = []string{
	"github.com/hashicorp/raft",
	"go.etcd.io/bbolt",
	"github.com/boltdb/",
	"github.com/hashicorp/go-msgpack",
}

// serverPackages are our packages no embeddable package may depend on at
// any depth (docs/design.md: keyviz pulls in "no server code"): the import
// table forbids them hop by hop, this holds it for the whole path, through
// packages the table has no row for.
var serverPackages = []string{"fsm", "scheduler", "transport", "node"}

// embedFinding is one forbidden dependency of an embeddable package.
type embedFinding struct {
	tags  string
	pkg   string
	dep   string
	chain []string // pkg, ..., dep: one shortest import path
	pos   string   // where the chain's last hop imports dep
}

func (f embedFinding) String() string {
	return fmt.Sprintf("embeddable rule (tags %s): %s must not depend on %s: %s (%s)",
		tagName(f.tags), f.pkg, f.dep, strings.Join(f.chain, " → "), f.pos)
}

// forbiddenFor reports whether dep (a full import path) is out of reach
// for embeddable packages.
func forbiddenFor(dep string) bool {
	for _, prefix := range forbiddenDeps {
		if strings.HasPrefix(dep, prefix) {
			return true
		}
	}
	name := rel(dep)
	return name != dep && slices.ContainsFunc(serverPackages, func(s string) bool {
		return name == s || strings.HasPrefix(name, s+"/")
	})
}

// checkEmbeddable reports every forbidden package among the transitive
// dependencies (go list's Deps) of each package of pkgs present in the
// tree, with one shortest import chain that reaches it.
func checkEmbeddable(tr *tree, pkgs []string) []embedFinding {
	var out []embedFinding
	for _, name := range pkgs {
		p := tr.pkgs[abs(name)]
		if p == nil {
			continue // not built yet (datanode)
		}
		for _, dep := range p.Deps {
			if !forbiddenFor(dep) {
				continue
			}
			chain := tr.chain(p.ImportPath, dep)
			var pos string
			if len(chain) >= 2 {
				pos = tr.importPos(tr.pkgs[chain[len(chain)-2]], dep)
			}
			for i := range chain {
				chain[i] = rel(chain[i])
			}
			out = append(out, embedFinding{tags: tr.tags, pkg: name, dep: rel(dep), chain: chain, pos: pos})
		}
	}
	return out
}

// chain is one shortest import path from one package to another, both
// included (breadth-first over Imports, in go list's sorted order, so the
// answer is stable).
func (tr *tree) chain(from, to string) []string {
	prev := map[string]string{from: ""}
	for queue := []string{from}; len(queue) > 0; queue = queue[1:] {
		cur := queue[0]
		if cur == to {
			var path []string
			for ; cur != ""; cur = prev[cur] {
				path = append(path, cur)
			}
			slices.Reverse(path)
			return path
		}
		if p := tr.pkgs[cur]; p != nil {
			for _, imp := range p.Imports {
				if _, seen := prev[imp]; !seen {
					prev[imp] = cur
					queue = append(queue, imp)
				}
			}
		}
	}
	return []string{from, "…", to}
}

// TestEmbeddable: on the real tree, in every tag set, no embeddable
// package reaches raft, bolt or server code.
func TestEmbeddable(t *testing.T) {
	for _, tr := range loadTrees(t, repoRoot(t)) {
		if tr.pkgs[abs("keyviz")] == nil || tr.pkgs[abs("sim")] == nil {
			t.Fatalf("tags %s: go list has no keyviz or sim: the rule would check nothing", tagName(tr.tags))
		}
		for _, f := range checkEmbeddable(tr, embeddable) {
			t.Error(f)
		}
	}
}

// TestEmbeddableReportsViolations is the negative control: in the
// violations module keyviz reaches raft and fsm two hops down (through
// catalog), datanode three, and sim reaches bolt in the jepsen build only.
func TestEmbeddableReportsViolations(t *testing.T) {
	var got []string
	for _, tr := range loadTrees(t, violations(t)) {
		for _, f := range checkEmbeddable(tr, embeddable) {
			got = append(got, f.String())
		}
	}
	var want []string
	for _, tags := range []string{"default", "jepsen"} {
		want = append(want,
			"embeddable rule (tags "+tags+"): datanode must not depend on fsm: datanode → keyviz → catalog → fsm (catalog/catalog.go:11)",
			"embeddable rule (tags "+tags+"): datanode must not depend on github.com/hashicorp/raft: datanode → keyviz → catalog → github.com/hashicorp/raft (catalog/catalog.go:9)",
			"embeddable rule (tags "+tags+"): keyviz must not depend on fsm: keyviz → catalog → fsm (catalog/catalog.go:11)",
			"embeddable rule (tags "+tags+"): keyviz must not depend on github.com/hashicorp/raft: keyviz → catalog → github.com/hashicorp/raft (catalog/catalog.go:9)",
		)
	}
	want = append(want, "embeddable rule (tags jepsen): sim must not depend on go.etcd.io/bbolt: sim → go.etcd.io/bbolt (sim/store_jepsen.go:6)")
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("checkEmbeddable on testdata/violations:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

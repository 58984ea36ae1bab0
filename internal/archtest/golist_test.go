package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// modulePath is the main module. The testdata modules use the same path,
// so that the rules' tables, written in our package names, apply to them
// unchanged.
const modulePath = "github.com/hotsplit/hotsplit"

// tagSets are the build configurations every graph rule is checked in:
// jepsen-tagged files add imports (failpoints, seams) that the default
// build never sees.
var tagSets = []string{"", "jepsen"}

// listedPackage is the part of `go list -json` output the rules read.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Deps       []string
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// tree is one module's build graph under one tag set: every package that
// `go list -deps ./...` names, ours and everyone else's.
type tree struct {
	root string // the module's directory
	tags string
	pkgs map[string]*listedPackage // by import path
	ours []string                  // our packages' paths relative to modulePath, in go list order
}

// loadTree runs `go list -json -deps ./...` in root with the given tags.
// A package that fails to load is an error: a rule must never pass because
// the graph it reads is incomplete.
func loadTree(root, tags string) (*tree, error) {
	args := []string{"list", "-e", "-json", "-deps"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, "./...")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	// A go.work above a testdata module must not pull it into a workspace.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s in %s: %v\n%s", strings.Join(args, " "), root, err, stderr.Bytes())
	}
	tr := &tree{root: root, tags: tags, pkgs: map[string]*listedPackage{}}
	var broken []string
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		p := new(listedPackage)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list output: %v", err)
		}
		if p.Error != nil {
			broken = append(broken, p.ImportPath+": "+p.Error.Err)
		}
		tr.pkgs[p.ImportPath] = p
		if p.Module != nil && p.Module.Path == modulePath {
			tr.ours = append(tr.ours, rel(p.ImportPath))
		}
	}
	if len(broken) > 0 {
		return nil, fmt.Errorf("go list in %s (tags %q) could not load:\n%s", root, tags, strings.Join(broken, "\n"))
	}
	if len(tr.ours) == 0 {
		return nil, fmt.Errorf("go list in %s found no package of %s", root, modulePath)
	}
	return tr, nil
}

// rel turns one of our import paths into the short name the rules use
// ("node/storage"); other paths are returned whole.
func rel(importPath string) string {
	if importPath == modulePath {
		return "."
	}
	if s, ok := strings.CutPrefix(importPath, modulePath+"/"); ok {
		return s
	}
	return importPath
}

// abs is rel's inverse for our short names.
func abs(name string) string { return modulePath + "/" + name }

// importPos says where package p imports path, as a file:line relative to
// the tree's root, by parsing the import clauses of the files go list
// built p from; "" if none does (it cannot happen for a path in Imports).
func (tr *tree) importPos(p *listedPackage, path string) string {
	fset := token.NewFileSet()
	for _, name := range append(append([]string(nil), p.GoFiles...), p.CgoFiles...) {
		file := filepath.Join(p.Dir, name)
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			continue
		}
		for _, spec := range f.Imports {
			if v, err := strconv.Unquote(spec.Path.Value); err == nil && v == path {
				return tr.relFile(file) + ":" + strconv.Itoa(fset.Position(spec.Pos()).Line)
			}
		}
	}
	return ""
}

// relFile is file relative to the tree's root, with forward slashes.
func (tr *tree) relFile(file string) string {
	if r, err := filepath.Rel(tr.root, file); err == nil {
		return filepath.ToSlash(r)
	}
	return file
}

// repoRoot is the main module's directory: this package is internal/archtest.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module "+modulePath+"\n")) {
		t.Fatalf("%s is not the root of %s (%v)", root, modulePath, err)
	}
	return root
}

// violations is the testdata module that breaks every graph rule.
func violations(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "violations"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// loaded caches loadTree's results: each rule's tests read the same few
// graphs, and go list is most of their cost.
var loaded = struct {
	sync.Mutex
	trees map[[2]string]*tree
}{trees: map[[2]string]*tree{}}

// loadTrees loads root under every tag set, or fails the test.
func loadTrees(t *testing.T, root string) []*tree {
	t.Helper()
	loaded.Lock()
	defer loaded.Unlock()
	var trees []*tree
	for _, tags := range tagSets {
		tr := loaded.trees[[2]string{root, tags}]
		if tr == nil {
			var err error
			if tr, err = loadTree(root, tags); err != nil {
				t.Fatal(err)
			}
			loaded.trees[[2]string{root, tags}] = tr
		}
		trees = append(trees, tr)
	}
	return trees
}

// tagName names a tag set in test names and messages.
func tagName(tags string) string {
	if tags == "" {
		return "default"
	}
	return tags
}

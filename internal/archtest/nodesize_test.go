package archtest

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The node size rule (docs/design.md, "Packages and imports"): node wires,
// its sub-packages work. The node package's own non-test files, in every
// build (jepsen-tagged ones included), stay within maxNodeLines, and no
// non-test function under node/ is longer than maxFuncLines.
const (
	maxNodeLines = 2500
	maxFuncLines = 100
)

// checkNodeSize reports, for the module at root, the node package's
// non-test line count when it exceeds maxPkgLines and every non-test
// function under node/ longer than maxFunc lines. It parses every .go file
// whatever its build constraints: a function in a jepsen-only file counts
// as much as one the default build compiles.
func checkNodeSize(root string, maxPkgLines, maxFunc int) ([]string, error) {
	var out []string
	pkgLines, files := 0, 0
	fset := token.NewFileSet()
	nodeDir := filepath.Join(root, "node")
	err := filepath.WalkDir(nodeDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// The go command ignores these directories; so does the rule.
			if path != nodeDir && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		relPath, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		relPath = filepath.ToSlash(relPath)
		if filepath.Dir(path) == nodeDir {
			pkgLines += lineCount(src)
			files++
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, fn := range functions(f) {
			start, end := fset.Position(fn.pos).Line, fset.Position(fn.end).Line
			if n := end - start + 1; n > maxFunc {
				out = append(out, fmt.Sprintf("node size rule: %s:%d: %s is %d lines (at most %d)", relPath, start, fn.name, n, maxFunc))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if files == 0 {
		return nil, fmt.Errorf("no non-test Go file in %s: the rule would check nothing", nodeDir)
	}
	if pkgLines > maxPkgLines {
		out = append(out, fmt.Sprintf("node size rule: package node has %d lines in its %d non-test files (at most %d)", pkgLines, files, maxPkgLines))
	}
	slices.Sort(out)
	return out, nil
}

// function is one function's extent in a file.
type function struct {
	name     string
	pos, end token.Pos
}

// functions lists a file's top-level functions and methods, and the
// function literals outside them (a package-level var = func ...), whose
// extent the enclosing declaration does not already count.
func functions(f *ast.File) []function {
	var out []function
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Body == nil {
				continue
			}
			name := "func " + d.Name.Name
			if d.Recv != nil && len(d.Recv.List) > 0 {
				name = "method " + recvType(d.Recv.List[0].Type) + "." + d.Name.Name
			}
			out = append(out, function{name: name, pos: d.Pos(), end: d.End()})
		case *ast.GenDecl:
			ast.Inspect(d, func(n ast.Node) bool {
				if lit, ok := n.(*ast.FuncLit); ok {
					out = append(out, function{name: "function literal", pos: lit.Pos(), end: lit.End()})
					return false
				}
				return true
			})
		}
	}
	return out
}

// recvType names a receiver's type as written (T, *T, T[K]).
func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + recvType(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	}
	return "?"
}

// lineCount is what wc -l says of src, plus a last line without a newline.
func lineCount(src []byte) int {
	n := bytes.Count(src, []byte("\n"))
	if len(src) > 0 && src[len(src)-1] != '\n' {
		n++
	}
	return n
}

// TestNodeSize: the real node package within the rule.
func TestNodeSize(t *testing.T) {
	findings, err := checkNodeSize(repoRoot(t), maxNodeLines, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Error(f)
	}
}

// TestNodeSizeReportsViolations is the negative control: in the
// violations module the node package is over the limit only if its
// jepsen-tagged file counts; one function over the limit sits in a
// jepsen-only file of node/raftnet and one in a file no build compiles
// (//go:build ignore); a function of exactly the limit, and a long one in
// a _test.go file, are not reported.
func TestNodeSizeReportsViolations(t *testing.T) {
	got, err := checkNodeSize(violations(t), maxNodeLines, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"node size rule: node/gen_ignore.go:6: func generate is 101 lines (at most 100)",
		"node size rule: node/raftnet/faults_jepsen.go:8: method *faults.inject is 102 lines (at most 100)",
		"node size rule: package node has 2522 lines in its 4 non-test files (at most 2500)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("checkNodeSize on testdata/violations:\ngot:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

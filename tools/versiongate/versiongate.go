// Package versiongate is the analyzer behind the rule of docs/design.md
// ("Cluster versions and features"): gated behaviour is named in one
// table, never compared inline. A comparison of a cluster version (<, <=,
// >, >=, ==, != or a switch's case) anywhere but the feature table
// (clusterversion/clusterversion.go) and the jepsen model's restatement of
// it (jepsen/model/versions.go) is reported; code asks Feature.EnabledAt,
// State.Has, or clusterversion.IsSupported, IsVersion or Reaches instead.
//
// It decides from types, not text: a comparison of two integers is
// reported when an operand is or contains
//   - a constant of package clusterversion (a version, Supported; not a
//     Feature), or the integer result of one of its functions or methods
//     (Feature.Version);
//   - a variable, field, constant or call of integer type, or a value of a
//     named integer type, declared in hotsplit's module, whose name ends in
//     ClusterVersion, clusterVersion, SupportedVersion, MinVersion, VersionN
//     or RulesVN (s.clusterVersion, cmd.MinVersion,
//     m.GetSupportedVersion());
//   - an integer variable or field of ours named version, in any case, when
//     the other operand is an integer literal (version >= 2,
//     h.Version == 0).
//
// Types tell a version comparison from a comparison of booleans beside a
// version, a length of versions or crypto/tls's MinVersion, which names
// alone cannot. A version named by a constant of another package
// (catalog.InitialVersion) is another counter: the catalog's, a file
// format's. Test files and generated .pb.go files are exempt.
//
// It lives in the tools module, with golang.org/x/tools, so that the main
// module's build graph carries none of it; it must not import the code it
// checks, and it reports, never rewrites.
package versiongate

import (
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/passes/inspect"
	"golang.org/x/tools/go/ast/inspector"
)

// Analyzer reports cluster-version comparisons outside the feature table.
var Analyzer = &analysis.Analyzer{
	Name:     "versiongate",
	Doc:      "report cluster-version comparisons outside the feature table (clusterversion/clusterversion.go)",
	Requires: []*analysis.Analyzer{inspect.Analyzer},
	Run:      run,
}

// modulePath is hotsplit's module; clusterversionPath the package of the
// feature table.
const (
	modulePath         = "github.com/hotsplit/hotsplit"
	clusterversionPath = modulePath + "/clusterversion"
)

// allowed are the files that may compare cluster versions, by package path
// and file name: the table itself, and the jepsen model's own table (the
// model shares no code with the server, so it restates the rows it needs).
var allowed = map[[2]string]bool{
	{clusterversionPath, "clusterversion.go"}:                    true,
	{"github.com/hotsplit/hotsplit/jepsen/model", "versions.go"}: true,
}

// versionName matches the names that say an integer is a cluster version.
var versionName = regexp.MustCompile(`(ClusterVersion|clusterVersion|SupportedVersion|MinVersion|Version[0-9]+|RulesV[0-9]+)$`)

func run(pass *analysis.Pass) (any, error) {
	ins := pass.ResultOf[inspect.Analyzer].(*inspector.Inspector)
	checked := map[*token.File]bool{}
	for _, f := range pass.Files {
		tf := pass.Fset.File(f.Pos())
		name := tf.Name()
		base := filepath.Base(name)
		if strings.HasSuffix(base, "_test.go") || strings.HasSuffix(base, ".pb.go") || allowed[[2]string{pass.Pkg.Path(), base}] {
			continue
		}
		checked[tf] = true
	}
	ins.Preorder([]ast.Node{(*ast.BinaryExpr)(nil), (*ast.SwitchStmt)(nil)}, func(n ast.Node) {
		if !checked[pass.Fset.File(n.Pos())] {
			return
		}
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if !isComparison(n.Op) {
				return
			}
			if why := versionComparison(pass, n.X, n.Y); why != "" {
				pass.Reportf(n.OpPos, "cluster version compared with %s outside the feature table (%s): ask Feature.EnabledAt, State.Has or clusterversion.IsSupported/IsVersion/Reaches", n.Op, why)
			}
		case *ast.SwitchStmt:
			if n.Tag == nil {
				return
			}
			for _, stmt := range n.Body.List {
				for _, c := range stmt.(*ast.CaseClause).List {
					if why := versionComparison(pass, n.Tag, c); why != "" {
						pass.Reportf(c.Pos(), "cluster version compared by a switch case outside the feature table (%s): ask Feature.EnabledAt, State.Has or clusterversion.IsSupported/IsVersion/Reaches", why)
					}
				}
			}
		}
	})
	return nil, nil
}

func isComparison(op token.Token) bool {
	switch op {
	case token.LSS, token.LEQ, token.GTR, token.GEQ, token.EQL, token.NEQ:
		return true
	}
	return false
}

// versionComparison says why comparing x with y compares a cluster
// version, or "" if it does not: both must be integers.
func versionComparison(pass *analysis.Pass, x, y ast.Expr) string {
	if !isInteger(pass.TypesInfo.TypeOf(x)) || !isInteger(pass.TypesInfo.TypeOf(y)) {
		return ""
	}
	for _, e := range []ast.Expr{x, y} {
		if why := versionOperand(pass, e); why != "" {
			return why
		}
	}
	for _, pair := range [][2]ast.Expr{{x, y}, {y, x}} {
		if v := namedVersion(pass, pair[0]); v != "" && isIntLiteral(pass, pair[1]) {
			return v + " is a version compared with a literal"
		}
	}
	return ""
}

// versionOperand finds, inside e (function literals aside), a constant or
// function result of package clusterversion or an integer whose name says
// it is a cluster version.
func versionOperand(pass *analysis.Pass, e ast.Expr) string {
	var why string
	ast.Inspect(e, func(n ast.Node) bool {
		if why != "" {
			return false
		}
		switch n := n.(type) {
		case *ast.FuncLit:
			return false
		case ast.Expr:
			if id, ok := n.(*ast.Ident); ok {
				why = versionIdent(pass, id)
			}
			if _, lit := n.(*ast.BasicLit); why == "" && !lit { // a literal takes the other side's type
				if named := namedType(pass.TypesInfo.TypeOf(n)); named != nil && isInteger(named) && versionName.MatchString(named.Obj().Name()) && ours(named.Obj()) {
					why = types.ExprString(n) + " is of type " + named.Obj().Name()
				}
			}
		}
		return why == ""
	})
	return why
}

// versionIdent says why the object id uses is a cluster version, or "".
func versionIdent(pass *analysis.Pass, id *ast.Ident) string {
	obj := pass.TypesInfo.Uses[id]
	if obj == nil {
		return ""
	}
	var t types.Type
	switch o := obj.(type) {
	case *types.Const, *types.Var:
		t = o.Type()
	case *types.Func:
		sig, _ := o.Type().(*types.Signature)
		if sig == nil || sig.Results().Len() != 1 {
			return ""
		}
		t = sig.Results().At(0).Type()
	default:
		return ""
	}
	if !isInteger(t) {
		return ""
	}
	if _, isVar := obj.(*types.Var); !isVar && obj.Pkg() != nil && obj.Pkg().Path() == clusterversionPath {
		if named := namedType(t); named != nil && named.Obj().Name() == "Feature" {
			return "" // a feature, not a version: f == clusterversion.HoldBand
		}
		if _, ok := obj.(*types.Func); ok {
			return "clusterversion's " + obj.Name() + " is a version"
		}
		return "clusterversion." + obj.Name() + " is a version"
	}
	if versionName.MatchString(obj.Name()) && ours(obj) {
		return obj.Name() + " is a cluster version"
	}
	return ""
}

// ours reports whether obj is declared in hotsplit's module: a name says
// nothing of another module's integers (crypto/tls's Config.MinVersion).
func ours(obj types.Object) bool {
	pkg := obj.Pkg()
	return pkg != nil && (pkg.Path() == modulePath || strings.HasPrefix(pkg.Path(), modulePath+"/"))
}

// namedVersion is the name of the integer variable or field called
// version, in any case, that e is or contains, or "".
func namedVersion(pass *analysis.Pass, e ast.Expr) string {
	var name string
	ast.Inspect(e, func(n ast.Node) bool {
		if name != "" {
			return false
		}
		if _, ok := n.(*ast.FuncLit); ok {
			return false
		}
		if id, ok := n.(*ast.Ident); ok && strings.EqualFold(id.Name, "version") {
			if v, ok := pass.TypesInfo.Uses[id].(*types.Var); ok && isInteger(v.Type()) && ours(v) {
				name = id.Name
			}
		}
		return name == ""
	})
	return name
}

// isIntLiteral reports whether e is an integer literal, through
// parentheses, a sign and conversions (uint32(2)).
func isIntLiteral(pass *analysis.Pass, e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Kind == token.INT
	case *ast.ParenExpr:
		return isIntLiteral(pass, e.X)
	case *ast.UnaryExpr:
		return (e.Op == token.SUB || e.Op == token.ADD) && isIntLiteral(pass, e.X)
	case *ast.CallExpr:
		return len(e.Args) == 1 && pass.TypesInfo.Types[e.Fun].IsType() && isIntLiteral(pass, e.Args[0])
	}
	return false
}

func isInteger(t types.Type) bool {
	if t == nil {
		return false
	}
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsInteger != 0
}

func namedType(t types.Type) *types.Named {
	n, _ := types.Unalias(t).(*types.Named)
	return n
}

package client

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package thin (docs/design.md#packages-and-imports):
// besides the standard library it may import only the generated API, the backup
// file format, gRPC and protobuf, so that data nodes embedding keyviz pull in
// no server code.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{
		"github.com/hotsplit/hotsplit/api/hotsplitv1",
		"github.com/hotsplit/hotsplit/backupfile",
		"google.golang.org/grpc",
		"google.golang.org/protobuf",
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(strings.SplitN(path, "/", 2)[0], ".") {
				continue // standard library
			}
			ok := false
			for _, a := range allowed {
				ok = ok || path == a || strings.HasPrefix(path, a+"/")
			}
			if !ok {
				t.Errorf("%s imports %s; client may import only the API, backupfile, gRPC, protobuf and the standard library", name, path)
			}
		}
	}
}

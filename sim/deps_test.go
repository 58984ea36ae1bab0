package sim

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the simulator a data plane (SPEC §2): of this module it
// reaches only keyviz, client, catalog, hlc (through catalog) and the API,
// and it pulls in no raft, no bbolt and no server package.
func TestImports(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list imports: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/hotsplit/hotsplit/"
	allowed := map[string]bool{
		module + "sim":            true,
		module + "keyviz":         true,
		module + "client":         true,
		module + "catalog":        true,
		module + "hlc":            true,
		module + "api/hotsplitv1": true,
	}
	forbidden := []string{"github.com/hashicorp/raft", "go.etcd.io/bbolt", "github.com/boltdb/", "github.com/hashicorp/go-msgpack"}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages: %q", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, module) && !allowed[p] {
			t.Errorf("sim imports %s", p)
		}
		for _, f := range forbidden {
			if strings.HasPrefix(p, f) {
				t.Errorf("sim imports %s", p)
			}
		}
	}
}

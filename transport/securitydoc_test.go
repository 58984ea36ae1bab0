package transport

import (
	"os"
	"strings"
	"testing"
)

// docs/security.md shows the authorization table row by row.
func TestSecurityDocListsEveryMethod(t *testing.T) {
	b, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for m := range authzTable {
		row := "| `" + m + "` | " + neededRole(m) + " |"
		if !strings.Contains(doc, row) {
			t.Errorf("docs/security.md lacks the row %s", row)
		}
	}
}

// neededRole describes the role a method needs, as docs/security.md's
// table writes it.
func neededRole(method string) string {
	r, ok := authzTable[method]
	if !ok {
		return "(refused)"
	}
	switch {
	case r.role == roleNobody:
		return "node only"
	case r.node:
		return r.role.String() + ", node"
	}
	return r.role.String()
}

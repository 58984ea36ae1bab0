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

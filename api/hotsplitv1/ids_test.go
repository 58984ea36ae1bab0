package hotsplitv1

import (
	"strings"
	"testing"
)

func TestValidateNodeID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want string // "" = valid; otherwise a part of the error
	}{
		{"n1", ""},
		{"0", ""},
		{"node-7.zone_b", ""},
		{strings.Repeat("a", 63), ""},
		{"", "must be set"},
		{strings.Repeat("a", 64), "64 bytes"},
		{"N1", "must start"},
		{".n1", "must start"},
		{"n1/x", "byte 2"},
		{"n 1", "byte 1"},
		{"n\xff", "byte 1"},
		{"né", "byte 1"},
	} {
		err := ValidateNodeID(tc.id)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v, want valid", tc.id, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: %v, want an error containing %q", tc.id, err, tc.want)
		}
	}
}

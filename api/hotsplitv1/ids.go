package hotsplitv1

import "fmt"

// MaxNodeIDLen is the longest node id: one DNS label, so an id can name a
// certificate, a file and a host alike.
const MaxNodeIDLen = 63

// ValidateNodeID reports whether id is a valid node id:
// [a-z0-9][a-z0-9._-]{0,62}. The error says which character or length is
// wrong. Node ids name raft servers, member records and node certificates
// (CN), so every entry point checks them the same way.
func ValidateNodeID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("must be set")
	case len(id) > MaxNodeIDLen:
		return fmt.Errorf("%d bytes exceeds the limit of %d", len(id), MaxNodeIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		lowerOrDigit := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		if lowerOrDigit || i > 0 && (c == '.' || c == '_' || c == '-') {
			continue
		}
		if i == 0 {
			return fmt.Errorf("%q must start with a lower-case letter or digit", id)
		}
		return fmt.Errorf("%q: byte %d (%q) is not one of a-z 0-9 . _ -", id, i, c)
	}
	return nil
}

package main

import "testing"

// Server-written text reads for people: enum value names as the tables'
// words, epoch milliseconds and HLCs (ms.logical or the raw 64-bit value)
// as UTC times; quoted keys and words that only look alike stay as written.
func TestForPeople(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`split key outside route: key "z" is at or above the end of route r2["", "m") ROUTE_STATE_ACTIVE`,
			`split key outside route: key "z" is at or above the end of route r2["", "m") active`},
		{`op 7 already OP_STATE_DONE`, `op 7 already done`},
		{`columns[0].step_ms: 60000 differs from the replicated step of 10000 for window 1796527843200`,
			`columns[0].step_ms: 60000 differs from the replicated step of 10000 for window 2026-12-06 03:30:43.200Z`},
		{`commit hlc 1796527911751.3 not after last applied hlc 1796527911751.0`,
			`commit hlc 2026-12-06 03:31:51.751Z (logical 3) not after last applied hlc 2026-12-06 03:31:51.751Z`},
		{`changed at 117737184036323328`, `changed at 2026-12-06 03:14:16.023Z`},
		{`key "user:1796527843200 ROUTE_STATE_ACTIVE" stays`, `key "user:1796527843200 ROUTE_STATE_ACTIVE" stays`},
		{`key "a\"1796527843200" stays`, `key "a\"1796527843200" stays`},
		{`NOT_AN_ENUM_NAME, catalog version 1234567, request id af164948630614d0d97286a2fcb20ad9`,
			`NOT_AN_ENUM_NAME, catalog version 1234567, request id af164948630614d0d97286a2fcb20ad9`},
		{`unterminated "1796527843200`, `unterminated "1796527843200`},
	} {
		if got := forPeople(tc.in); got != tc.want {
			t.Errorf("forPeople(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

package transport

import "testing"

func TestRateLimitsPerIdentity(t *testing.T) {
	l := newLimiters(RateLimits{TimestampsPerSecond: 0.001, TimestampBurst: 3, MutationsPerSecond: 0})
	for i := range 3 {
		if !l.allow("alice", limitTimestamp) {
			t.Fatalf("call %d within the burst refused", i)
		}
	}
	if l.allow("alice", limitTimestamp) {
		t.Fatal("a call beyond the burst was allowed")
	}
	if !l.allow("bob", limitTimestamp) {
		t.Fatal("one identity's limit refused another")
	}
	for range 100 {
		if !l.allow("alice", limitMutation) || !l.allow("alice", limitNone) {
			t.Fatal("a class that is off refused a call")
		}
	}
}

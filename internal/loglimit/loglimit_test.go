package loglimit

import (
	"sync"
	"testing"
	"time"
)

func TestAllow(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	type call struct {
		key        string
		at         time.Duration // after t0
		ok         bool
		suppressed uint64
	}
	cases := []struct {
		name  string
		calls []call
	}{
		{"the first line of a key is written", []call{{"a", 0, true, 0}}},
		{"within the interval: held back and counted", []call{
			{"a", 0, true, 0}, {"a", time.Second, false, 0}, {"a", 9 * time.Second, false, 0},
			{"a", 10 * time.Second, true, 2},
		}},
		{"the interval runs from the last line written", []call{
			{"a", 0, true, 0}, {"a", 10 * time.Second, true, 0}, {"a", 15 * time.Second, false, 0},
			{"a", 19 * time.Second, false, 0}, {"a", 20 * time.Second, true, 2},
		}},
		{"keys are independent", []call{
			{"a", 0, true, 0}, {"b", time.Second, true, 0}, {"a", 2 * time.Second, false, 0},
			{"b", 11 * time.Second, true, 0}, {"a", 12 * time.Second, true, 1},
		}},
		{"a clock that steps back holds lines back", []call{
			{"a", 10 * time.Second, true, 0}, {"a", 0, false, 0}, {"a", 20 * time.Second, true, 1},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := New(10*time.Second, 8)
			for i, c := range tc.calls {
				ok, n := l.Allow(c.key, t0.Add(c.at))
				if ok != c.ok || n != c.suppressed {
					t.Fatalf("call %d (%s at %v): Allow = %v, %d; want %v, %d", i, c.key, c.at, ok, n, c.ok, c.suppressed)
				}
			}
		})
	}
}

// Past maxKeys keys the limiter starts over: memory stays bounded, and a
// forgotten key is written again at once.
func TestAllowBoundsKeys(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	l := New(time.Minute, 2)
	for _, k := range []string{"a", "b"} {
		if ok, _ := l.Allow(k, t0); !ok {
			t.Fatalf("first line of %s held back", k)
		}
	}
	if ok, _ := l.Allow("a", t0); ok {
		t.Fatal("a written twice within the interval")
	}
	if ok, _ := l.Allow("c", t0); !ok { // a third key: start over
		t.Fatal("first line of c held back")
	}
	if len(l.keys) != 1 {
		t.Fatalf("%d keys remembered, want 1 after starting over", len(l.keys))
	}
	if ok, n := l.Allow("a", t0); !ok || n != 0 {
		t.Fatalf("forgotten key a: Allow = %v, %d; want true, 0", ok, n)
	}
}

// Concurrent callers of one key: exactly one line is written per interval
// and the rest are counted, none lost.
func TestAllowConcurrent(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	l := New(time.Minute, 8)
	const callers, each = 8, 100
	var mu sync.Mutex
	written := 0
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if ok, _ := l.Allow("k", t0); ok {
					mu.Lock()
					written++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if written != 1 {
		t.Fatalf("%d lines written within one interval, want 1", written)
	}
	if ok, n := l.Allow("k", t0.Add(time.Minute)); !ok || n != callers*each-1 {
		t.Fatalf("after the interval: Allow = %v, %d; want true, %d", ok, n, callers*each-1)
	}
}

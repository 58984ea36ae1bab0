package history

import (
	"bytes"
	"reflect"
	"sync"
	"testing"
)

func TestRecorderAndJSONRoundTrip(t *testing.T) {
	rec := NewRecorder()
	v := uint64(4)
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				call := rec.Now()
				rec.Add(Op{Client: c, Kind: Split, Status: OK, Call: call, Return: rec.Now(), ExpectedVersion: &v, SplitKey: []byte{0, 'k'}, Version: 5})
			}
		}()
	}
	wg.Wait()
	ops := rec.Ops()
	if len(ops) != 100 {
		t.Fatalf("%d ops", len(ops))
	}
	for i, op := range ops {
		if op.ID != i || op.Return < op.Call {
			t.Fatalf("op %d: id %d, call %d return %d", i, op.ID, op.Call, op.Return)
		}
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, ops); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ops) {
		t.Fatal("JSON round trip changed the history")
	}
	if got := Counts(ops)["split ok"]; got != 100 {
		t.Fatalf("Counts: %d split ok", got)
	}
}

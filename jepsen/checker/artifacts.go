package checker

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/anishathalye/porcupine"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/hotsplit/hotsplit/jepsen/history"
)

// WriteArtifacts writes what a human needs to understand a run into dir:
// summary.txt, violations.txt, history.json (the resolved client history),
// porcupine-catalog.html and porcupine-switch.html, and log-<node>.jsonl
// (each node's decoded raft log, one entry per line). Node process logs
// are the harness's to add.
func WriteArtifacts(dir string, in Input, r *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	errs = append(errs, os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(r.Summary()), 0o644))
	var v []byte
	for _, x := range r.Violations {
		v = append(v, x.String()...)
		v = append(v, '\n')
	}
	errs = append(errs, os.WriteFile(filepath.Join(dir, "violations.txt"), v, 0o644))
	ops := r.Resolved
	if ops == nil {
		ops = in.Ops
	}
	errs = append(errs, writeFile(filepath.Join(dir, "history.json"), func(w *bufio.Writer) error { return history.WriteJSON(w, ops) }))
	if r.CatalogModel.Step != nil {
		errs = append(errs, porcupine.VisualizePath(r.CatalogModel, r.CatalogInfo, filepath.Join(dir, "porcupine-catalog.html")))
	}
	if r.SwitchModel.Step != nil {
		errs = append(errs, porcupine.VisualizePath(r.SwitchModel, r.SwitchInfo, filepath.Join(dir, "porcupine-switch.html")))
	}
	for _, id := range slices.Sorted(maps.Keys(in.Logs)) {
		entries := in.Logs[id]
		errs = append(errs, writeFile(filepath.Join(dir, "log-"+id+".jsonl"), func(w *bufio.Writer) error {
			for _, e := range entries {
				line := map[string]any{"index": e.Index, "term": e.Term, "type": e.Type.String()}
				if e.Command != nil {
					cmd, err := protojson.Marshal(e.Command)
					if err != nil {
						return fmt.Errorf("entry %d: %w", e.Index, err)
					}
					line["command"] = json.RawMessage(cmd)
				}
				b, err := json.Marshal(line)
				if err != nil {
					return fmt.Errorf("entry %d: %w", e.Index, err)
				}
				w.Write(b)
				w.WriteByte('\n')
			}
			return nil
		}))
	}
	return errors.Join(errs...)
}

func writeFile(path string, fill func(*bufio.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = fill(w)
	return errors.Join(err, w.Flush(), f.Close())
}

package node

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/hotsplit/hotsplit/hlc"
)

// NewLogger is the slog logger hotsplitd writes with: text or JSON lines at
// level and above. Attributes whose key ends in "_hlc" are rendered as HLCs
// (physical.logical, the form hotsplitctl prints), wherever they come from,
// so every log line shows timestamps one way.
func NewLogger(w io.Writer, level slog.Leveler, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: replaceHLC}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func replaceHLC(_ []string, a slog.Attr) slog.Attr {
	if !strings.HasSuffix(a.Key, "_hlc") {
		return a
	}
	switch a.Value.Kind() {
	case slog.KindUint64:
		return slog.String(a.Key, hlc.Format(a.Value.Uint64()))
	case slog.KindInt64:
		if v := a.Value.Int64(); v >= 0 {
			return slog.String(a.Key, hlc.Format(uint64(v)))
		}
	}
	return a
}

// lastWord gives a halting process the last word: once sealed it drops
// every record, so the halt's ERROR line, written after sealing through
// the ungated handler, is the process's last line rather than a shutdown
// line some goroutine wrote in the moment before the exit. Handle holds a
// read lock across check and write, so a record that passed the check is
// written before seal returns.
type lastWord struct {
	slog.Handler
	gate *logGate
}

type logGate struct {
	mu     sync.RWMutex
	sealed bool
}

func (g *logGate) seal() {
	g.mu.Lock()
	g.sealed = true
	g.mu.Unlock()
}

func (h lastWord) Handle(ctx context.Context, r slog.Record) error {
	h.gate.mu.RLock()
	defer h.gate.mu.RUnlock()
	if h.gate.sealed {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h lastWord) WithAttrs(as []slog.Attr) slog.Handler {
	return lastWord{h.Handler.WithAttrs(as), h.gate}
}

func (h lastWord) WithGroup(name string) slog.Handler {
	return lastWord{h.Handler.WithGroup(name), h.gate}
}

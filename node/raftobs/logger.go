package raftobs

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/internal/loglimit"
)

// Raft's warnings about one peer repeat at every heartbeat while the peer is
// down (~120 lines a minute from the leader for one stopped node). A line
// of the same message about the same peer is written at most once per
// raftLogInterval; the next one says how many were suppressed.
const (
	raftLogInterval = 10 * time.Second
	// raftLogKeys bounds the limiter's memory; it starts over beyond it.
	raftLogKeys = 1024
)

// raftLogger adapts raft's hclog logger to slog: hclog levels become slog
// levels (raft's [WARN] and [ERROR] lines were INFO before, so --logLevel
// warn hid them), keys become snake_case, messages are prefixed "raft: ",
// and warnings and errors are rate-limited per message and peer.
type raftLogger struct {
	log   *slog.Logger
	name  string
	args  []any
	limit *loglimit.Limiter
	now   func() time.Time
}

// NewLogger returns raft's logger writing to l.
func NewLogger(l *slog.Logger) hclog.Logger { return newRaftLogger(l) }

func newRaftLogger(l *slog.Logger) *raftLogger {
	return &raftLogger{log: l, name: "raft", limit: loglimit.New(raftLogInterval, raftLogKeys), now: time.Now}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// peerKeys are the keys raft names a peer with.
var peerKeys = []string{"peer", "target", "server-id", "id", "address", "from"}

// routineRaftErrors are raft ERROR lines that mark a normal event, written
// as WARN so that an alert on ERROR lines means trouble: a leader learning
// of a newer term has simply been succeeded (every leadership change, a
// transfer included, ends that way).
var routineRaftErrors = map[string]bool{
	"peer has newer term, stopping replication": true,
}

func (r *raftLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Error && routineRaftErrors[msg] {
		level = hclog.Warn
	}
	sl := slogLevel(level)
	ctx := context.Background()
	if !r.log.Enabled(ctx, sl) {
		return
	}
	all := append(append([]any(nil), r.args...), args...)
	attrs := make([]slog.Attr, 0, len(all)/2+1)
	peer := ""
	for i := 0; i+1 < len(all); i += 2 {
		k := fmt.Sprint(all[i])
		v := raftValue(all[i+1])
		if peer == "" {
			for _, pk := range peerKeys {
				if k == pk {
					peer = fmt.Sprint(v)
				}
			}
		}
		attrs = append(attrs, slog.Any(raftKey(k), raftValue(v)))
	}
	if sl >= slog.LevelWarn {
		ok, suppressed := r.limit.Allow(msg+"\x00"+peer, r.now())
		if !ok {
			return
		}
		if suppressed > 0 {
			attrs = append(attrs, slog.Uint64("suppressed", suppressed))
		}
	}
	r.log.LogAttrs(ctx, sl, r.name+": "+msg, attrs...)
}

// raftKey makes raft's keys ("last-index", "backoff time") snake_case, and
// renames the ones slog's handlers write themselves (raft's "failed to
// contact" line carries a "time" that is a duration): a line never names a
// key twice.
func raftKey(k string) string {
	switch k {
	case slog.TimeKey, slog.LevelKey, slog.MessageKey, slog.SourceKey:
		return "raft_" + k
	}
	return strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return '_'
		}
		return r
	}, k)
}

// raftValue renders raft's values the way our own lines do: a server by
// its id, a configuration as "id=address(suffrage) …", an error by its
// message, and hclog's deferred formats (hclog.Fmt: raft's "initial
// configuration" line) formatted, never their verb left unexpanded.
func raftValue(v any) any {
	switch x := v.(type) {
	case raft.Server:
		return string(x.ID)
	case *raft.Server:
		return string(x.ID)
	case []raft.Server:
		return serversText(x)
	case raft.ServerID:
		return string(x)
	case raft.ServerAddress:
		return string(x)
	case error:
		return x.Error()
	case hclog.Format:
		if len(x) == 0 {
			return ""
		}
		format, ok := x[0].(string)
		if !ok {
			return fmt.Sprint(x...)
		}
		args := make([]any, len(x)-1)
		for i, a := range x[1:] {
			args[i] = raftValue(a)
		}
		return fmt.Sprintf(format, args...)
	}
	return v
}

// serversText is a raft configuration as --inspect prints it.
func serversText(servers []raft.Server) string {
	parts := make([]string, len(servers))
	for i, s := range servers {
		parts[i] = fmt.Sprintf("%s=%s(%s)", s.ID, s.Address, strings.ToLower(s.Suffrage.String()))
	}
	return strings.Join(parts, " ")
}

func (r *raftLogger) Trace(msg string, args ...any) { r.Log(hclog.Trace, msg, args...) }
func (r *raftLogger) Debug(msg string, args ...any) { r.Log(hclog.Debug, msg, args...) }
func (r *raftLogger) Info(msg string, args ...any)  { r.Log(hclog.Info, msg, args...) }
func (r *raftLogger) Warn(msg string, args ...any)  { r.Log(hclog.Warn, msg, args...) }
func (r *raftLogger) Error(msg string, args ...any) { r.Log(hclog.Error, msg, args...) }

func (r *raftLogger) enabled(l hclog.Level) bool {
	return r.log.Enabled(context.Background(), slogLevel(l))
}

func (r *raftLogger) IsTrace() bool { return r.enabled(hclog.Trace) }
func (r *raftLogger) IsDebug() bool { return r.enabled(hclog.Debug) }
func (r *raftLogger) IsInfo() bool  { return r.enabled(hclog.Info) }
func (r *raftLogger) IsWarn() bool  { return r.enabled(hclog.Warn) }
func (r *raftLogger) IsError() bool { return r.enabled(hclog.Error) }

func (r *raftLogger) ImpliedArgs() []any { return r.args }

func (r *raftLogger) With(args ...any) hclog.Logger {
	c := *r
	c.args = append(append([]any(nil), r.args...), args...)
	return &c
}

func (r *raftLogger) Name() string { return r.name }

func (r *raftLogger) Named(name string) hclog.Logger {
	c := *r
	c.name = r.name + "." + name
	return &c
}

func (r *raftLogger) ResetNamed(name string) hclog.Logger {
	c := *r
	c.name = name
	return &c
}

// SetLevel is a no-op: the slog handler's level decides.
func (r *raftLogger) SetLevel(hclog.Level) {}

func (r *raftLogger) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if r.enabled(l) {
			return l
		}
	}
	return hclog.Error
}

func (r *raftLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(r.StandardWriter(opts), "", 0)
}

func (r *raftLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		r.Info(strings.TrimRight(string(p), "\n"))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

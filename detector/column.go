package detector

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// ErrInvalidColumn is wrapped by every error Column.Validate returns.
var ErrInvalidColumn = errors.New("invalid column")

// Validate checks the two things without which a column has no defined
// outcome: a positive duration (the score divides by it) and one row per
// route (two rows for one route would make the outcome depend on row order).
// Observe ignores a column Validate rejects; the FSM should reject it with
// this error first. Odd evidence inside a row (a bucket count that does not
// match the route's layout, top-K keys outside the route or too long to
// isolate) is not an error here: it only costs that row its evidence, and
// the route's explanation says so.
func (c Column) Validate() error {
	_, err := c.rowOrder()
	return err
}

// rowOrder validates c and returns its row indices sorted by route id.
func (c Column) rowOrder() ([]int, error) {
	if c.AtMs <= c.WindowStartMs {
		return nil, fmt.Errorf("%w: at_ms %d not after window_start_ms %d", ErrInvalidColumn, c.AtMs, c.WindowStartMs)
	}
	order := make([]int, len(c.Rows))
	sorted := true
	for i := range c.Rows {
		order[i] = i
		if i > 0 && c.Rows[i-1].RouteID >= c.Rows[i].RouteID {
			sorted = false
		}
	}
	if !sorted {
		slices.SortFunc(order, func(a, b int) int { return cmp.Compare(c.Rows[a].RouteID, c.Rows[b].RouteID) })
		for i := 1; i < len(order); i++ {
			if c.Rows[order[i-1]].RouteID == c.Rows[order[i]].RouteID {
				return nil, fmt.Errorf("%w: rows[%d] and rows[%d]: duplicate route_id %d", ErrInvalidColumn,
					min(order[i-1], order[i]), max(order[i-1], order[i]), c.Rows[order[i]].RouteID)
			}
		}
	}
	return order, nil
}

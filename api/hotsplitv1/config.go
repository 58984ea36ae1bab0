package hotsplitv1

// StepAt is the step of the column whose window starts at windowStartMs:
// the pending step from its boundary on, the current one before. The state
// machine promotes the pending step once a column or the clock reaches the
// boundary; until then both the leader's column assembly and validation
// read the step a window has through this one function.
func (c *Config) StepAt(windowStartMs uint64) uint64 {
	if c.GetNextStepAtMs() != 0 && windowStartMs >= c.GetNextStepAtMs() {
		return c.GetNextStepMs()
	}
	return c.GetStepMs()
}

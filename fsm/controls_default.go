//go:build !jepsen

package fsm

// skipCAS and skipMergeCAS are jepsen negative controls (see
// controls_jepsen.go); normal builds always honour expected_version.
func skipCAS() bool { return false }

func skipMergeCAS() bool { return false }

// testSeams holds the jepsen-only fault seams of one FSM; normal builds
// have none.
type testSeams struct{}

func (testSeams) perturb(*State) {}

//go:build !jepsen

package fsm

// skipCAS is the jepsen negative control (see controls_jepsen.go); normal
// builds always honour expected_version.
func skipCAS() bool { return false }

// testSeams holds the jepsen-only fault seams of one FSM; normal builds
// have none.
type testSeams struct{}

func (testSeams) perturb(*State) {}

//go:build !jepsen

package fsm

// skipCAS is the jepsen negative control (see controls_jepsen.go); normal
// builds always honour expected_version.
func skipCAS() bool { return false }

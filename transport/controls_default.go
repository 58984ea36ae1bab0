//go:build !jepsen

package transport

// unsafeLocalRead is the jepsen negative control of the read path (see
// controls_jepsen.go); normal builds never answer a linearizable read
// without the read index.
func (s *Server) unsafeLocalRead() bool { return false }

//go:build !jepsen

package node

import "net/http"

// registerJepsenHandlers adds nothing to normal builds.
func registerJepsenHandlers(*http.ServeMux, *Node) {}

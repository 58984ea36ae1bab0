// Package hotsplitv1 stands in for the generated API.
package hotsplitv1

// Route is a stand-in.
type Route struct{}

// Package datanode reaches raft and fsm through keyviz and catalog, and
// imports a package outside its row.
package datanode

import (
	"github.com/hotsplit/hotsplit/keyviz"

	"github.com/hotsplit/hotsplit/internal/loglimit"
)

// Server is a stand-in.
type Server struct {
	sampler keyviz.Sampler
	limit   loglimit.Limit
}

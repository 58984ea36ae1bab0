package fsm

import (
	"github.com/google/btree"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// requestTable is the bounded table of recent client request ids and their
// first answers. It is persistent (copy-on-write B-trees): with returns a
// new table and never modifies the receiver, so a published State keeps its
// own version while Apply builds the next one. Eviction is FIFO by apply
// sequence, which every replica agrees on.
type requestTable struct {
	byID  *btree.BTreeG[*api.RequestRecord]
	bySeq *btree.BTreeG[*api.RequestRecord]
}

const requestTreeDegree = 16

func newRequestTable() *requestTable {
	return &requestTable{
		byID:  btree.NewG(requestTreeDegree, func(a, b *api.RequestRecord) bool { return a.GetRequestId() < b.GetRequestId() }),
		bySeq: btree.NewG(requestTreeDegree, func(a, b *api.RequestRecord) bool { return a.GetSeq() < b.GetSeq() }),
	}
}

func (t *requestTable) get(id string) (*api.RequestRecord, bool) {
	return t.byID.Get(&api.RequestRecord{RequestId: id})
}

func (t *requestTable) len() int { return t.bySeq.Len() }

// with returns the table with r added and the oldest records evicted down
// to limit entries.
func (t *requestTable) with(r *api.RequestRecord, limit int) *requestTable {
	n := &requestTable{byID: t.byID.Clone(), bySeq: t.bySeq.Clone()}
	n.byID.ReplaceOrInsert(r)
	n.bySeq.ReplaceOrInsert(r)
	for n.bySeq.Len() > limit {
		old, _ := n.bySeq.DeleteMin()
		n.byID.Delete(old)
	}
	return n
}

// records lists the table in apply order.
func (t *requestTable) records() []*api.RequestRecord {
	if t.len() == 0 {
		return nil
	}
	out := make([]*api.RequestRecord, 0, t.len())
	t.bySeq.Ascend(func(r *api.RequestRecord) bool {
		out = append(out, r)
		return true
	})
	return out
}

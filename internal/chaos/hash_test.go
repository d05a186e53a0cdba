package chaos_test

import (
	"testing"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/chaos"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// TestDigest checks the state hash against the real codec: a replica
// built from the segments a client may receive hashes like the server's
// projection for that client, and one that received a segment meant for
// someone else does not.
func TestDigest(t *testing.T) {
	tr := state.NewTracker(demo.Schema())
	var bots []demo.Bot
	for i := range 3 {
		b, err := demo.SpawnBot(tr)
		if err != nil {
			t.Fatal(err)
		}
		b.SetName(string(rune('a' + i)))
		b.SetX(float32(10 * i))
		b.SetHp(int16(100 - i))
		b.SetScore(int32(1000 + i)) // owner
		b.SetBounty(int16(50 + i))  // others
		b.SetMode(uint8(1 + i))     // server
		it := demo.NewItem()
		it.SetKind(uint8(i))
		it.SetCount(7)
		b.Inv().Add(uint32(i), it) // owner
		bots = append(bots, b)
	}
	tr.Commit()
	ents := tr.AppendEntities(nil)
	mine := bots[1].Entity()
	view := func(e *state.Entity) schema.Visibility {
		if e == mine {
			return schema.VisOwner
		}
		return schema.VisOthers
	}
	var others []*state.Entity
	for _, e := range ents {
		if e != mine {
			others = append(others, e)
		}
	}

	replicaOf := func(segs ...[]byte) *client.Replica {
		t.Helper()
		r, err := client.New(demo.Schema(), client.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Apply(segs...); err != nil {
			t.Fatal(err)
		}
		return r
	}
	var enc codec.Encoder
	all := enc.Full(nil, ents, codec.PartAll)
	othersSeg := enc.Full(nil, others, codec.PartOthers)
	ownerSeg := enc.Full(nil, []*state.Entity{mine}, codec.PartOwner)
	want := chaos.ServerDigest(ents, view)

	if got := chaos.ReplicaDigest(replicaOf(all, othersSeg, ownerSeg).Entities(nil)); got.Sum != want.Sum {
		t.Errorf("a correct replica hashes %#x, the server's view %#x:\n%s", got.Sum, want.Sum, chaos.Diff(want, got, 5, nil))
	}
	// Order of the input does not matter.
	rev := append([]*state.Entity(nil), ents...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if got := chaos.ServerDigest(rev, view); got.Sum != want.Sum {
		t.Errorf("the digest depends on the order of the entities")
	}

	for _, c := range []struct {
		name string
		segs [][]byte
	}{
		{"owner fields of every bot (leak)", [][]byte{all, othersSeg, enc.Full(nil, ents, codec.PartOwner)}},
		{"others fields of its own bot (leak)", [][]byte{all, enc.Full(nil, ents, codec.PartOthers), ownerSeg}},
		{"no owner segment (missing)", [][]byte{all, othersSeg}},
		{"one bot missing", [][]byte{enc.Full(nil, ents[:2], codec.PartAll), enc.Full(nil, others[:1], codec.PartOthers), ownerSeg}},
	} {
		got := chaos.ReplicaDigest(replicaOf(c.segs...).Entities(nil))
		if got.Sum == want.Sum {
			t.Errorf("%s: the digest did not change", c.name)
		}
		if d := chaos.Diff(want, got, 5, nil); d == "" {
			t.Errorf("%s: Diff found no difference", c.name)
		}
	}
}

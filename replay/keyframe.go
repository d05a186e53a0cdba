package replay

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
)

// A fuller encodes a spectator's replica as the full state a server
// sends a joining spectator (docs/protocol.md §5.1, §10.3): the PartAll
// segments, which create every entity, then the PartOthers segments, each
// partition split by level-of-detail band when the schema has bands, and
// a TICK listing the entities held below every band. A spectator owns
// nothing, so there is no PartOwner and no ownership list.
type fuller struct {
	sc     *schema.Schema // the recorded server's schema, as the replica's local one
	enc    codec.Encoder
	bands  int
	limits codec.Limits
	ents   []*state.Entity
	sub    []*state.Entity
}

func newFuller(sc *schema.Schema, limits codec.Limits) *fuller {
	f := &fuller{sc: sc, limits: limits.WithDefaults()}
	for _, c := range sc.Classes {
		f.bands = max(f.bands, len(c.Bands()))
	}
	return f
}

// frame returns the messages of the full state of r at tick: a TICK and
// its segments.
func (f *fuller) frame(r *client.Replica, tick uint64) ([][]byte, error) {
	f.ents = r.Entities(f.ents[:0])
	slices.SortFunc(f.ents, func(a, b *state.Entity) int { return cmp.Compare(a.ID(), b.ID()) })
	var segs [][]byte
	parts := []codec.Part{codec.PartAll, codec.PartOthers}
	for _, part := range parts {
		if f.bands == 0 {
			segs = f.split(segs, f.ents, part)
			continue
		}
		for b := range f.bands + 1 {
			sub := f.sub[:0]
			for _, e := range f.ents {
				if l, all := e.Level(); all || l >= b {
					sub = append(sub, e)
				}
			}
			f.sub = sub
			segs = f.split(segs, sub, part.Band(b))
		}
	}
	if len(segs) > session.MaxSegments {
		return nil, fmt.Errorf("replay: the full state of tick %d takes %d segments, over %d", tick, len(segs), session.MaxSegments)
	}
	t := session.Tick{Tick: tick, Segments: len(segs)}
	for _, e := range f.ents {
		if l, all := e.Level(); !all {
			t.Levels = append(t.Levels, session.Level{ID: uint32(e.ID()), Level: uint8(l)})
		}
	}
	return append([][]byte{session.AppendTick(nil, &t)}, segs...), nil
}

// split appends the non-empty full segments of part for ents, each within
// a quarter of the limits, as the server splits them.
func (f *fuller) split(segs [][]byte, ents []*state.Entity, part codec.Part) [][]byte {
	maxBytes, maxValues, maxEnts := f.limits.MaxSegmentBytes/4, f.limits.MaxValues/4, max(1, f.limits.MaxEntities/4)
	var add func(lo, hi int)
	add = func(lo, hi int) {
		seg := f.enc.Full(nil, ents[lo:hi], part)
		if (len(seg) > maxBytes || f.enc.Values() > maxValues) && hi-lo > 1 {
			mid := lo + (hi-lo)/2
			add(lo, mid)
			add(mid, hi)
			return
		}
		if !(len(seg) == 1 && seg[0] == 0) {
			segs = append(segs, seg)
		}
	}
	for lo := 0; lo < len(ents); lo += maxEnts {
		add(lo, min(lo+maxEnts, len(ents)))
	}
	return segs
}

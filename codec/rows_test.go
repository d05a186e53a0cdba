package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
)

// FuzzRowsMatch corrupts a valid segment as FuzzApplyMutated does and
// applies it twice, with the decoder's row-at-a-time fast paths and its
// kept plans of field trees, and entity by entity with every tree read:
// both must report the same error at the same bit, or produce the same
// entities and events.
func FuzzRowsMatch(f *testing.F) {
	st := fzNewStream(f)
	targets := st.targets()
	for i := range targets {
		f.Add([]byte{byte(i)})
		f.Add([]byte{byte(i), 0, 0, 13})
		f.Add([]byte{byte(i), 2, 0, 3})
		f.Add([]byte{byte(i), 1, 0, 40, 0, 0, 90})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		tg := targets[int(data[0])%len(targets)]
		seg := fzMutate(st.ticks[tg[0]][tg[1]], data[1:])
		var got [2]string
		for i, rows := range []bool{true, false} {
			ft := st.table(t, tg[0])
			codec.SetRows(ft.dec, rows)
			codec.SetPlans(ft.dec, rows)
			for id := uint32(0); id < 16; id++ {
				if c := st.sch.Class(id); c != nil {
					ft.tab.WatchAll(c)
				}
			}
			x := ft.tab.Begin()
			for _, p := range st.ticks[tg[0]][:tg[1]] {
				if err := ft.dec.Apply(x, p); err != nil {
					t.Fatalf("valid prefix segment: %v", err)
				}
			}
			if err := ft.dec.Apply(x, seg); err != nil {
				got[i] = err.Error()
				continue
			}
			var b bytes.Buffer
			for _, ev := range x.Commit() {
				fmt.Fprintf(&b, "%d %d %d %d %v %v\n", ev.Kind, ev.E.ID(), ev.Leaf, ev.Index, ev.Old.N, ev.New.N)
			}
			for _, e := range ft.tab.AppendEntities(nil) {
				b.Write(gvMarshal(gvDumpEntity(e, schema.VisOwner)))
			}
			got[i] = b.String()
		}
		if got[0] != got[1] {
			t.Fatalf("with rows:\n%s\nentity by entity:\n%s", got[0], got[1])
		}
	})
}

// TestRowsMatchTruncated applies every valid segment of the fuzz stream
// cut short at each of its bytes, with the decoder's fast paths and
// without: each cut must fail with a DecodeError, the same error at the
// same bit either way, and leave the replica as it was once rolled back.
func TestRowsMatchTruncated(t *testing.T) {
	st := fzNewStream(t)
	dump := func(ft *fzTable) string {
		var b bytes.Buffer
		for _, e := range ft.tab.AppendEntities(nil) {
			b.Write(gvMarshal(gvDumpEntity(e, schema.VisOwner)))
		}
		return b.String()
	}
	for _, tg := range st.targets() {
		seg := st.ticks[tg[0]][tg[1]]
		for cut := range len(seg) {
			var got [2]string
			for i, fast := range []bool{true, false} {
				ft := st.table(t, tg[0])
				codec.SetRows(ft.dec, fast)
				codec.SetPlans(ft.dec, fast)
				before := dump(ft)
				x := ft.tab.Begin()
				for _, p := range st.ticks[tg[0]][:tg[1]] {
					if err := ft.dec.Apply(x, p); err != nil {
						t.Fatalf("valid prefix segment: %v", err)
					}
				}
				err := ft.dec.Apply(x, seg[:cut])
				var de *codec.DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("tick %d segment %d cut at byte %d of %d: %v, want a DecodeError", tg[0], tg[1], cut, len(seg), err)
				}
				x.Rollback()
				if after := dump(ft); after != before {
					t.Fatalf("tick %d segment %d cut at byte %d: the replica changed", tg[0], tg[1], cut)
				}
				got[i] = err.Error()
			}
			if got[0] != got[1] {
				t.Fatalf("tick %d segment %d cut at byte %d: with the fast paths %q, without %q", tg[0], tg[1], cut, got[0], got[1])
			}
		}
	}
}

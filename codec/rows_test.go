package codec_test

import (
	"bytes"
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

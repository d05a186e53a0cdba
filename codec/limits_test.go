package codec

import (
	"errors"
	"strings"
	"testing"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/wire"
)

// limitSchema has one field for each limit to trip.
func limitSchema(t *testing.T) *schema.Schema {
	t.Helper()
	deep := &schema.Struct{Name: "D3", Fields: []*schema.Field{{ID: 1, Name: "v", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll}}}
	for i := 2; i >= 1; i-- {
		deep = &schema.Struct{Name: "D" + string(rune('0'+i)), Fields: []*schema.Field{
			{ID: 1, Name: "n", Type: schema.Type{Kind: schema.Nested, Struct: deep}, Vis: schema.VisAll},
		}}
	}
	c := &schema.Struct{Name: "C", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "s", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		{ID: 2, Name: "l", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Uint8}}, Vis: schema.VisAll},
		{ID: 3, Name: "d", Type: schema.Type{Kind: schema.Nested, Struct: deep}, Vis: schema.VisAll},
	}}
	s, err := schema.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLimits encodes a legal segment that exceeds one configured limit and
// checks the decoder refuses it with ErrLimit and leaves the table as it was.
func TestLimits(t *testing.T) {
	s := limitSchema(t)
	c := s.Class(1)
	cases := []struct {
		name  string
		lim   Limits
		build func(tr *state.Tracker)
	}{
		{"segment size", Limits{MaxSegmentBytes: 16}, func(tr *state.Tracker) {
			e, _ := tr.Spawn(c)
			e.Handle().SetStr(0, strings.Repeat("x", 64))
		}},
		{"string length", Limits{MaxStringBytes: 8}, func(tr *state.Tracker) {
			e, _ := tr.Spawn(c)
			e.Handle().SetStr(0, "123456789")
		}},
		{"container length", Limits{MaxContainerLen: 4}, func(tr *state.Tracker) {
			e, _ := tr.Spawn(c)
			for i := range 5 {
				e.Handle().List(1).Push(state.Value{N: uint64(i)})
			}
		}},
		{"nesting depth", Limits{MaxDepth: 2}, func(tr *state.Tracker) {
			e, _ := tr.Spawn(c)
			e.SetNum(2, 7) // the int32 three structs down
		}},
		{"entity count", Limits{MaxEntities: 3}, func(tr *state.Tracker) {
			for range 4 {
				tr.Spawn(c)
			}
		}},
		{"values per segment", Limits{MaxValues: 3}, func(tr *state.Tracker) {
			e, _ := tr.Spawn(c)
			for i := range 4 {
				e.Handle().List(1).Push(state.Value{N: uint64(i)})
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := state.NewTracker(s)
			tc.build(tr)
			var enc Encoder
			seg := enc.Delta(nil, tr.Commit(), PartAll, nil)

			// The same segment decodes under the defaults...
			ok, _ := NewDecoder(s, nil, Limits{})
			tab := state.NewTable()
			x := tab.Begin()
			if err := ok.Apply(x, seg); err != nil {
				t.Fatalf("default limits: %v", err)
			}
			x.Rollback()

			// ...and is refused under the tight limit, leaving nothing.
			dec, _ := NewDecoder(s, nil, tc.lim)
			x = tab.Begin()
			err := dec.Apply(x, seg)
			x.Rollback()
			var de *DecodeError
			if !errors.Is(err, wire.ErrLimit) || !errors.As(err, &de) {
				t.Fatalf("err = %v, want a *DecodeError wrapping wire.ErrLimit", err)
			}
			if tab.Len() != 0 {
				t.Fatalf("table holds %d entities after a refused segment", tab.Len())
			}
		})
	}
}

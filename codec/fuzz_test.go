package codec_test

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// fzSchema has a class of scalars of every kind and visibility with nested
// structs, and the Holder class of the golden containers scenario.
func fzSchema(t testing.TB) *schema.Schema {
	t.Helper()
	bounded, err := schema.NewQuant(1.0/64, -100, 100, 0, true, true)
	if err != nil {
		t.Fatal(err)
	}
	deep := &schema.Struct{Name: "Deep", Fields: []*schema.Field{
		{ID: 1, Name: "z", Type: schema.Type{Kind: schema.Uint8}, Vis: schema.VisAll},
		{ID: 2, Name: "tag", Type: schema.Type{Kind: schema.String}, Vis: schema.VisOwner},
	}}
	pos := &schema.Struct{Name: "Pos", Fields: []*schema.Field{
		{ID: 1, Name: "x", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 2, Name: "y", Type: schema.Type{Kind: schema.Float32, Quant: bounded}, Vis: schema.VisAll},
		{ID: 3, Name: "deep", Type: schema.Type{Kind: schema.Nested, Struct: deep}, Vis: schema.VisAll},
	}}
	k := func(kind schema.Kind) schema.Type { return schema.Type{Kind: kind} }
	thing := &schema.Struct{Name: "Thing", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "b", Type: k(schema.Bool), Vis: schema.VisAll},
		{ID: 2, Name: "i8", Type: k(schema.Int8), Vis: schema.VisAll},
		{ID: 3, Name: "i64", Type: k(schema.Int64), Vis: schema.VisAll},
		{ID: 4, Name: "u16", Type: k(schema.Uint16), Vis: schema.VisAll},
		{ID: 5, Name: "u64", Type: k(schema.Uint64), Vis: schema.VisAll},
		{ID: 6, Name: "f32", Type: k(schema.Float32), Vis: schema.VisAll},
		{ID: 7, Name: "f64", Type: k(schema.Float64), Vis: schema.VisAll},
		{ID: 8, Name: "qu", Type: schema.Type{Kind: schema.Float64, Quant: schema.Quant{Step: 0.5}}, Vis: schema.VisAll},
		{ID: 9, Name: "s", Type: k(schema.String), Vis: schema.VisAll},
		{ID: 10, Name: "bin", Type: k(schema.Bytes), Vis: schema.VisAll},
		{ID: 11, Name: "ref", Type: k(schema.Ref), Vis: schema.VisAll},
		{ID: 12, Name: "pos", Type: schema.Type{Kind: schema.Nested, Struct: pos}, Vis: schema.VisAll},
		{ID: 13, Name: "gold", Type: k(schema.Uint32), Vis: schema.VisOwner},
		{ID: 14, Name: "mood", Type: k(schema.Int16), Vis: schema.VisOthers},
		{ID: 15, Name: "secret", Type: k(schema.Int32), Vis: schema.VisServer},
		{ID: 16, Name: "old", Type: k(schema.Int32), Vis: schema.VisAll, Deprecated: true},
		{ID: 17, Name: "i32", Type: k(schema.Int32), Vis: schema.VisAll},
	}}
	holder, _ := gvContainerClasses()
	s, err := schema.New(thing, holder)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fzStream is a valid multi-tick stream for fzSchema: per tick, the
// segments a client that owns nothing receives (all, then others), and
// the full state of the world after the last tick.
type fzStream struct {
	sch   *schema.Schema
	ticks [][][]byte
	full  [][]byte // Full of the final world for all three partitions
}

func fzNewStream(t testing.TB) *fzStream {
	t.Helper()
	s := fzSchema(t)
	w := &gvWorld{t: t, sch: s, tr: state.NewTracker(s)}
	c := w.client("fuzz", "", "others", codec.PartAll, codec.PartOthers, codec.PartOwner)
	thing, holder := s.Class(1), s.Class(3)
	item := gvFieldNamed(t, holder, "inv").Type.Struct

	a := w.spawn(thing)
	for path, v := range map[string]any{
		"b": true, "i8": -5, "i64": int64(-1) << 40, "u16": 999, "u64": uint64(1) << 63, "f32": float32(1.25),
		"f64": -2.5, "qu": 10.5, "s": "thing", "bin": []byte{1, 2}, "pos.x": -7, "pos.y": 3.5,
		"pos.deep.z": 9, "pos.deep.tag": "t", "gold": 100, "mood": -1, "secret": 5, "i32": 123456,
	} {
		gvSet(t, a, path, v)
	}
	b := w.spawn(thing)
	gvSet(t, b, "ref", a.ID())
	h := w.spawn(holder)
	for _, v := range []int64{1, 2, 3, 4, 5, 6} {
		gvList(t, h, "nums").Push(gvNum(v))
	}
	gvList(t, h, "names").Push(gvStr("n"))
	gvList(t, h, "path").Push(gvVec(t, holder, 1, 1))
	gvMap(t, h, "stats").Put(gvStr("a"), gvF64(1))
	gvMap(t, h, "stats").Put(gvStr("b"), gvF64(2))
	gvMap(t, h, "counts").Put(gvNum(1), gvNum(1))
	for k := uint64(1); k <= 4; k++ {
		gvBag(t, h, "inv").Add(k, gvValue(t, item, map[string]any{"count": int(k), "tags": []string{"x"}}))
	}
	w.tick()
	// Tick 1: deltas of every kind and container operations.
	for path, v := range map[string]any{
		"b": false, "i8": 100, "i64": int64(7), "u16": 0, "u64": uint64(1), "f32": float32(-3),
		"f64": 1e10, "qu": -4.0, "s": "changed", "pos.y": -99.0, "pos.deep.z": 10, "pos.deep.tag": "u",
		"gold": 101, "mood": 2, "i32": -5,
	} {
		gvSet(t, a, path, v)
	}
	gvSet(t, b, "ref", 0)
	nums := gvList(t, h, "nums")
	nums.Push(gvNum(7))
	nums.Insert(1, gvNum(-1))
	nums.Remove(3)
	nums.Set(0, gvNum(100))
	gvMap(t, h, "stats").Put(gvStr("c"), gvF64(3))
	gvMap(t, h, "stats").Delete(gvStr("a"))
	gvBag(t, h, "inv").Remove(2)
	gvBag(t, h, "inv").Get(3).SetNum(gvFieldNamed(t, item, "count").Leaf, 33)
	gvBag(t, h, "inv").Add(5, gvValue(t, item, map[string]any{"name": "five"}))
	c2 := w.spawn(thing)
	gvSet(t, c2, "gold", 1)
	gvSet(t, c2, "mood", 1)
	w.tick()
	// Tick 2: a destroy, whole containers, a new holder.
	w.tr.Destroy(b)
	for i := range 20 {
		gvList(t, h, "names").Set(0, gvStr(string(rune('a'+i))))
	}
	gvList(t, h, "flags").Push(gvNum(1))
	h2 := w.spawn(holder)
	gvList(t, h2, "path").Push(gvVec(t, holder, 2, 3))
	w.tick()

	st := &fzStream{sch: s}
	for _, tk := range c.ticks {
		st.ticks = append(st.ticks, tk.segments)
	}
	// Tick 3: set sections, as for changes a budget held back, of values
	// that changed since (some to zero).
	gvSet(t, a, "i8", 0)
	gvSet(t, a, "s", "set")
	gvList(t, h, "nums").Clear()
	w.tr.Commit()
	ents := w.tr.AppendEntities(nil)
	var enc codec.Encoder
	var sets [][]byte
	for _, p := range []codec.Part{codec.PartAll, codec.PartOthers, codec.PartOwner} {
		sets = append(sets, enc.Set(nil, ents, p))
	}
	st.ticks = append(st.ticks, sets)
	// Tick 4: ranked update sections (§5.4), assembled as for a client
	// that holds every entity.
	gvSet(t, a, "i8", 3)
	gvSet(t, a, "gold", 7)
	gvSet(t, c2, "mood", 5)
	gvSet(t, c2, "u16", 12)
	gvList(t, h2, "path").Push(gvVec(t, holder, 4, 5))
	cs := w.tr.Commit()
	var held codec.Held
	var slots []uint32
	for _, e := range ents {
		slots = append(slots, e.ID().Slot())
	}
	held.Reset(slots, 0)
	asm := codec.Assembler{Held: &held}
	var ranked [][]byte
	var batch codec.Batch
	for _, p := range []codec.Part{codec.PartAll, codec.PartOthers, codec.PartOwner} {
		enc.DeltaBatch(&batch, cs, p)
		for i := range cs.Changes {
			asm.Add(&batch, batch.Piece(i))
		}
		ranked = asm.Segments(ranked, 0, 0, 0)
	}
	st.ticks = append(st.ticks, ranked)
	ents = w.tr.AppendEntities(nil)
	for _, p := range []codec.Part{codec.PartAll, codec.PartOthers, codec.PartOwner} {
		st.full = append(st.full, enc.Full(nil, ents, p))
	}
	return st
}

// fzTable is a client table with the stream applied up to a point.
type fzTable struct {
	tab *state.Table
	dec *codec.Decoder
}

func (s *fzStream) table(t *testing.T, ticks int) *fzTable {
	t.Helper()
	dec, err := codec.NewDecoder(s.sch, nil, codec.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ft := &fzTable{tab: state.NewTable(), dec: dec}
	for i := range ticks {
		x := ft.tab.Begin()
		for _, seg := range s.ticks[i] {
			if err := dec.Apply(x, seg); err != nil {
				t.Fatalf("valid tick %d: %v", i, err)
			}
		}
		x.Commit()
	}
	return ft
}

// fzSnapshot records the entity pointers and deep copies of their records.
type fzSnapshot struct {
	ents map[state.ID]*state.Entity
	recs map[state.ID]*state.Record
}

func fzTake(tab *state.Table) fzSnapshot {
	s := fzSnapshot{ents: make(map[state.ID]*state.Entity), recs: make(map[state.ID]*state.Record)}
	for _, e := range tab.AppendEntities(nil) {
		s.ents[e.ID()] = e
		s.recs[e.ID()] = e.Record.Clone()
	}
	return s
}

func (s fzSnapshot) check(t *testing.T, tab *state.Table) {
	t.Helper()
	if tab.Len() != len(s.ents) {
		t.Fatalf("after Rollback: %d entities, want %d", tab.Len(), len(s.ents))
	}
	for id, e := range s.ents {
		got := tab.Entity(id)
		if got != e {
			t.Fatalf("after Rollback: entity %d is %p, want %p", id, got, e)
		}
		if !got.Record.Equal(s.recs[id]) {
			t.Fatalf("after Rollback: entity %d differs from before the tick", id)
		}
	}
}

// fzApply applies seg after the segments in prefix, all in one
// transaction, as one tick, and checks the outcome: an error must be a
// *codec.DecodeError and Rollback must restore the table exactly; a
// success must leave only values valid for their types, and a state that
// the encoder reproduces.
func fzApply(t *testing.T, ft *fzTable, prefix [][]byte, seg []byte) error {
	t.Helper()
	before := fzTake(ft.tab)
	x := ft.tab.Begin()
	for _, p := range prefix {
		if err := ft.dec.Apply(x, p); err != nil {
			t.Fatalf("valid prefix segment: %v", err)
		}
	}
	err := ft.dec.Apply(x, seg)
	if err != nil {
		var de *codec.DecodeError
		if !errors.As(err, &de) || de != err {
			t.Fatalf("error %T %v is not a *codec.DecodeError", err, err)
		}
		if de.Bit < 0 || de.Bit > 8*len(seg) {
			t.Fatalf("error at bit %d of a %d-byte segment", de.Bit, len(seg))
		}
		x.Rollback()
		before.check(t, ft.tab)
		return err
	}
	x.Commit()
	for _, e := range ft.tab.AppendEntities(nil) {
		fzCheckRecord(t, &e.Record)
	}
	fzReencode(t, ft)
	return nil
}

// fzCheckRecord fails if r holds a value its type cannot hold: decoders
// must range-check everything they store.
func fzCheckRecord(t *testing.T, r *state.Record) {
	t.Helper()
	st := r.Type()
	for i := 0; i < st.Leaves; i++ {
		l := st.Leaf(i)
		typ := &l.Field.Type
		switch k := typ.Kind; {
		case k.Numeric():
			fzCheckNum(t, typ, r.Num(l.Num), l.Field.Name)
		case k == schema.List:
			list := r.List(l.Obj)
			for j := range list.Len() {
				fzCheckElem(t, typ.Elem, list.At(j), l.Field.Name)
			}
		case k == schema.Map:
			m := r.Map(l.Obj)
			for _, key := range m.Keys(nil) {
				if typ.Key != schema.String {
					fzCheckNum(t, &schema.Type{Kind: typ.Key}, key.N, l.Field.Name+" key")
				}
				v, _ := m.Get(key)
				fzCheckElem(t, typ.Elem, v, l.Field.Name)
			}
		case k == schema.Bag:
			b := r.Bag(l.Obj)
			for _, key := range b.Keys(nil) {
				fzCheckNum(t, &schema.Type{Kind: typ.Key}, key, l.Field.Name+" key")
				item := b.Get(key)
				if item == nil || item.Type() != typ.Struct {
					t.Fatalf("%s: bad item under key %d", l.Field.Name, key)
				}
				fzCheckRecord(t, item)
			}
		}
	}
}

func fzCheckElem(t *testing.T, typ *schema.Type, v state.Value, name string) {
	t.Helper()
	switch {
	case typ.Kind.Numeric():
		fzCheckNum(t, typ, v.N, name)
	case typ.Kind == schema.Nested:
		if v.R == nil || v.R.Type() != typ.Struct {
			t.Fatalf("%s: bad struct element", name)
		}
		fzCheckRecord(t, v.R)
	}
}

func fzCheckNum(t *testing.T, typ *schema.Type, v uint64, name string) {
	t.Helper()
	ok := true
	switch k := typ.Kind; {
	case typ.Quant.Bounded:
		ok = v>>typ.Quant.Bits == 0
	case typ.Quant.Enabled():
		ok = true
	case k == schema.Float32:
		ok = v>>32 == 0
	case k == schema.Float64:
		ok = true
	default:
		ok = state.Normalize(typ, v) == v
	}
	if !ok {
		t.Fatalf("%s: value %#x is not a valid %s", name, v, typ)
	}
}

// fzReencode encodes the client's state with Encoder.Full and decodes it
// into a fresh table: every field a client can see must survive.
func fzReencode(t *testing.T, ft *fzTable) {
	t.Helper()
	ents := ft.tab.AppendEntities(nil)
	var enc codec.Encoder
	tab := state.NewTable()
	x := tab.Begin()
	for _, p := range []codec.Part{codec.PartAll, codec.PartOthers, codec.PartOwner} {
		if err := ft.dec.Apply(x, enc.Full(nil, ents, p)); err != nil {
			t.Fatalf("re-encoded client state does not decode: %v", err)
		}
	}
	x.Commit()
	got := tab.AppendEntities(nil)
	if len(got) != len(ents) {
		t.Fatalf("re-encoded: %d entities, want %d", len(got), len(ents))
	}
	for i, e := range ents {
		a, b := gvMarshal(gvDumpEntity(e, schema.VisAll)), gvMarshal(gvDumpEntity(got[i], schema.VisAll))
		if !bytes.Equal(a, b) {
			t.Fatalf("re-encoded entity differs:\n%s\n%s", a, b)
		}
	}
}

// seeds returns every valid segment of the stream, the full-state
// segments and a few corrupt ones.
func (s *fzStream) seeds() [][]byte {
	var out [][]byte
	for _, tk := range s.ticks {
		out = append(out, tk...)
	}
	out = append(out, s.full...)
	seg := s.ticks[1][0]
	out = append(out,
		nil,
		[]byte{0},
		seg[:len(seg)/2],
		append(slices.Clone(seg), 0xFF),
		func() []byte { b := slices.Clone(seg); b[len(b)/3] ^= 0x24; return b }(),
		[]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF},
	)
	return out
}

// FuzzApply applies arbitrary bytes as one segment to a table that holds
// the entities of a valid stream's first tick. It must never panic; an
// error must be a *codec.DecodeError after which Rollback restores the
// table exactly; a success must leave valid values that re-encode.
func FuzzApply(f *testing.F) {
	st := fzNewStream(f)
	for _, seg := range st.seeds() {
		f.Add(seg)
	}
	f.Fuzz(func(t *testing.T, seg []byte) {
		fzApply(t, st.table(t, 1), nil, seg)
	})
}

// fzTargets lists the valid segments of the stream by tick and position:
// applying segment j of tick i needs ticks 0..i−1 committed and segments
// 0..j−1 of tick i applied in the same transaction.
func (s *fzStream) targets() [][2]int {
	var out [][2]int
	for i, tk := range s.ticks {
		for j := range tk {
			out = append(out, [2]int{i, j})
		}
	}
	return out
}

// fzMutate derives a corrupted copy of seg from a mutation program: each
// group of three bytes is an operation and a 16-bit position or value.
func fzMutate(seg, prog []byte) []byte {
	out := slices.Clone(seg)
	for len(prog) >= 3 && len(out) > 0 {
		op, arg := prog[0], int(prog[1])<<8|int(prog[2])
		prog = prog[3:]
		switch op % 6 {
		case 0, 1: // flip one bit
			bit := arg % (8 * len(out))
			out[bit/8] ^= 1 << (bit % 8)
		case 2: // truncate
			out = out[:arg%len(out)]
		case 3: // overwrite a byte
			out[int(op>>3)%len(out)] = byte(arg)
		case 4: // insert a byte
			i := arg % (len(out) + 1)
			out = slices.Insert(out, i, byte(op))
		case 5: // delete a byte
			i := arg % len(out)
			out = slices.Delete(out, i, i+1)
		}
	}
	return out
}

// FuzzApplyMutated corrupts a valid segment of a valid stream and applies
// it in its place: data[0] picks the segment, the rest is a mutation
// program (see fzMutate). Starting from valid data reaches deep into the
// decoder; the checks are those of FuzzApply.
func FuzzApplyMutated(f *testing.F) {
	st := fzNewStream(f)
	targets := st.targets()
	for i := range targets {
		f.Add([]byte{byte(i)})                   // unchanged: must apply
		f.Add([]byte{byte(i), 0, 0, 13})         // one bit flipped
		f.Add([]byte{byte(i), 2, 0, 3})          // truncated
		f.Add([]byte{byte(i), 4, 0, 1, 5, 0, 7}) // a byte inserted and one deleted
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		tg := targets[int(data[0])%len(targets)]
		seg := st.ticks[tg[0]][tg[1]]
		mutated := fzMutate(seg, data[1:])
		err := fzApply(t, st.table(t, tg[0]), st.ticks[tg[0]][:tg[1]], mutated)
		if err != nil && bytes.Equal(mutated, seg) {
			t.Fatalf("valid segment rejected: %v", err)
		}
	})
}

// TestFuzzStream checks the fuzz targets' base stream itself: it decodes,
// and a client's state after it matches the server's.
func TestFuzzStream(t *testing.T) {
	st := fzNewStream(t)
	ft := st.table(t, len(st.ticks))
	fzReencode(t, ft)
	if ft.tab.Len() != 4 {
		t.Fatalf("%d entities", ft.tab.Len())
	}
	// The full state of the final world decodes to the same state.
	late := state.NewTable()
	x := late.Begin()
	for _, seg := range st.full {
		if err := ft.dec.Apply(x, seg); err != nil {
			t.Fatal(err)
		}
	}
	x.Commit()
	for _, e := range ft.tab.AppendEntities(nil) {
		a, b := gvMarshal(gvDumpEntity(e, schema.VisOthers)), gvMarshal(gvDumpEntity(late.Entity(e.ID()), schema.VisOthers))
		if !bytes.Equal(a, b) {
			t.Fatalf("late joiner differs:\n%s\n%s", a, b)
		}
	}
}

// TestListOpsWithoutValues is a regression test: a tick whose only
// operations on a list of U(k)-coded numbers carry no value (remove,
// clear) must still decode. The encoder used to omit the code parameter
// that the decoder reads whenever there are operations, which shifted the
// rest of the segment and silently corrupted the client's state.
func TestListOpsWithoutValues(t *testing.T) {
	holder, _ := gvContainerClasses()
	w := newGVWorld(t, holder)
	c := w.client("x", "", "others", codec.PartAll)
	e := w.spawn(holder)
	nums := gvList(t, e, "nums")
	for i := range 10 {
		nums.Push(gvNum(int64(i * 1000)))
	}
	w.tick()
	nums.Remove(3)
	gvSet(t, e, "hp", 5)
	w.tick()
	nums.Remove(0)
	nums.Remove(0)
	w.tick()
	ticks := make([][][]byte, len(c.ticks))
	for i, tk := range c.ticks {
		ticks[i] = tk.segments
	}
	got := gvApplyTicks(t, w.sch, nil, schema.VisOthers, ticks)
	for i, tk := range c.ticks {
		if a, b := gvMarshal(got[i]), gvMarshal(tk.state); !bytes.Equal(a, b) {
			t.Fatalf("tick %d: client\n%s\nserver\n%s", i, a, b)
		}
	}
}

// TestRecordHugeCodes is a regression test: a numeric field of a struct
// value (bag item, list or map element) is written with k = the bit length
// of its own code, which is 64 for uint64 values ≥ 2^63, int64 values
// beyond ±2^62 and unbounded quantization codes clamped at ±2^62; k must
// stay ≤ 63.
func TestRecordHugeCodes(t *testing.T) {
	item := &schema.Struct{Name: "It", Fields: []*schema.Field{
		{ID: 1, Name: "u", Type: schema.Type{Kind: schema.Uint64}, Vis: schema.VisAll},
		{ID: 2, Name: "i", Type: schema.Type{Kind: schema.Int64}, Vis: schema.VisAll},
		{ID: 3, Name: "q", Type: schema.Type{Kind: schema.Float64, Quant: schema.Quant{Step: 1}}, Vis: schema.VisAll},
	}}
	c := &schema.Struct{Name: "C", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "bag", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item}, Vis: schema.VisAll},
		{ID: 2, Name: "list", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: item}}, Vis: schema.VisAll},
	}}
	w := newGVWorld(t, c)
	cl := w.client("x", "", "others", codec.PartAll)
	e := w.spawn(c)
	big := gvValue(t, item, map[string]any{"u": uint64(math.MaxUint64), "i": int64(math.MinInt64), "q": math.Inf(1)})
	gvBag(t, e, "bag").Add(1, big)
	gvList(t, e, "list").Push(big.Value())
	w.tick()
	gvBag(t, e, "bag").Get(1).SetNum(0, 1<<63)
	gvBag(t, e, "bag").Add(2, big)
	w.tick()
	ticks := make([][][]byte, len(cl.ticks))
	for i, tk := range cl.ticks {
		ticks[i] = tk.segments
	}
	got := gvApplyTicks(t, w.sch, nil, schema.VisOthers, ticks)
	for i, tk := range cl.ticks {
		if a, b := gvMarshal(got[i]), gvMarshal(tk.state); !bytes.Equal(a, b) {
			t.Fatalf("tick %d: client\n%s\nserver\n%s", i, a, b)
		}
	}
}

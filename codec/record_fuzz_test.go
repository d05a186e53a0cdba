package codec_test

import (
	"errors"
	"math"
	"testing"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/wire"
)

// rfSchema returns a schema whose class Host has client RPC 1, whose
// arguments hold a value of every kind: scalars, a quantized float, a
// nested struct, a reference, lists, maps and a bag. With extra, the
// arguments have one more field (a newer sender's), which an older
// receiver skips.
func rfSchema(t testing.TB, extra bool) (*schema.Schema, *schema.Struct) {
	t.Helper()
	holder, _ := gvContainerClasses() // its containers, as arguments
	vec := &schema.Struct{Name: "Vec2", Fields: []*schema.Field{
		{ID: 1, Name: "x", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 2, Name: "y", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 0.25}}, Vis: schema.VisAll},
	}}
	k := func(kind schema.Kind) schema.Type { return schema.Type{Kind: kind} }
	fields := []*schema.Field{
		{ID: 1, Name: "b", Type: k(schema.Bool), Vis: schema.VisAll},
		{ID: 2, Name: "i8", Type: k(schema.Int8), Vis: schema.VisAll},
		{ID: 3, Name: "u64", Type: k(schema.Uint64), Vis: schema.VisAll},
		{ID: 4, Name: "f32", Type: k(schema.Float32), Vis: schema.VisAll},
		{ID: 5, Name: "f64", Type: k(schema.Float64), Vis: schema.VisAll},
		{ID: 6, Name: "s", Type: k(schema.String), Vis: schema.VisAll},
		{ID: 7, Name: "bin", Type: k(schema.Bytes), Vis: schema.VisAll},
		{ID: 8, Name: "ref", Type: k(schema.Ref), Vis: schema.VisAll},
		{ID: 9, Name: "at", Type: schema.Type{Kind: schema.Nested, Struct: vec}, Vis: schema.VisAll},
	}
	for i, f := range holder.Fields {
		g := *f
		g.ID = uint32(10 + i)
		fields = append(fields, &g)
	}
	if extra {
		fields = append(fields, &schema.Field{ID: 30, Name: "note", Type: k(schema.String), Vis: schema.VisAll})
	}
	args := &schema.Struct{Name: "UseArgs", Fields: fields}
	host := &schema.Struct{Name: "Host", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: k(schema.Int16), Vis: schema.VisAll},
	}, RPCs: []*schema.RPC{{ID: 1, Name: "use", Dir: schema.ClientToServer, Args: args}}}
	s, err := schema.New(host)
	if err != nil {
		t.Fatal(err)
	}
	return s, s.Class(1).RPC(1).Args
}

// rfSeeds returns encodings of argument records of st: zero, scalars only,
// and one with every container filled.
func rfSeeds(t testing.TB, st *schema.Struct) [][]byte {
	t.Helper()
	var enc codec.Encoder
	zero := state.NewValue(st)
	scalars := gvValue(t, st, map[string]any{
		"b": true, "i8": -7, "u64": uint64(math.MaxUint64), "f32": float32(-1.5), "f64": 1e300,
		"s": "héllo", "bin": []byte{0, 255}, "names": []string{"a", "", "ccc"},
	})
	full := gvValue(t, st, map[string]any{"s": "full", "names": []string{"x"}})
	f := gvFieldNamed(t, st, "nums")
	full.List(f.Leaf).Push(gvNum(-3))
	full.List(f.Leaf).Push(gvNum(1 << 30))
	f = gvFieldNamed(t, st, "stats")
	full.Map(f.Leaf).Put(gvStr("k"), state.Value{N: math.Float64bits(2.5)})
	f = gvFieldNamed(t, st, "counts")
	full.Map(f.Leaf).Put(gvNum(-2), gvNum(9))
	f = gvFieldNamed(t, st, "inv")
	item := gvValue(t, f.Type.Struct, map[string]any{"count": 4, "name": "rope", "tags": []string{"long"}})
	full.Bag(f.Leaf).Add(7, item)
	full.Bag(f.Leaf).Add(9, state.NewValue(f.Type.Struct))
	f = gvFieldNamed(t, st, "flags")
	full.List(f.Leaf).Push(gvNum(1))
	var seeds [][]byte
	for _, h := range []state.Handle{zero, scalars, full} {
		seeds = append(seeds, enc.AppendRecord(nil, h.Record()))
	}
	return seeds
}

// FuzzDecodeRecord feeds arbitrary bytes to Decoder.DecodeRecord, the
// decoder of RPC arguments, which a server runs on every client's calls:
// a receiver of the same schema and an older one (the sender's arguments
// have a field it does not know). Every input either decodes, and then
// re-encodes to a record that decodes equal to it, or fails with a
// *codec.DecodeError wrapping wire.ErrMalformed, ErrTruncated or ErrLimit
// or codec.ErrUnknown (a field the sender's struct does not have); and a failure leaves
// the decoder able to decode the valid seeds as before.
func FuzzDecodeRecord(f *testing.F) {
	local, largs := rfSchema(f, false)
	remote, rargs := rfSchema(f, true)
	seeds := rfSeeds(f, largs)
	for _, s := range seeds {
		f.Add(s, false)
	}
	for _, s := range rfSeeds(f, rargs) {
		f.Add(s, true)
	}
	f.Add([]byte{}, false)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, true)
	lim := codec.Limits{MaxStringBytes: 1 << 10, MaxContainerLen: 1 << 10, MaxValues: 1 << 12}
	same, err := codec.NewDecoder(local, nil, lim)
	if err != nil {
		f.Fatal(err)
	}
	older, err := codec.NewDecoder(local, remote, lim)
	if err != nil {
		f.Fatal(err)
	}
	valid := seeds[2]
	want, err := same.DecodeRecord(largs, largs, valid)
	if err != nil {
		f.Fatal(err)
	}
	wantCopy := want.Clone()
	f.Fuzz(func(t *testing.T, data []byte, fromNewer bool) {
		dec, rs := same, largs
		if fromNewer {
			dec, rs = older, rargs
		}
		rec, err := dec.DecodeRecord(rs, largs, data)
		if err != nil {
			var de *codec.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v (%T) is not a *codec.DecodeError", err, err)
			}
			if !errors.Is(err, wire.ErrMalformed) && !errors.Is(err, wire.ErrLimit) && !errors.Is(err, wire.ErrTruncated) &&
				!errors.Is(err, codec.ErrUnknown) {
				t.Fatalf("error %v wraps none of the decoder's errors", err)
			}
			got, err := same.DecodeRecord(largs, largs, valid)
			if err != nil || !got.Equal(wantCopy) {
				t.Fatalf("after a bad input, the valid seed decodes to another record (err %v)", err)
			}
			return
		}
		rec = rec.Clone() // the decoder's record lives until its next DecodeRecord
		var enc codec.Encoder
		again := enc.AppendRecord(nil, rec)
		back, err := same.DecodeRecord(largs, largs, again)
		if err != nil {
			t.Fatalf("decoding a re-encoded record: %v", err)
		}
		if !back.Equal(rec) {
			t.Fatal("a re-encoded record decodes to another record")
		}
	})
}

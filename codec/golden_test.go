package codec_test

// Golden wire vectors: deterministic scenarios whose descriptor, segments
// and per-tick client state are committed under testdata/vectors (see the
// README there) for decoders in other languages. TestGoldenVectors re-runs
// every scenario and compares with the committed files; go test -update
// rewrites them.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/internal/arena"
	"github.com/replicago/replica/internal/workload/w1"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

const vectorDir = "../testdata/vectors"

// A gvClient is one audience of a scenario: the partitions it receives
// and the visibility its state dump shows. Each client becomes one file.
type gvClient struct {
	file  string // file name without .json
	name  string
	desc  string
	view  string // "others" or "owner"
	vis   schema.Visibility
	parts []codec.Part
	ticks []gvTick
	on    bool // recording: clients join late by starting with Full
}

type gvTick struct {
	segments [][]byte
	state    []gvEntity
}

// gvEntity is one entity of a state dump.
type gvEntity struct {
	ID     uint32         `json:"id"`
	Class  string         `json:"class"`
	Fields map[string]any `json:"fields"`
}

// A gvWorld is a server running a scenario.
type gvWorld struct {
	t       testing.TB
	sch     *schema.Schema
	tr      *state.Tracker
	enc     codec.Encoder
	clients []*gvClient
}

func newGVWorld(t testing.TB, classes ...*schema.Struct) *gvWorld {
	t.Helper()
	s, err := schema.New(classes...)
	if err != nil {
		t.Fatal(err)
	}
	return &gvWorld{t: t, sch: s, tr: state.NewTracker(s)}
}

// client adds an audience that records from the next tick on.
func (w *gvWorld) client(file, desc, view string, parts ...codec.Part) *gvClient {
	vis := schema.VisOthers
	if view == "owner" {
		vis = schema.VisOwner
	}
	c := &gvClient{file: file, name: file, desc: desc, view: view, vis: vis, parts: parts, on: true}
	w.clients = append(w.clients, c)
	return c
}

// tick commits the tick and records, for every client, its segments and
// the server's state as that client may see it.
func (w *gvWorld) tick() {
	cs := w.tr.Commit()
	for _, c := range w.clients {
		if !c.on {
			continue
		}
		var segs [][]byte
		for _, p := range c.parts {
			segs = append(segs, w.enc.Delta(nil, cs, p, nil))
		}
		c.ticks = append(c.ticks, gvTick{segments: segs, state: w.dump(c.vis)})
	}
}

// join starts recording c with the full state of the world, as a late
// joiner receives it. The current tick must have no pending changes.
func (w *gvWorld) join(c *gvClient) {
	ents := w.tr.AppendEntities(nil)
	var segs [][]byte
	for _, p := range c.parts {
		segs = append(segs, w.enc.Full(nil, ents, p))
	}
	c.on = true
	c.ticks = append(c.ticks, gvTick{segments: segs, state: w.dump(c.vis)})
}

func (w *gvWorld) dump(vis schema.Visibility) []gvEntity {
	out := []gvEntity{}
	for _, e := range w.tr.AppendEntities(nil) {
		out = append(out, gvDumpEntity(e, vis))
	}
	return out
}

func (w *gvWorld) spawn(c *schema.Struct) *state.Entity {
	e, err := w.tr.Spawn(c)
	if err != nil {
		w.t.Fatal(err)
	}
	return e
}

// gvField walks a dotted field path from e's class and returns the handle
// of the struct holding the last field, and that field.
func gvField(t testing.TB, e *state.Entity, path string) (state.Handle, *schema.Field) {
	t.Helper()
	h, st := e.Handle(), e.Class()
	names := strings.Split(path, ".")
	for i, name := range names {
		var f *schema.Field
		for _, g := range st.Fields {
			if g.Name == name {
				f = g
			}
		}
		if f == nil {
			t.Fatalf("%s has no field %s", st.Name, name)
		}
		if i == len(names)-1 {
			return h, f
		}
		h, st = h.Nested(f.Leaf, f.Num, f.Obj), f.Type.Struct
	}
	panic("unreachable")
}

// gvSet sets the scalar field at path to v, converting v to the field's
// kind: floats for float fields, integers for the others.
func gvSet(t testing.TB, e *state.Entity, path string, v any) {
	t.Helper()
	h, f := gvField(t, e, path)
	gvSetScalar(t, h, f.Leaf, &f.Type, v)
}

func gvSetScalar(t testing.TB, h state.Handle, leaf int, typ *schema.Type, v any) {
	t.Helper()
	switch k := typ.Kind; {
	case k == schema.String || k == schema.Bytes:
		switch v := v.(type) {
		case string:
			h.SetStr(leaf, v)
		case []byte:
			h.SetStr(leaf, string(v))
		default:
			t.Fatalf("%T for %s", v, k)
		}
	case k == schema.Float32 || k == schema.Float64:
		var f float64
		switch v := v.(type) {
		case float64:
			f = v
		case float32:
			f = float64(v)
		case int:
			f = float64(v)
		default:
			t.Fatalf("%T for %s", v, k)
		}
		if k == schema.Float32 {
			h.SetNum(leaf, uint64(math.Float32bits(float32(f))))
		} else {
			h.SetNum(leaf, math.Float64bits(f))
		}
	default:
		h.SetNum(leaf, gvInt(t, v))
	}
}

func gvInt(t testing.TB, v any) uint64 {
	switch v := v.(type) {
	case int:
		return uint64(int64(v))
	case int64:
		return uint64(v)
	case uint64:
		return v
	case uint32:
		return uint64(v)
	case bool:
		return state.BoolBits(v)
	case state.ID:
		return uint64(v)
	}
	t.Fatalf("%T is not an integer", v)
	return 0
}

func gvList(t testing.TB, e *state.Entity, path string) state.ListHandle {
	h, f := gvField(t, e, path)
	return h.List(f.Leaf)
}

func gvMap(t testing.TB, e *state.Entity, path string) state.MapHandle {
	h, f := gvField(t, e, path)
	return h.Map(f.Leaf)
}

func gvBag(t testing.TB, e *state.Entity, path string) state.BagHandle {
	h, f := gvField(t, e, path)
	return h.Bag(f.Leaf)
}

// gvValue returns a detached struct value with the given fields set.
func gvValue(t testing.TB, st *schema.Struct, fields map[string]any) state.Handle {
	t.Helper()
	h := state.NewValue(st)
	for name, v := range fields {
		f := gvFieldNamed(t, st, name)
		if f.Type.Kind == schema.List {
			l := h.List(f.Leaf)
			for _, s := range v.([]string) {
				l.Push(state.Value{S: s})
			}
			continue
		}
		gvSetScalar(t, h, f.Leaf, &f.Type, v)
	}
	return h
}

func gvFieldNamed(t testing.TB, st *schema.Struct, name string) *schema.Field {
	t.Helper()
	for _, f := range st.Fields {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("%s has no field %s", st.Name, name)
	return nil
}

// gvF64, gvNum and gvStr return container element values: a float64 in its
// plain representation, an integer, a string.
func gvF64(v float64) state.Value { return state.Value{N: math.Float64bits(v)} }
func gvNum(v int64) state.Value   { return state.Value{N: uint64(v)} }
func gvStr(s string) state.Value  { return state.Value{S: s} }

// ---- State dump ----

// dumpEntity renders e's fields that a client with visibility vis sees.
func gvDumpEntity(e *state.Entity, vis schema.Visibility) gvEntity {
	c := e.Class()
	return gvEntity{ID: uint32(e.ID()), Class: c.Name, Fields: gvDumpFields(&e.Record, c, 0, vis, true)}
}

// dumpFields renders the fields of struct st stored in r from leaf base on.
// At the top level of an entity only leaves whose effective visibility
// intersects vis appear; struct values inside containers appear whole.
func gvDumpFields(r *state.Record, st *schema.Struct, base int, vis schema.Visibility, top bool) map[string]any {
	out := make(map[string]any)
	for _, f := range st.Fields {
		if f.Deprecated {
			continue
		}
		if f.Type.Kind == schema.Nested {
			sub := gvDumpFields(r, f.Type.Struct, base+f.Leaf, vis, top)
			if len(sub) > 0 || !top || f.Vis&vis != 0 && f.Type.Struct.Leaves == 0 {
				out[f.Name] = sub
			}
			continue
		}
		l := r.Type().Leaf(base + f.Leaf)
		if top && l.Vis&vis == 0 {
			continue
		}
		out[f.Name] = gvDumpLeaf(r, l)
	}
	return out
}

func gvDumpLeaf(r *state.Record, l *schema.LeafInfo) any {
	t := &l.Field.Type
	switch k := t.Kind; {
	case k.Numeric():
		return gvDumpNum(t, r.Num(l.Num))
	case k == schema.String:
		return r.Str(l.Obj)
	case k == schema.Bytes:
		return hex.EncodeToString([]byte(r.Str(l.Obj)))
	case k == schema.List:
		list := r.List(l.Obj)
		out := make([]any, list.Len())
		for i := range out {
			out[i] = gvDumpElem(t.Elem, list.At(i))
		}
		return out
	case k == schema.Map:
		m := r.Map(l.Obj)
		out := make(map[string]any)
		for _, key := range m.Keys(nil) {
			v, _ := m.Get(key)
			out[gvDumpKey(t.Key, key)] = gvDumpElem(t.Elem, v)
		}
		return out
	case k == schema.Bag:
		b := r.Bag(l.Obj)
		out := make(map[string]any)
		for _, key := range b.Keys(nil) {
			item := b.Get(key)
			out[gvDumpKey(t.Key, state.Value{N: key})] = gvDumpFields(item, item.Type(), 0, 0, false)
		}
		return out
	}
	panic(fmt.Sprintf("kind %s", t.Kind))
}

func gvDumpElem(t *schema.Type, v state.Value) any {
	switch {
	case t.Kind.Numeric():
		return gvDumpNum(t, v.N)
	case t.Kind == schema.Nested:
		return gvDumpFields(v.R, v.R.Type(), 0, 0, false)
	case t.Kind == schema.Bytes:
		return hex.EncodeToString([]byte(v.S))
	}
	return v.S
}

func gvDumpKey(k schema.Kind, v state.Value) string {
	switch {
	case k == schema.String:
		return v.S
	case k.Signed():
		return strconv.FormatInt(int64(v.N), 10)
	}
	return strconv.FormatUint(v.N, 10)
}

// dumpNum renders a stored numeric value: 64-bit integers as decimal
// strings, other integers and refs as numbers, bools as booleans, floats
// as the shortest decimal that round-trips (through float32 for float32
// fields), quantized floats as min + code × step in binary64.
func gvDumpNum(t *schema.Type, v uint64) any {
	switch k := t.Kind; k {
	case schema.Bool:
		return v != 0
	case schema.Int8, schema.Int16, schema.Int32:
		return json.Number(strconv.FormatInt(int64(v), 10))
	case schema.Uint8, schema.Uint16, schema.Uint32, schema.Ref:
		return json.Number(strconv.FormatUint(v, 10))
	case schema.Int64:
		return strconv.FormatInt(int64(v), 10)
	case schema.Uint64:
		return strconv.FormatUint(v, 10)
	case schema.Float32, schema.Float64:
		q := t.Quant
		switch {
		case q.Bounded:
			// The conversion rounds the product, so no FMA is fused in.
			return gvDumpFloat(q.Min+float64(float64(v)*q.Step), 64)
		case q.Enabled():
			return gvDumpFloat(float64(int64(v))*q.Step, 64)
		case k == schema.Float32:
			return gvDumpFloat(float64(math.Float32frombits(uint32(v))), 32)
		}
		return gvDumpFloat(math.Float64frombits(v), 64)
	}
	panic(fmt.Sprintf("kind %s", t.Kind))
}

func gvDumpFloat(f float64, bits int) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, bits))
}

// ---- Files ----

// gvFile is the JSON form of a scenario file.
type gvFile struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	View        string `json:"view"`
	Descriptor  string `json:"descriptor"`
	Ticks       []struct {
		Segments []string        `json:"segments"`
		State    json.RawMessage `json:"state"`
	} `json:"ticks"`
}

// marshalCompact renders v as compact JSON without HTML escaping.
func gvMarshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// render writes a client's file: indented at the top, one entity a line.
func gvRender(sch *schema.Schema, c *gvClient) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"name\": %s,\n  \"description\": %s,\n  \"view\": %s,\n  \"descriptor\": %s,\n  \"ticks\": [",
		gvMarshal(c.name), gvMarshal(c.desc), gvMarshal(c.view),
		gvMarshal(hex.EncodeToString(sch.AppendDescriptor(nil))))
	for i, tk := range c.ticks {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("\n    {\n      \"segments\": [")
		for j, s := range tk.segments {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "\n        %q", hex.EncodeToString(s))
		}
		b.WriteString("\n      ],\n      \"state\": [")
		for j, e := range tk.state {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n        ")
			b.Write(gvMarshal(e))
		}
		if len(tk.state) > 0 {
			b.WriteString("\n      ")
		}
		b.WriteString("]\n    }")
	}
	b.WriteString("\n  ]\n}\n")
	return b.Bytes()
}

// normalizeJSON parses JSON with numbers kept as written, for comparing
// states regardless of layout.
func gvNormalize(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("bad JSON %s: %v", data, err)
	}
	return v
}

// applyTicks decodes the ticks' segments into a fresh table, each tick
// one transaction, and returns the dump after each tick.
func gvApplyTicks(t *testing.T, local, remote *schema.Schema, vis schema.Visibility, ticks [][][]byte) [][]gvEntity {
	t.Helper()
	dec, err := codec.NewDecoder(local, remote, codec.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tab := state.NewTable()
	var out [][]gvEntity
	for i, segs := range ticks {
		x := tab.Begin()
		for j, seg := range segs {
			if err := dec.Apply(x, seg); err != nil {
				x.Rollback()
				t.Fatalf("tick %d segment %d: %v", i, j, err)
			}
		}
		x.Commit()
		dump := []gvEntity{}
		for _, e := range tab.AppendEntities(nil) {
			dump = append(dump, gvDumpEntity(e, vis))
		}
		out = append(out, dump)
	}
	return out
}

func TestGoldenVectors(t *testing.T) {
	scenarios := []func(*testing.T) *gvWorld{
		scenarioScalars, scenarioNested, scenarioContainers, scenarioViews, scenarioLateJoin, scenarioW1,
		scenarioBands, scenarioRanked,
	}
	seen := make(map[string]bool)
	for _, scenario := range scenarios {
		w := scenario(t)
		for _, c := range w.clients {
			seen[c.file+".json"] = true
			t.Run(c.file, func(t *testing.T) {
				// The encoder's output decodes to the server's view.
				ticks := make([][][]byte, len(c.ticks))
				for i, tk := range c.ticks {
					ticks[i] = tk.segments
				}
				got := gvApplyTicks(t, w.sch, nil, c.vis, ticks)
				for i, tk := range c.ticks {
					g, want := gvNormalize(t, gvMarshal(got[i])), gvNormalize(t, gvMarshal(tk.state))
					if !reflect.DeepEqual(g, want) {
						t.Fatalf("tick %d: the client decoded\n%s\nthe server has\n%s", i, gvMarshal(got[i]), gvMarshal(tk.state))
					}
				}
				file := filepath.Join(vectorDir, c.file+".json")
				data := gvRender(w.sch, c)
				if *update {
					if err := os.MkdirAll(vectorDir, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(file, data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				committed, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v (run go test -update to create it)", err)
				}
				if !bytes.Equal(committed, data) {
					t.Errorf("%s differs from what the scenario produces now (run go test ./codec -run TestGoldenVectors -update if the change is intended)", file)
				}
				gvCheckFile(t, committed)
			})
		}
	}
	// No stale files.
	files, err := filepath.Glob(filepath.Join(vectorDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s belongs to no scenario", f)
		}
	}
}

// checkVectorFile decodes a committed file with nothing but its own
// contents: the descriptor gives the schema, a fresh decoder applies the
// segments, and the dump after each tick must equal the committed state.
func gvCheckFile(t *testing.T, data []byte) {
	t.Helper()
	var f gvFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	desc, err := hex.DecodeString(f.Descriptor)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.DecodeDescriptor(desc)
	if err != nil {
		t.Fatalf("committed descriptor: %v", err)
	}
	vis := schema.VisOthers
	if f.View == "owner" {
		vis = schema.VisOwner
	}
	ticks := make([][][]byte, len(f.Ticks))
	for i, tk := range f.Ticks {
		for _, s := range tk.Segments {
			seg, err := hex.DecodeString(s)
			if err != nil {
				t.Fatal(err)
			}
			ticks[i] = append(ticks[i], seg)
		}
	}
	got := gvApplyTicks(t, sch, nil, vis, ticks)
	for i, tk := range f.Ticks {
		if g, want := gvNormalize(t, gvMarshal(got[i])), gvNormalize(t, tk.State); !reflect.DeepEqual(g, want) {
			t.Fatalf("%s tick %d: decoding the committed segments gives\n%s\nthe file says\n%s", f.Name, i, gvMarshal(got[i]), tk.State)
		}
	}
}

// ---- Scenarios ----

// scenarioBands covers level-of-detail bands in the descriptor (§3.6),
// segments of band partitions (§5.8) and set sections (§5.6).
func scenarioBands(t *testing.T) *gvWorld {
	k := func(kind schema.Kind) schema.Type { return schema.Type{Kind: kind} }
	gear := &schema.Struct{Name: "Gear", Fields: []*schema.Field{
		{ID: 1, Name: "helm", Type: k(schema.Uint16), Vis: schema.VisAll},
		{ID: 2, Name: "boots", Type: k(schema.Uint16), Vis: schema.VisAll},
	}}
	hero := &schema.Struct{Name: "Hero", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: k(schema.Int16), Vis: schema.VisAll},
		{ID: 2, Name: "gear", Type: schema.Type{Kind: schema.Nested, Struct: gear}, Vis: schema.VisAll, LOD: 60},
		{ID: 3, Name: "emote", Type: k(schema.String), Vis: schema.VisAll, LOD: 20},
		{ID: 4, Name: "tags", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Uint8}}, Vis: schema.VisAll, LOD: 60},
	}}
	w := newGVWorld(t, hero)
	parts := []codec.Part{codec.PartAll.Band(0), codec.PartAll.Band(1), codec.PartAll.Band(2)}
	c := w.client("bands", "A class with two level-of-detail bands (gear and tags within 60, emote within 20), "+
		"each band in a segment of its own: a create then fills of the bands, updates per band, then a tick "+
		"of set sections (as after changes a bandwidth budget deferred) that set every leaf, zeros included. "+
		"The client holds every entity at the top level throughout.",
		"others", parts...)

	// Tick 1: a hero with a value in every band, and one at zero.
	a := w.spawn(hero)
	gvSet(t, a, "hp", 100)
	gvSet(t, a, "gear.helm", 7)
	gvSet(t, a, "emote", "wave")
	gvList(t, a, "tags").Push(gvNum(3))
	b := w.spawn(hero)
	w.tick()

	// Tick 2: updates in bands 0 and 2.
	gvSet(t, a, "hp", 90)
	gvSet(t, a, "emote", "")
	gvSet(t, b, "gear.boots", 2)
	w.tick()

	// Tick 3: the client missed these changes; set sections bring it up
	// to date, zero values (hp 0, helm 0, tags empty) included.
	gvSet(t, a, "hp", 0)
	gvSet(t, a, "gear.helm", 0)
	gvSet(t, a, "emote", "bow")
	gvList(t, a, "tags").Clear()
	w.tr.Commit()
	ents := []*state.Entity{a, b}
	var segs [][]byte
	for _, p := range parts {
		segs = append(segs, w.enc.Set(nil, ents, p))
	}
	c.ticks = append(c.ticks, gvTick{segments: segs, state: w.dump(c.vis)})
	return w
}

func scenarioScalars(t *testing.T) *gvWorld {
	bounded, err := schema.NewQuant(0.01, -10, 10, 0, true, true)
	if err != nil {
		t.Fatal(err)
	}
	angle, err := schema.NewQuant(0, 0, 2*math.Pi, 12, true, true)
	if err != nil {
		t.Fatal(err)
	}
	f := func(id uint32, name string, typ schema.Type) *schema.Field {
		return &schema.Field{ID: id, Name: name, Type: typ, Vis: schema.VisAll}
	}
	k := func(kind schema.Kind) schema.Type { return schema.Type{Kind: kind} }
	scalars := &schema.Struct{Name: "Scalars", Class: true, ID: 1, Fields: []*schema.Field{
		f(1, "b", k(schema.Bool)),
		f(2, "i8", k(schema.Int8)),
		f(3, "i16", k(schema.Int16)),
		f(4, "i32", k(schema.Int32)),
		f(5, "i64", k(schema.Int64)),
		f(6, "u8", k(schema.Uint8)),
		f(7, "u16", k(schema.Uint16)),
		f(8, "u32", k(schema.Uint32)),
		f(9, "u64", k(schema.Uint64)),
		f(10, "f32", k(schema.Float32)),
		f(11, "f64", k(schema.Float64)),
		f(12, "qf32", schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 1.0 / 64}}),
		f(13, "qf64", schema.Type{Kind: schema.Float64, Quant: bounded}),
		f(14, "angle", schema.Type{Kind: schema.Float32, Quant: angle}),
		f(15, "s", k(schema.String)),
		f(16, "bin", k(schema.Bytes)),
		f(17, "target", k(schema.Ref)),
		{ID: 18, Name: "secret", Type: k(schema.Uint32), Vis: schema.VisServer},
		{ID: 19, Name: "old", Type: k(schema.Int32), Vis: schema.VisAll, Deprecated: true},
		f(20, "qf64u", schema.Type{Kind: schema.Float64, Quant: schema.Quant{Step: 0.5}}),
	}}
	marker := &schema.Struct{Name: "Marker", Class: true, ID: 2, Fields: []*schema.Field{
		f(1, "label", k(schema.String)),
	}}
	w := newGVWorld(t, scalars, marker)
	w.client("scalars", "Every numeric kind (including quantized bounded and unbounded floats), "+
		"strings, bytes and refs over 3 ticks: creates with boundary values, delta updates "+
		"(including wrap-around and clamping), a destroy. A server-only and a deprecated field are never sent.",
		"others", codec.PartAll)

	// Tick 1: three entities, one left at zero.
	a := w.spawn(scalars)
	for path, v := range map[string]any{
		"b": true, "i8": -128, "i16": 32767, "i32": math.MinInt32, "i64": int64(math.MinInt64),
		"u8": 255, "u16": 65535, "u32": uint64(math.MaxUint32), "u64": uint64(math.MaxUint64),
		"f32": float32(3.4028235e38), "f64": 1e300, "qf32": -12.34, "qf64": 3.14159, "angle": math.Pi,
		"s": "héllo ✓ <&>", "bin": []byte{0, 1, 0xfe, 0xff}, "secret": 1234, "qf64u": 1e6,
	} {
		gvSet(t, a, path, v)
	}
	b := w.spawn(scalars)
	for path, v := range map[string]any{
		"i8": 1, "i16": -2, "i32": 3, "i64": int64(1) << 53, "u8": 1, "u16": 2, "u32": 3, "u64": uint64(1) << 63,
		"f32": float32(0.1), "f64": -0.1, "qf32": 0.0078125, "qf64": -20.0, "angle": 7.0, "s": "", "qf64u": -0.75,
	} {
		gvSet(t, b, path, v)
	}
	c := w.spawn(scalars) // all zero
	gvSet(t, a, "target", b.ID())
	gvSet(t, b, "target", c.ID())
	w.tick()

	// Tick 2: deltas of every kind, including wrap-around, a marker.
	for path, v := range map[string]any{
		"b": false, "i8": 127, "i16": -32768, "i32": math.MaxInt32, "i64": int64(math.MaxInt64),
		"u8": 0, "u16": 1, "u32": 0, "u64": uint64(0),
		"f32": float32(-1.5), "f64": 2.5e-308, "qf32": 1e9, "qf64": 1000.0, "angle": 0.001,
		"s": "changed", "bin": []byte{}, "target": 0, "secret": 99, "qf64u": 2.25,
	} {
		gvSet(t, a, path, v)
	}
	gvSet(t, b, "i32", 4)
	gvSet(t, b, "u64", uint64(1)<<63+1)
	gvSet(t, b, "f32", float32(1)/3)
	gvSet(t, c, "s", "now set")
	m := w.spawn(marker)
	gvSet(t, m, "label", "marker")
	w.tick()

	// Tick 3: destroy b, update c, create another.
	w.tr.Destroy(b)
	gvSet(t, c, "i16", 5)
	gvSet(t, c, "target", m.ID())
	d := w.spawn(scalars)
	gvSet(t, d, "f64", math.Copysign(0, -1))
	gvSet(t, d, "f32", float32(1e-45)) // the smallest subnormal
	gvSet(t, d, "u16", 7)
	w.tick()
	return w
}

func scenarioNested(t *testing.T) *gvWorld {
	fuel := &schema.Struct{Name: "Fuel", Fields: []*schema.Field{
		{ID: 1, Name: "level", Type: schema.Type{Kind: schema.Uint8}, Vis: schema.VisAll},
		{ID: 2, Name: "kind", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
	}}
	engine := &schema.Struct{Name: "Engine", Fields: []*schema.Field{
		{ID: 1, Name: "power", Type: schema.Type{Kind: schema.Float32}, Vis: schema.VisAll},
		{ID: 2, Name: "fuel", Type: schema.Type{Kind: schema.Nested, Struct: fuel}, Vis: schema.VisAll},
		{ID: 3, Name: "rpm", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll},
	}}
	hull := &schema.Struct{Name: "Hull", Fields: []*schema.Field{
		{ID: 1, Name: "armor", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 2, Name: "engine", Type: schema.Type{Kind: schema.Nested, Struct: engine}, Vis: schema.VisAll},
	}}
	ship := &schema.Struct{Name: "Ship", Class: true, ID: 5, Fields: []*schema.Field{
		{ID: 1, Name: "name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		{ID: 2, Name: "hull", Type: schema.Type{Kind: schema.Nested, Struct: hull}, Vis: schema.VisAll},
		{ID: 3, Name: "spare", Type: schema.Type{Kind: schema.Nested, Struct: engine}, Vis: schema.VisAll},
		{ID: 4, Name: "speed", Type: schema.Type{Kind: schema.Float64}, Vis: schema.VisAll},
	}}
	w := newGVWorld(t, ship)
	w.client("nested", "Nested structs three deep (Ship.hull.engine.fuel) and a second use of one "+
		"struct type (Ship.spare), created whole and then updated one leaf or a few at a time.",
		"others", codec.PartAll)
	s1 := w.spawn(ship)
	gvSet(t, s1, "name", "Argo")
	gvSet(t, s1, "hull.armor", 500)
	gvSet(t, s1, "hull.engine.power", float32(1250.5))
	gvSet(t, s1, "hull.engine.fuel.level", 200)
	gvSet(t, s1, "hull.engine.fuel.kind", "diesel")
	gvSet(t, s1, "spare.fuel.kind", "spare")
	s2 := w.spawn(ship)
	gvSet(t, s2, "hull.engine.rpm", 900)
	w.tick()
	// Only the deepest leaf of one ship.
	gvSet(t, s1, "hull.engine.fuel.level", 199)
	w.tick()
	// Leaves at different depths, on both ships.
	gvSet(t, s1, "hull.armor", 480)
	gvSet(t, s1, "hull.engine.power", float32(1100))
	gvSet(t, s2, "spare.rpm", -1)
	gvSet(t, s2, "spare.fuel.level", 1)
	gvSet(t, s2, "speed", 12.75)
	w.tick()
	// Everything under hull at once, and a name.
	gvSet(t, s2, "name", "Bounty")
	gvSet(t, s2, "hull.armor", 1)
	gvSet(t, s2, "hull.engine.power", float32(2))
	gvSet(t, s2, "hull.engine.rpm", 3)
	gvSet(t, s2, "hull.engine.fuel.level", 4)
	gvSet(t, s2, "hull.engine.fuel.kind", "steam")
	w.tick()
	return w
}

// containerClasses returns the Holder class of the containers scenarios.
func gvContainerClasses() (*schema.Struct, *schema.Struct) {
	vec := &schema.Struct{Name: "Vec", Fields: []*schema.Field{
		{ID: 1, Name: "x", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 2, Name: "y", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
	}}
	item := &schema.Struct{Name: "Item", Fields: []*schema.Field{
		{ID: 1, Name: "count", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll},
		{ID: 2, Name: "name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		{ID: 3, Name: "tags", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}, Vis: schema.VisAll},
		{ID: 4, Name: "weight", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 0.125}}, Vis: schema.VisAll},
	}}
	holder := &schema.Struct{Name: "Holder", Class: true, ID: 3, Fields: []*schema.Field{
		{ID: 1, Name: "nums", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Int32}}, Vis: schema.VisAll},
		{ID: 2, Name: "names", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}, Vis: schema.VisAll},
		{ID: 3, Name: "path", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Nested, Struct: vec}}, Vis: schema.VisAll},
		{ID: 4, Name: "stats", Type: schema.Type{Kind: schema.Map, Key: schema.String, Elem: &schema.Type{Kind: schema.Float64}}, Vis: schema.VisAll},
		{ID: 5, Name: "counts", Type: schema.Type{Kind: schema.Map, Key: schema.Int16, Elem: &schema.Type{Kind: schema.Uint32}}, Vis: schema.VisAll},
		{ID: 6, Name: "inv", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint32, Struct: item}, Vis: schema.VisAll},
		{ID: 7, Name: "flags", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.Bool}}, Vis: schema.VisAll},
		{ID: 8, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
	}}
	return holder, item
}

func gvVec(t testing.TB, holder *schema.Struct, x, y int) state.Value {
	return gvValue(t, gvFieldNamed(t, holder, "path").Type.Elem.Struct, map[string]any{"x": x, "y": y}).Value()
}

func scenarioContainers(t *testing.T) *gvWorld {
	holder, item := gvContainerClasses()
	w := newGVWorld(t, holder)
	w.client("containers", "Lists (int32, string, struct and bool elements), maps with string and int16 "+
		"keys, a bag of struct items. Tick 1 creates them whole; tick 2 sends list push, insert, remove, "+
		"set and clear, map put and delete, bag add, remove and item-field updates as operations; tick 3 "+
		"changes enough that whole containers are sent instead (the fallback); tick 4 mixes both; "+
		"tick 6 patches one field of a struct element of a list.",
		"others", codec.PartAll)
	e := w.spawn(holder)
	nums := gvList(t, e, "nums")
	for _, v := range []int64{10, 20, 30, 40, 50, 60, 70, 80} {
		nums.Push(gvNum(v))
	}
	names := gvList(t, e, "names")
	for _, s := range []string{"ann", "bob", "cy", "dee"} {
		names.Push(gvStr(s))
	}
	path := gvList(t, e, "path")
	path.Push(gvVec(t, holder, 1, 2))
	path.Push(gvVec(t, holder, -3, 4))
	stats := gvMap(t, e, "stats")
	for i, k := range []string{"str", "dex", "int", "wis", "cha", "con"} {
		stats.Put(gvStr(k), gvF64(float64(i)+0.5))
	}
	counts := gvMap(t, e, "counts")
	for _, k := range []int64{-5, 0, 7, 300, -32768} {
		counts.Put(counts.Key(uint64(k)), gvNum(k*k))
	}
	inv := gvBag(t, e, "inv")
	for k := uint64(1); k <= 6; k++ {
		inv.Add(k*10, gvValue(t, item, map[string]any{"count": int(k), "name": fmt.Sprintf("item%d", k), "weight": float64(k) / 4}))
	}
	inv.Get(10).List(gvFieldNamed(t, item, "tags").Leaf).Push(gvStr("new"))
	flags := gvList(t, e, "flags")
	flags.Push(gvNum(1))
	flags.Push(gvNum(0))
	empty := w.spawn(holder) // every container empty
	gvSet(t, empty, "hp", 1)
	w.tick()

	// Tick 2: operations.
	nums.Push(gvNum(90))
	nums.Insert(0, gvNum(5))
	nums.Remove(3)
	nums.Set(1, gvNum(-1))
	names.Remove(0)
	names.Set(0, gvStr("BOB"))
	names.Insert(2, gvStr("cat"))
	path.Set(1, gvVec(t, holder, 30, 40))
	stats.Put(gvStr("str"), gvF64(99))
	stats.Delete(gvStr("dex"))
	stats.Put(gvStr("luck"), gvF64(-1))
	counts.Put(counts.Key(7), gvNum(8))
	counts.Delete(counts.Key(uint64(0)))
	counts.Put(counts.Key(uint64(1<<16-2)), gvNum(1)) // int16 −2
	inv.Remove(20)
	inv.Add(70, gvValue(t, item, map[string]any{"count": 7, "name": "seven", "tags": []string{"a", "b"}}))
	inv.Get(30).SetNum(gvFieldNamed(t, item, "count").Leaf, 33)
	inv.Get(40).SetStr(gvFieldNamed(t, item, "name").Leaf, "renamed")
	inv.Get(40).SetNum(gvFieldNamed(t, item, "weight").Leaf, uint64(math.Float32bits(9.875)))
	inv.Get(10).List(gvFieldNamed(t, item, "tags").Leaf).Push(gvStr("newer"))
	flags.Clear()
	flags.Push(gvNum(1))
	w.tick()

	// Tick 3: the whole-container fallback. Many operations on a short
	// list (more than its length + 8) and most keys of a map changed.
	for i := range 14 {
		names.Set(0, gvStr(fmt.Sprintf("n%d", i)))
	}
	path.Clear()
	path.Push(gvVec(t, holder, 7, 7))
	for i, k := range []string{"str", "int", "wis", "cha", "con", "luck"} {
		stats.Put(gvStr(k), gvF64(float64(-i)))
	}
	for _, k := range []uint64{30, 40, 50, 60} {
		inv.Remove(k)
	}
	w.tick()

	// Tick 4: a list emptied by removes and an item updated on the
	// empty entity.
	for names.Len() > 0 {
		names.Remove(names.Len() - 1)
	}
	nums.Set(0, gvNum(math.MaxInt32))
	nums.Set(1, gvNum(math.MinInt32))
	gvBag(t, empty, "inv").Add(1, gvValue(t, item, map[string]any{"name": "first"}))
	gvSet(t, empty, "hp", 2)
	w.tick()

	// Tick 5: a struct element of a list with one field changed travels
	// as a patch (list operation 5) of that field.
	path.Push(gvVec(t, holder, 8, -8))
	w.tick()
	path.Set(1, gvVec(t, holder, 9, -8))
	w.tick()
	return w
}

func scenarioViews(t *testing.T) *gvWorld {
	pos := &schema.Struct{Name: "Pos", Fields: []*schema.Field{
		{ID: 1, Name: "x", Type: schema.Type{Kind: schema.Float32}, Vis: schema.VisAll},
		{ID: 2, Name: "y", Type: schema.Type{Kind: schema.Float32}, Vis: schema.VisAll},
		{ID: 3, Name: "aim", Type: schema.Type{Kind: schema.Float32}, Vis: schema.VisOwner},
	}}
	item := &schema.Struct{Name: "Loot", Fields: []*schema.Field{
		{ID: 1, Name: "n", Type: schema.Type{Kind: schema.Uint16}, Vis: schema.VisAll},
	}}
	hero := &schema.Struct{Name: "Hero", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		{ID: 2, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 3, Name: "gold", Type: schema.Type{Kind: schema.Uint32}, Vis: schema.VisOwner},
		{ID: 4, Name: "mood", Type: schema.Type{Kind: schema.Int8}, Vis: schema.VisOthers},
		{ID: 5, Name: "password", Type: schema.Type{Kind: schema.String}, Vis: schema.VisServer},
		{ID: 6, Name: "pos", Type: schema.Type{Kind: schema.Nested, Struct: pos}, Vis: schema.VisAll},
		{ID: 7, Name: "bag", Type: schema.Type{Kind: schema.Bag, Key: schema.Uint8, Struct: item}, Vis: schema.VisOwner},
		{ID: 8, Name: "emotes", Type: schema.Type{Kind: schema.List, Elem: &schema.Type{Kind: schema.String}}, Vis: schema.VisOthers},
		{ID: 9, Name: "secretPos", Type: schema.Type{Kind: schema.Nested, Struct: pos}, Vis: schema.VisServer},
	}}
	w := newGVWorld(t, hero)
	desc := "One class with fields of every visibility (all, owner, others, server; a nested struct " +
		"mixing all and owner leaves). The same server ticks as seen by "
	w.client("views-others", desc+"a client that does not own the entities: segments PartAll then PartOthers.",
		"others", codec.PartAll, codec.PartOthers)
	w.client("views-owner", desc+"the owning client: segments PartAll then PartOwner.",
		"owner", codec.PartAll, codec.PartOwner)
	h1 := w.spawn(hero)
	for path, v := range map[string]any{
		"name": "alice", "hp": 100, "gold": 5000, "mood": -3, "password": "hunter2",
		"pos.x": float32(1.5), "pos.y": float32(-2), "pos.aim": float32(0.25), "secretPos.x": float32(9),
	} {
		gvSet(t, h1, path, v)
	}
	gvBag(t, h1, "bag").Add(1, gvValue(t, item, map[string]any{"n": 3}))
	gvList(t, h1, "emotes").Push(gvStr("wave"))
	h2 := w.spawn(hero)
	gvSet(t, h2, "gold", 1) // only an owner field: others see an entity with nothing set
	w.tick()
	// Each visibility alone, then all of them.
	gvSet(t, h1, "gold", 4999)
	gvSet(t, h2, "mood", 9)
	w.tick()
	gvSet(t, h1, "pos.aim", float32(0.5))
	gvSet(t, h1, "password", "hunter3")
	gvSet(t, h2, "hp", 50)
	gvBag(t, h1, "bag").Get(1).SetNum(0, 4)
	gvList(t, h1, "emotes").Push(gvStr("bow"))
	w.tick()
	gvSet(t, h1, "pos.x", float32(2))
	gvSet(t, h1, "pos.aim", float32(0.75))
	gvSet(t, h1, "mood", 0)
	gvSet(t, h1, "gold", 0)
	w.tr.Destroy(h2)
	w.tick()
	return w
}

func scenarioLateJoin(t *testing.T) *gvWorld {
	holder, item := gvContainerClasses()
	mob := &schema.Struct{Name: "Mob", Class: true, ID: 4, Fields: []*schema.Field{
		{ID: 1, Name: "kind", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
		{ID: 2, Name: "hp", Type: schema.Type{Kind: schema.Int32}, Vis: schema.VisAll},
		{ID: 3, Name: "x", Type: schema.Type{Kind: schema.Float32, Quant: schema.Quant{Step: 1.0 / 16}}, Vis: schema.VisAll},
		{ID: 4, Name: "loot", Type: schema.Type{Kind: schema.Uint64}, Vis: schema.VisOwner},
		{ID: 5, Name: "threat", Type: schema.Type{Kind: schema.Uint8}, Vis: schema.VisOthers},
		{ID: 6, Name: "target", Type: schema.Type{Kind: schema.Ref}, Vis: schema.VisAll},
	}}
	w := newGVWorld(t, holder, mob)
	late := w.client("late-join", "A client that joins a populated world after several ticks: its "+
		"first tick is the full state (Encoder.Full, PartAll then PartOthers) of every live entity, "+
		"including entities whose fields are all zero and containers of every kind; its second tick "+
		"is an ordinary delta.", "others", codec.PartAll, codec.PartOthers)
	late.on = false
	var mobs []*state.Entity
	for i := range 5 {
		m := w.spawn(mob)
		gvSet(t, m, "kind", []string{"orc", "elf", "imp", "ent", "rat"}[i])
		gvSet(t, m, "hp", 10*(i+1))
		gvSet(t, m, "x", float64(i)*1.25)
		gvSet(t, m, "loot", uint64(i)<<40)
		gvSet(t, m, "threat", i)
		mobs = append(mobs, m)
	}
	w.spawn(mob) // stays all zero
	hold := w.spawn(holder)
	w.tick()
	for i, m := range mobs {
		gvSet(t, m, "hp", 5*i)
		gvSet(t, m, "target", mobs[(i+1)%len(mobs)].ID())
	}
	gvList(t, hold, "nums").Push(gvNum(1))
	gvList(t, hold, "nums").Push(gvNum(-2))
	gvList(t, hold, "names").Push(gvStr("x"))
	gvMap(t, hold, "stats").Put(gvStr("a"), gvF64(0.5))
	gvMap(t, hold, "counts").Put(gvNum(3), gvNum(4))
	gvBag(t, hold, "inv").Add(9, gvValue(t, item, map[string]any{"count": 2, "tags": []string{"t"}}))
	gvList(t, hold, "path").Push(gvVec(t, holder, 5, 6))
	w.tick()
	w.tr.Destroy(mobs[2])
	gvSet(t, mobs[0], "x", -3.0)
	w.tick()
	w.join(late)
	gvSet(t, mobs[1], "hp", 1)
	gvSet(t, mobs[1], "threat", 200)
	gvBag(t, hold, "inv").Get(9).SetNum(gvFieldNamed(t, item, "count").Leaf, 3)
	m := w.spawn(mob)
	gvSet(t, m, "kind", "newcomer")
	w.tick()
	return w
}

func scenarioW1(t *testing.T) *gvWorld {
	cfg := w1.DefaultConfig()
	cfg.N = 100
	world := w1.New(cfg)
	w := &gvWorld{t: t, sch: arena.Schema(), tr: state.NewTracker(arena.Schema())}
	w.client("w1-quantized-3ticks", "Workload W1 (internal/workload/w1, default configuration but N = 100) "+
		"with the generated quantized arena class Qunit: x and y at 1/64 unit in 0..1000, angle in 12 bits. "+
		"Tick 1 creates the entities; ticks 2 and 3 are two W1 steps (10% move, 1% change hp).",
		"others", codec.PartAll)
	units := make([]arena.Qunit, cfg.N)
	for id := range units {
		u, err := arena.SpawnQunit(w.tr)
		if err != nil {
			t.Fatal(err)
		}
		u.SetX(world.X[id])
		u.SetY(world.Y[id])
		u.SetAngle(world.Angle[id])
		u.SetHp(world.HP[id])
		u.SetName(world.Name[id])
		units[id] = u
	}
	w.tick()
	for range 2 {
		moved, hp := world.Step()
		for _, id := range moved {
			units[id].SetX(world.X[id])
			units[id].SetY(world.Y[id])
			units[id].SetAngle(world.Angle[id])
		}
		for _, id := range hp {
			units[id].SetHp(world.HP[id])
		}
		w.tick()
	}
	return w
}

// scenarioRanked covers ranked update sections (§5.4): a client that sees
// a few of the server's entities, its segments assembled for it alone
// (codec.Assembler with a codec.Held), so that its updates name entities
// by rank among those it held when the tick began.
func scenarioRanked(t *testing.T) *gvWorld {
	unit := &schema.Struct{Name: "Unit", Class: true, ID: 1, Fields: []*schema.Field{
		{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll},
		{ID: 2, Name: "name", Type: schema.Type{Kind: schema.String}, Vis: schema.VisAll},
	}}
	flag := &schema.Struct{Name: "Flag", Class: true, ID: 2, Fields: []*schema.Field{
		{ID: 1, Name: "team", Type: schema.Type{Kind: schema.Uint8}, Vis: schema.VisAll},
	}}
	w := newGVWorld(t, unit, flag)
	c := w.client("ranked", "A client that sees a few of the server's entities (of two classes), its segments "+
		"assembled for it alone: update sections are ranked, naming each entity by its rank among the "+
		"entities the client held when the tick began. Ticks mix ranked updates with creates of entities "+
		"that enter its view (at slots below those updated) and destroys of entities that leave it (ranked "+
		"before those updated), in one segment and, in the last tick, over several segments.",
		"others", codec.PartAll)
	c.on = false
	var (
		delta, full codec.Batch
		asm         codec.Assembler
		held        codec.Held
	)
	held.Reset(nil, 0)
	view := map[state.ID]bool{}
	// tick commits the tick and records the client's segments, given
	// which entities it sees from now on; maxEntities splits them.
	tick := func(next []*state.Entity, maxEntities int) {
		cs := w.tr.Commit()
		ents := w.tr.AppendEntities(nil)
		w.enc.DeltaBatch(&delta, cs, codec.PartAll)
		w.enc.FullBatch(&full, ents, codec.PartAll)
		in := map[state.ID]bool{}
		for _, e := range next {
			in[e.ID()] = true
		}
		asm.Held = &held
		created := map[state.ID]bool{}
		for i, ch := range cs.Changes {
			id := ch.Entity.ID()
			created[id] = ch.Created
			if ch.Destroyed && view[id] || ch.Created && in[id] || !ch.Created && !ch.Destroyed && view[id] && in[id] {
				asm.Add(&delta, delta.Piece(i))
			}
		}
		var state []gvEntity
		for i, e := range ents {
			if in[e.ID()] && !view[e.ID()] && !created[e.ID()] {
				asm.Add(&full, full.Piece(i))
			}
			if view[e.ID()] && !in[e.ID()] {
				asm.Destroy(e.ID())
			}
			if in[e.ID()] {
				state = append(state, gvDumpEntity(e, c.vis))
			}
		}
		segs := asm.Segments(nil, maxEntities, 0, 0)
		asm.Held = nil
		held.Commit()
		view = in
		if state == nil {
			state = []gvEntity{}
		}
		c.ticks = append(c.ticks, gvTick{segments: segs, state: state})
	}

	// Tick 1: twelve units and three flags; the client sees five units
	// and a flag.
	var units, flags []*state.Entity
	for i := range 12 {
		u := w.spawn(unit)
		gvSet(t, u, "hp", 100+i)
		gvSet(t, u, "name", fmt.Sprintf("u%d", i))
		units = append(units, u)
	}
	for i := range 3 {
		f := w.spawn(flag)
		gvSet(t, f, "team", i+1)
		flags = append(flags, f)
	}
	tick([]*state.Entity{units[1], units[4], units[5], units[9], units[11], flags[1]}, 0)

	// Tick 2: every entity changes; the client gets its six, ranked.
	for i, u := range units {
		gvSet(t, u, "hp", 90-i)
	}
	for _, f := range flags {
		gvSet(t, f, "team", 7)
	}
	tick([]*state.Entity{units[1], units[4], units[5], units[9], units[11], flags[1]}, 0)

	// Tick 3: units[4] is destroyed and units[7] enters the view (its
	// slot below units[9]'s), a new unit is created in view; the others
	// change: their ranks are still among the six held before.
	w.tr.Destroy(units[4])
	nu := w.spawn(unit)
	gvSet(t, nu, "name", "new")
	for _, u := range []*state.Entity{units[5], units[7], units[9], units[11]} {
		gvSet(t, u, "hp", 1)
	}
	gvSet(t, flags[1], "team", 2)
	tick([]*state.Entity{units[1], units[5], units[7], units[9], units[11], flags[1], nu}, 0)

	// Tick 4: units[1] and units[9] leave the view, units[0] enters;
	// changes of everything else, in segments of at most two entities.
	for _, u := range []*state.Entity{units[0], units[1], units[5], units[7], units[11], nu} {
		gvSet(t, u, "hp", -5)
	}
	gvSet(t, flags[1], "team", 3)
	tick([]*state.Entity{units[0], units[5], units[7], units[11], flags[1], nu}, 2)
	return w
}

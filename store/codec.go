package store

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// wQuant is the wire kind of a quantized float in a document: its integer
// code, after the quantization it was taken with. The other wire kinds
// are the schema kinds.
const wQuant = 32

// maxDepth bounds the nesting of values a decoder follows.
const maxDepth = 100

// A Codec encodes the persist fields of the entities of one schema into
// document data and decodes them back. It is safe for concurrent use,
// except that each AppendEntity call must not overlap with another on the
// same Codec (see [Encoder] for a per-goroutine encoder).
//
// Which fields persist: a field of an entity class declared life=persist
// is stored with its whole value (nested structs, containers and their
// items included). Only class fields have lifetimes (schema.New refuses
// one anywhere else). Deprecated fields are never stored.
type Codec struct {
	schema  *schema.Schema
	desc    []byte
	hash    SchemaHash
	classes map[uint32]*plan
	whole   map[*schema.Struct]*plan
	enc     Encoder
	lives   uint8 // bit set of the class fields' lifetimes stored
}

// A plan lists the stored fields of a struct, in ID order.
type plan struct {
	fields []fieldPlan
	index  map[uint32]int32 // field ID → index in fields
	leaves []uint64         // class plans: bit set of the stored leaves
}

type fieldPlan struct {
	f    *schema.Field
	wk   byte  // wire kind of the value (or of container elements)
	cont int   // Nested: its first container slot, relative to the enclosing struct
	sub  *plan // Nested: its plan; a container of structs: the element's plan
}

// NewCodec returns a codec for the classes of s.
func NewCodec(s *schema.Schema) *Codec { return NewCodecLives(s, schema.LifePersist) }

// NewCodecLives returns a codec for the classes of s that stores the class
// fields of the given lifetimes, with their whole values, rather than the
// persist fields: an entity's state exported for a migration to another
// server takes its scene, session and persist fields and leaves its
// process fields behind. Documents are in the same format.
func NewCodecLives(s *schema.Schema, lives ...schema.Lifetime) *Codec {
	c := &Codec{schema: s, classes: make(map[uint32]*plan), whole: make(map[*schema.Struct]*plan)}
	for _, l := range lives {
		c.lives |= 1 << l
	}
	c.desc = s.AppendDescriptor(nil)
	c.hash = HashDescriptor(c.desc)
	for _, cl := range s.Classes {
		p := &plan{}
		c.fill(p, cl, false)
		p.leaves = make([]uint64, (cl.Leaves+63)/64)
		p.markLeaves()
		c.classes[cl.ID] = p
	}
	c.enc.c = c
	return c
}

func (c *Codec) wholePlan(st *schema.Struct) *plan {
	if p := c.whole[st]; p != nil {
		return p
	}
	p := &plan{}
	c.whole[st] = p
	c.fill(p, st, true)
	return p
}

// fill lists in p the stored fields of st: all of them when whole, else
// (for a class) those of the codec's lifetimes.
func (c *Codec) fill(p *plan, st *schema.Struct, whole bool) {
	cont := 0
	for _, f := range st.Fields {
		if f.Deprecated {
			continue
		}
		fp := fieldPlan{f: f, wk: wireKind(&f.Type)}
		take := whole || c.lives&(1<<f.Life) != 0
		switch k := f.Type.Kind; {
		case k == schema.Nested:
			fp.cont = cont
			cont += f.Type.Struct.ContSlots
			if take {
				fp.sub = c.wholePlan(f.Type.Struct)
			}
		case k.Container():
			cont++
			if !take {
				break
			}
			if k == schema.Bag {
				fp.sub = c.wholePlan(f.Type.Struct)
			} else if f.Type.Elem.Kind == schema.Nested {
				fp.sub = c.wholePlan(f.Type.Elem.Struct)
			}
		}
		if take {
			p.fields = append(p.fields, fp)
		}
	}
	p.index = make(map[uint32]int32, len(p.fields))
	for i := range p.fields {
		p.index[p.fields[i].f.ID] = int32(i)
	}
}

// markLeaves sets in p.leaves the leaves its fields store, for a class
// plan: each stored field's, all of a nested struct's.
func (p *plan) markLeaves() {
	for i := range p.fields {
		f := p.fields[i].f
		n := 1
		if f.Type.Kind == schema.Nested {
			n = f.Type.Struct.Leaves
		}
		for l := f.Leaf; l < f.Leaf+n; l++ {
			p.leaves[l>>6] |= 1 << (l & 63)
		}
	}
}

// wireKind returns the wire kind of a value of type t.
func wireKind(t *schema.Type) byte {
	if (t.Kind == schema.Float32 || t.Kind == schema.Float64) && t.Quant.Enabled() {
		return wQuant
	}
	return byte(t.Kind)
}

// elemKind returns the wire kind of the elements of a list or map type.
func elemKind(t *schema.Type) byte { return wireKind(t.Elem) }

// Schema returns the codec's schema.
func (c *Codec) Schema() *schema.Schema { return c.schema }

// Hash returns the hash of the codec's schema, which its documents carry.
func (c *Codec) Hash() SchemaHash { return c.hash }

// SchemaRecord returns the codec's schema descriptor and hash, to store
// with the documents (a Writer does so on its first flush).
func (c *Codec) SchemaRecord() SchemaRecord { return SchemaRecord{Hash: c.hash, Descriptor: c.desc} }

// Persists reports whether entities of class have any stored field.
func (c *Codec) Persists(class *schema.Struct) bool {
	p := c.classes[class.ID]
	return p != nil && len(p.fields) > 0
}

// Changed reports whether ch, an entity's change in a tick, touches its
// stored state: the entity was created, or one of its stored leaves
// changed. The changes of a destroyed entity report false: whether its
// document is kept or deleted is the game's call.
func (c *Codec) Changed(ch *state.Change) bool {
	if ch.Destroyed {
		return false
	}
	p := c.classes[ch.Entity.Class().ID]
	if p == nil || len(p.fields) == 0 {
		return false
	}
	if ch.Created {
		return true
	}
	for i, w := range ch.DirtySet() {
		if w&p.leaves[i] != 0 {
			return true
		}
	}
	return false
}

// AppendEntity appends the document data of e's stored fields to dst.
// Calls must not overlap; use an [Encoder] per goroutine otherwise.
func (c *Codec) AppendEntity(dst []byte, e *state.Entity) []byte {
	return c.enc.AppendEntity(dst, e)
}

// Document returns the document of e under key at tick.
func (c *Codec) Document(key string, tick uint64, e *state.Entity) Document {
	var enc Encoder
	enc.c = c
	return Document{Key: key, Class: e.Class().ID, Tick: tick, Schema: c.hash, Data: enc.AppendEntity(nil, e)}
}

// NewEncoder returns an encoder for c.
func (c *Codec) NewEncoder() *Encoder { return &Encoder{c: c} }

// An Encoder encodes documents of a Codec, reusing its scratch buffers:
// one per goroutine. The zero Encoder is not usable; see Codec.NewEncoder.
type Encoder struct {
	c    *Codec
	mkey []state.Value // map keys, a stack of buffers for nested maps
}

// AppendEntity appends the document data of e's stored fields to dst.
func (x *Encoder) AppendEntity(dst []byte, e *state.Entity) []byte {
	return x.AppendRecord(dst, &e.Record)
}

// AppendRecord appends the document data of the stored fields of r, a
// record of an entity class of the codec's schema, to dst. It panics if
// the class is not in the schema.
func (x *Encoder) AppendRecord(dst []byte, r *state.Record) []byte {
	p := x.c.classes[r.Type().ID]
	if p == nil || !r.Type().Class || x.c.schema.Class(r.Type().ID) != r.Type() {
		panic(fmt.Sprintf("store: class %s is not in the codec's schema", r.Type().Name))
	}
	return x.appendStruct(dst, r, p, 0, 0, 0)
}

func (x *Encoder) appendStruct(b []byte, r *state.Record, p *plan, num, str, cont int) []byte {
	b = binary.AppendUvarint(b, uint64(len(p.fields)))
	for i := range p.fields {
		b = x.appendField(b, r, &p.fields[i], num, str, cont)
	}
	return b
}

// appendField appends one field of a struct whose slots start at num,
// str and cont: its ID, wire kind and value.
func (x *Encoder) appendField(b []byte, r *state.Record, fp *fieldPlan, num, str, cont int) []byte {
	f := fp.f
	b = binary.AppendUvarint(b, uint64(f.ID))
	b = append(b, fp.wk)
	switch k := f.Type.Kind; {
	case k.Numeric():
		if fp.wk == wQuant {
			b = appendQuant(b, f.Type.Quant)
		}
		b = appendScalar(b, fp.wk, r.Num(num+f.Num))
	case k == schema.String || k == schema.Bytes:
		b = appendString(b, r.Str(str+f.Obj))
	case k == schema.Nested:
		b = x.appendStruct(b, r, fp.sub, num+f.Num, str+f.Obj, cont+fp.cont)
	case k == schema.List:
		b = x.appendList(b, r.List(cont+f.Obj), &f.Type, fp.sub)
	case k == schema.Map:
		b = x.appendMap(b, r.Map(cont+f.Obj), &f.Type, fp.sub)
	case k == schema.Bag:
		b = x.appendBag(b, r.Bag(cont+f.Obj), &f.Type, fp.sub)
	}
	return b
}

// Container headers: a list has its element kind (and quantization), a
// map its key kind, element kind (and quantization), a bag its key kind;
// then the number of elements.

func (x *Encoder) appendList(b []byte, l *state.List, t *schema.Type, sub *plan) []byte {
	ek := elemKind(t)
	b = append(b, ek)
	if ek == wQuant {
		b = appendQuant(b, t.Elem.Quant)
	}
	n := l.Len()
	b = binary.AppendUvarint(b, uint64(n))
	for i := 0; i < n; i++ {
		b = x.appendElem(b, ek, l.At(i), sub)
	}
	return b
}

func (x *Encoder) appendMap(b []byte, m *state.Map, t *schema.Type, sub *plan) []byte {
	ek := elemKind(t)
	b = append(b, byte(t.Key), ek)
	if ek == wQuant {
		b = appendQuant(b, t.Elem.Quant)
	}
	start := len(x.mkey)
	x.mkey = m.Keys(x.mkey)
	end := len(x.mkey)
	b = binary.AppendUvarint(b, uint64(end-start))
	for i := start; i < end; i++ {
		k := x.mkey[i]
		b = x.appendElem(b, byte(t.Key), k, nil)
		v, _ := m.Get(k)
		b = x.appendElem(b, ek, v, sub)
	}
	clear(x.mkey[start:end])
	x.mkey = x.mkey[:start]
	return b
}

func (x *Encoder) appendBag(b []byte, g *state.Bag, t *schema.Type, sub *plan) []byte {
	b = append(b, byte(t.Key))
	b = binary.AppendUvarint(b, uint64(g.Len()))
	// Items in the bag's own order: sorting costs more than the rest of
	// the encoding, and decoding does not need it.
	for k, r := range g.All {
		b = appendScalar(b, byte(t.Key), k)
		b = x.appendStruct(b, r, sub, 0, 0, 0)
	}
	return b
}

func (x *Encoder) appendElem(b []byte, wk byte, v state.Value, sub *plan) []byte {
	switch wk {
	case byte(schema.String), byte(schema.Bytes):
		return appendString(b, v.S)
	case byte(schema.Nested):
		return x.appendStruct(b, v.R, sub, 0, 0, 0)
	}
	return appendScalar(b, wk, v.N)
}

// appendScalar appends v, a numeric value in stored representation, of
// wire kind wk.
func appendScalar(b []byte, wk byte, v uint64) []byte {
	switch schema.Kind(wk) {
	case schema.Int8, schema.Int16, schema.Int32, schema.Int64:
		return binary.AppendVarint(b, int64(v))
	case schema.Float32:
		return binary.LittleEndian.AppendUint32(b, uint32(v))
	case schema.Float64:
		return binary.LittleEndian.AppendUint64(b, v)
	}
	if wk == wQuant {
		return binary.AppendVarint(b, int64(v))
	}
	return binary.AppendUvarint(b, v)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendQuant appends a quantization: 0 and its step when unbounded, 1,
// its step, minimum and bits when bounded.
func appendQuant(b []byte, q schema.Quant) []byte {
	if !q.Bounded {
		b = append(b, 0)
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(q.Step))
	}
	b = append(b, 1)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(q.Step))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(q.Min))
	return append(b, q.Bits)
}

package store

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// A DecodeError is the error of decoding document data: where it failed
// and why. Err wraps ErrMalformed or ErrIncompatible.
type DecodeError struct {
	Offset int    // byte offset in the data
	Field  string // the field being decoded, as a dotted path, if known
	Err    error
}

func (e *DecodeError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%v (field %s, at byte %d)", e.Err, e.Field, e.Offset)
	}
	return fmt.Sprintf("%v (at byte %d)", e.Err, e.Offset)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Decode decodes doc into a new record of its class: stored fields set,
// every other field at its zero value. Errors wrap ErrUnknownClass,
// ErrMalformed or ErrIncompatible.
func (c *Codec) Decode(doc Document) (*state.Record, error) {
	cl := c.schema.Class(doc.Class)
	if cl == nil {
		return nil, fmt.Errorf("%w: class ID %d (document %q)", ErrUnknownClass, doc.Class, doc.Key)
	}
	b := state.Build(cl)
	if err := c.decodeInto(b, cl, doc.Data); err != nil {
		return nil, err
	}
	return b.Record(), nil
}

// Restore sets the stored fields of e, an entity of a server's tracker,
// to the values of doc, through e's handle as setters do, and leaves its
// other fields as they are (at their defaults, for an entity just
// spawned). It is how a server loads a player at login:
//
//	doc, err := st.Load(ctx, playerID)   // errors.Is(err, store.ErrNotFound): a new player
//	...
//	p, _ := game.SpawnPlayer(tracker)
//	err = codec.Restore(p.Entity(), doc)
//
// Errors wrap ErrIncompatible (doc is of another class, or a field
// changed kind), ErrUnknownClass or ErrMalformed; e is then unchanged.
// Values over the tracker's limits are refused as for any setter
// (state.Tracker.TakeRefusals).
func (c *Codec) Restore(e *state.Entity, doc Document) error {
	cl := e.Class()
	if doc.Class != cl.ID {
		return fmt.Errorf("%w: document %q is of class ID %d, the entity of class %s (ID %d)", ErrIncompatible, doc.Key, doc.Class, cl.Name, cl.ID)
	}
	if c.schema.Class(cl.ID) != cl {
		return fmt.Errorf("%w: class %s is not in the codec's schema", ErrUnknownClass, cl.Name)
	}
	b := state.BuildFrom(&e.Record)
	if err := c.decodeInto(b, cl, doc.Data); err != nil {
		return err
	}
	e.Handle().SetNested(0, cl, state.ValueOf(b.Record()))
	return nil
}

func (c *Codec) decodeInto(b state.Builder, cl *schema.Struct, data []byte) error {
	d := decoder{b: data, c: c}
	d.readStruct(b, c.classes[cl.ID], 0, cl.Name)
	if d.err == nil && d.off != len(d.b) {
		d.fail(ErrMalformed, "", "%d bytes after the document", len(d.b)-d.off)
	}
	return d.err
}

type decoder struct {
	c     *Codec
	b     []byte
	off   int
	depth int
	err   error
}

func (d *decoder) fail(kind error, field, format string, args ...any) {
	if d.err == nil {
		d.err = &DecodeError{Offset: d.off, Field: field, Err: fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))}
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail(ErrMalformed, "", "bad varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail(ErrMalformed, "", "bad varint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail(ErrMalformed, "", "unexpected end")
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.b)-d.off {
		d.fail(ErrMalformed, "", "%d bytes wanted, %d left", n, len(d.b)-d.off)
		return nil
	}
	d.off += n
	return d.b[d.off-n : d.off]
}

// count reads a count of items of at least min bytes each and checks it
// against what is left, so nothing is allocated for a count the data
// cannot hold.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64((len(d.b)-d.off)/min) {
		d.fail(ErrMalformed, "", "count %d exceeds the data left", n)
		return 0
	}
	return int(n)
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)-d.off) {
		d.fail(ErrMalformed, "", "string of %d bytes, %d left", n, len(d.b)-d.off)
		return ""
	}
	return string(d.bytes(int(n)))
}

func (d *decoder) quant() schema.Quant {
	var q schema.Quant
	switch d.byte() {
	case 0:
		q.Step = math.Float64frombits(binary.LittleEndian.Uint64(pad(d.bytes(8), 8)))
	case 1:
		q.Bounded = true
		q.Step = math.Float64frombits(binary.LittleEndian.Uint64(pad(d.bytes(8), 8)))
		q.Min = math.Float64frombits(binary.LittleEndian.Uint64(pad(d.bytes(8), 8)))
		q.Bits = d.byte()
		if d.err == nil && (q.Bits < 1 || q.Bits > 32 || math.IsNaN(q.Min) || math.IsInf(q.Min, 0)) {
			d.fail(ErrMalformed, "", "bad quantization")
		}
	default:
		d.fail(ErrMalformed, "", "bad quantization")
	}
	if d.err == nil && !(q.Step > 0 && !math.IsInf(q.Step, 0)) {
		d.fail(ErrMalformed, "", "bad quantization step")
	}
	return q
}

func (d *decoder) enter() bool {
	d.depth++
	if d.depth > maxDepth {
		d.fail(ErrMalformed, "", "nesting deeper than %d", maxDepth)
		return false
	}
	return true
}

func validWire(wk byte) bool {
	return wk >= byte(schema.Bool) && wk <= byte(schema.Bag) || wk == wQuant
}

func scalarWire(wk byte) bool {
	return wk >= byte(schema.Bool) && wk <= byte(schema.Ref) || wk == wQuant
}

// readStruct reads a struct value into the fields of b that p stores,
// for a struct whose first leaf in b's record is leaf.
func (d *decoder) readStruct(b state.Builder, p *plan, leaf int, path string) {
	if !d.enter() {
		return
	}
	n := d.count(2)
	for i := 0; i < n && d.err == nil; i++ {
		id := d.uvarint()
		wk := d.byte()
		if d.err == nil && !validWire(wk) {
			d.fail(ErrMalformed, path, "bad kind %d", wk)
		}
		j, ok := p.index[uint32(id)]
		if !ok || id > math.MaxUint32 {
			d.skipField(wk) // appended since, removed, or no longer persist
			continue
		}
		d.readField(b, &p.fields[j], leaf, wk, path)
	}
	d.depth--
}

func (d *decoder) readField(b state.Builder, fp *fieldPlan, leaf int, wk byte, path string) {
	f := fp.f
	t := &f.Type
	at := leaf + f.Leaf
	path = path + "." + f.Name
	switch k := t.Kind; {
	case k.Numeric():
		var q schema.Quant
		if wk == wQuant {
			q = d.quant()
		}
		if !d.compatible(wk, t, path) {
			return
		}
		v := d.scalar(wk, q, t, path)
		if d.err == nil {
			b.SetNum(at, v)
		}
	case k == schema.String || k == schema.Bytes:
		if !d.compatible(wk, t, path) {
			return
		}
		s := d.string()
		if d.err == nil {
			b.SetStr(at, s)
		}
	case k == schema.Nested:
		if !d.compatible(wk, t, path) {
			return
		}
		d.readStruct(b, fp.sub, at, path)
	default:
		if !d.compatible(wk, t, path) {
			return
		}
		c := d.container(t, fp.sub, path)
		if d.err == nil {
			b.SetContainer(at, c)
		}
	}
}

// compatible reports whether a value of wire kind wk can be read as a
// value of type t, failing with ErrIncompatible if not.
func (d *decoder) compatible(wk byte, t *schema.Type, path string) bool {
	if d.err != nil {
		return false
	}
	ok := false
	switch k := t.Kind; {
	case k == schema.Ref:
		ok = wk == byte(schema.Ref)
	case k == schema.Float32 || k == schema.Float64:
		ok = wk == byte(schema.Float32) || wk == byte(schema.Float64) || wk == wQuant
	case k.Numeric(): // bool and integers
		ok = wk >= byte(schema.Bool) && wk <= byte(schema.Uint64)
	case k == schema.String || k == schema.Bytes:
		ok = wk == byte(schema.String) || wk == byte(schema.Bytes)
	default:
		ok = wk == byte(k)
	}
	if !ok {
		name := "quantized float"
		if wk != wQuant {
			name = schema.Kind(wk).String()
		}
		d.fail(ErrIncompatible, path, "stored as %s, declared %s", name, t)
	}
	return ok
}

// scalar reads a numeric value of wire kind wk (with quantization q if
// wk is wQuant) and returns it in the stored representation of type t,
// which compatible accepted.
func (d *decoder) scalar(wk byte, q schema.Quant, t *schema.Type, path string) uint64 {
	var (
		u     uint64 // unsigned and bool values
		i     int64  // signed values
		f     float64
		float bool
	)
	switch kw := schema.Kind(wk); {
	case wk == wQuant:
		code := d.varint()
		if d.err != nil {
			return 0
		}
		if q == t.Quant && quantCodeOK(q, code) {
			if q.Bounded {
				return uint64(uint32(code))
			}
			return uint64(code)
		}
		f, float = q.Dequantize(code), true
	case kw == schema.Float32:
		bits := binary.LittleEndian.Uint32(pad(d.bytes(4), 4))
		if t.Kind == schema.Float32 && !t.Quant.Enabled() {
			return uint64(bits)
		}
		f, float = float64(math.Float32frombits(bits)), true
	case kw == schema.Float64:
		bits := binary.LittleEndian.Uint64(pad(d.bytes(8), 8))
		if t.Kind == schema.Float64 && !t.Quant.Enabled() {
			return bits
		}
		f, float = math.Float64frombits(bits), true
	case kw.Signed():
		i = d.varint()
		u = uint64(i)
		if i < 0 {
			u = math.MaxUint64 // out of range of every unsigned kind
		}
	default:
		u = d.uvarint()
		i = int64(u)
		if u > math.MaxInt64 {
			i = math.MaxInt64 // out of range of every signed kind below 64 bits
		}
	}
	if d.err != nil {
		return 0
	}
	if float {
		switch {
		case t.Quant.Enabled():
			return uint64(t.Quant.Quantize(f))
		case t.Kind == schema.Float32:
			return uint64(math.Float32bits(float32(f)))
		}
		return math.Float64bits(f)
	}
	k := t.Kind
	fits := true
	switch {
	case k == schema.Bool:
		fits = u <= 1
	case k.Signed():
		w := k.Width()
		if w == 64 {
			fits = schema.Kind(wk).Signed() || u <= math.MaxInt64
		} else {
			fits = i >= -(1<<(w-1)) && i < 1<<(w-1) && (schema.Kind(wk).Signed() || u <= math.MaxInt64)
		}
		if fits {
			return uint64(i)
		}
	default: // unsigned and Ref
		w := k.Width()
		fits = u != math.MaxUint64 || !schema.Kind(wk).Signed()
		if w < 64 {
			fits = fits && u < 1<<w
		}
	}
	if !fits {
		d.fail(ErrIncompatible, path, "value does not fit %s", t)
		return 0
	}
	return u
}

// pad returns b, or zeros of length n after a failed read.
func pad(b []byte, n int) []byte {
	if len(b) < n {
		return make([]byte, n)
	}
	return b
}

// quantCodeOK reports whether code is a code q produces.
func quantCodeOK(q schema.Quant, code int64) bool {
	if q.Bounded {
		return code >= 0 && code < 1<<q.Bits
	}
	return code >= -(1<<62) && code <= 1<<62
}

// container reads a list, map or bag of type t (its kind checked by the
// caller); sub is the plan of its struct elements.
func (d *decoder) container(t *schema.Type, sub *plan, path string) any {
	if !d.enter() {
		return nil
	}
	defer func() { d.depth-- }()
	switch t.Kind {
	case schema.List:
		ek := d.byte()
		var q schema.Quant
		if ek == wQuant {
			q = d.quant()
		}
		if !d.compatible(ek, t.Elem, path+"[]") {
			return nil
		}
		n := d.count(1)
		vals := make([]state.Value, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			vals = append(vals, d.elem(ek, q, t.Elem, sub, path+"[]"))
		}
		return state.NewList(t, vals)
	case schema.Map:
		kk := d.byte()
		ek := d.byte()
		var q schema.Quant
		if ek == wQuant {
			q = d.quant()
		}
		keyType := &schema.Type{Kind: t.Key}
		if !d.compatible(kk, keyType, path+"{key}") || !d.compatible(ek, t.Elem, path+"{}") {
			return nil
		}
		n := d.count(2)
		keys := make([]state.Value, 0, n)
		vals := make([]state.Value, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			keys = append(keys, d.elem(kk, schema.Quant{}, keyType, nil, path+"{key}"))
			vals = append(vals, d.elem(ek, q, t.Elem, sub, path+"{}"))
		}
		return state.NewMapOf(t, keys, vals)
	default: // Bag
		kk := d.byte()
		keyType := &schema.Type{Kind: t.Key}
		if !d.compatible(kk, keyType, path+"{key}") {
			return nil
		}
		n := d.count(2)
		keys := make([]uint64, 0, n)
		items := make([]*state.Record, 0, n)
		for i := 0; i < n && d.err == nil; i++ {
			keys = append(keys, d.scalar(kk, schema.Quant{}, keyType, path+"{key}"))
			items = append(items, d.record(t.Struct, sub, path+"{}"))
		}
		return state.NewBagOf(t, keys, items)
	}
}

// elem reads one container element (or map key) of wire kind wk as a
// value of type t.
func (d *decoder) elem(wk byte, q schema.Quant, t *schema.Type, sub *plan, path string) state.Value {
	switch k := t.Kind; {
	case k == schema.String || k == schema.Bytes:
		return state.Value{S: d.string()}
	case k == schema.Nested:
		return state.Value{R: d.record(t.Struct, sub, path)}
	}
	return state.Value{N: d.scalar(wk, q, t, path)}
}

func (d *decoder) record(st *schema.Struct, p *plan, path string) *state.Record {
	b := state.Build(st)
	d.readStruct(b, p, 0, path)
	return b.Record()
}

// skipField skips a field value of wire kind wk.
func (d *decoder) skipField(wk byte) {
	if wk == wQuant {
		d.quant()
	}
	d.skipValue(wk)
}

// skipValue skips a value of wire kind wk (a quantized value's code only).
func (d *decoder) skipValue(wk byte) {
	if d.err != nil {
		return
	}
	switch schema.Kind(wk) {
	case schema.Float32:
		d.bytes(4)
	case schema.Float64:
		d.bytes(8)
	case schema.String, schema.Bytes:
		n := d.uvarint()
		if d.err == nil && n > uint64(len(d.b)-d.off) {
			d.fail(ErrMalformed, "", "string of %d bytes, %d left", n, len(d.b)-d.off)
			return
		}
		d.bytes(int(n))
	case schema.Nested:
		d.skipStruct()
	case schema.List:
		if !d.enter() {
			return
		}
		ek, _ := d.elemHeader()
		for n := d.count(1); n > 0 && d.err == nil; n-- {
			d.skipValue(ek)
		}
		d.depth--
	case schema.Map:
		if !d.enter() {
			return
		}
		kk := d.keyKind(false)
		ek, _ := d.elemHeader()
		for n := d.count(2); n > 0 && d.err == nil; n-- {
			d.skipValue(kk)
			d.skipValue(ek)
		}
		d.depth--
	case schema.Bag:
		if !d.enter() {
			return
		}
		kk := d.keyKind(true)
		for n := d.count(2); n > 0 && d.err == nil; n-- {
			d.skipValue(kk)
			d.skipStruct()
		}
		d.depth--
	default:
		if wk == wQuant {
			d.varint()
			return
		}
		if !scalarWire(wk) {
			d.fail(ErrMalformed, "", "bad kind %d", wk)
			return
		}
		if schema.Kind(wk).Signed() {
			d.varint()
		} else {
			d.uvarint()
		}
	}
}

// elemHeader reads the element kind of a list or map (and its
// quantization) and checks that it may be an element.
func (d *decoder) elemHeader() (byte, schema.Quant) {
	ek := d.byte()
	var q schema.Quant
	if ek == wQuant {
		q = d.quant()
	}
	if d.err == nil && !(scalarWire(ek) || ek == byte(schema.String) || ek == byte(schema.Bytes) || ek == byte(schema.Nested)) {
		d.fail(ErrMalformed, "", "bad element kind %d", ek)
	}
	return ek, q
}

func (d *decoder) keyKind(bag bool) byte {
	kk := d.byte()
	if d.err == nil && (!schema.Kind(kk).ValidKey() || bag && kk == byte(schema.String)) {
		d.fail(ErrMalformed, "", "bad key kind %d", kk)
	}
	return kk
}

func (d *decoder) skipStruct() {
	if !d.enter() {
		return
	}
	for n := d.count(2); n > 0 && d.err == nil; n-- {
		d.uvarint()
		wk := d.byte()
		if d.err == nil && !validWire(wk) {
			d.fail(ErrMalformed, "", "bad kind %d", wk)
		}
		d.skipField(wk)
	}
	d.depth--
}

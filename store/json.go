package store

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/replicago/replica/schema"
)

// AppendJSON appends doc to dst as one JSON object, for operators:
//
//	{"key":"player-7","class":"player","class_id":2,"tick":1200,
//	 "schema":"9f2c…","fields":{"gold":1495,"inv":{"1":{"kind":3,"count":2}}}}
//
// Fields are named with s, the schema the document was written with (see
// Store.Schema and schema.DecodeDescriptor); a field s does not know, or
// every field when s is nil, is named by its ID as "#ID". Integers are
// JSON numbers, floats too (NaN and infinities as the strings "NaN",
// "+Inf" and "-Inf"; quantized floats dequantized), bytes are base64
// strings, maps and bags are objects keyed by their keys, in ascending
// order. It needs no
// generated code: the document describes its own kinds. Errors wrap
// ErrMalformed.
func AppendJSON(dst []byte, doc Document, s *schema.Schema) ([]byte, error) {
	var cl *schema.Struct
	if s != nil {
		cl = s.Class(doc.Class)
	}
	dst = append(dst, `{"key":`...)
	dst = appendJSONString(dst, doc.Key)
	if cl != nil {
		dst = append(dst, `,"class":`...)
		dst = appendJSONString(dst, cl.Name)
	}
	dst = append(dst, `,"class_id":`...)
	dst = strconv.AppendUint(dst, uint64(doc.Class), 10)
	dst = append(dst, `,"tick":`...)
	dst = strconv.AppendUint(dst, doc.Tick, 10)
	dst = append(dst, `,"schema":"`...)
	dst = append(dst, doc.Schema.String()...)
	dst = append(dst, `","fields":`...)
	j := jsonWriter{d: decoder{b: doc.Data}, out: dst}
	j.structValue(cl)
	if j.d.err == nil && j.d.off != len(j.d.b) {
		j.d.fail(ErrMalformed, "", "%d bytes after the document", len(j.d.b)-j.d.off)
	}
	if j.d.err != nil {
		return dst[:len(dst)-len(`,"fields":`)], j.d.err
	}
	return append(j.out, '}'), nil
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // invalid UTF-8 becomes U+FFFD
	return append(dst, b...)
}

type jsonWriter struct {
	d   decoder
	out []byte
}

func (j *jsonWriter) structValue(st *schema.Struct) {
	d := &j.d
	if !d.enter() {
		return
	}
	j.out = append(j.out, '{')
	n := d.count(2)
	for i := 0; i < n && d.err == nil; i++ {
		id := d.uvarint()
		wk := d.byte()
		if d.err == nil && !validWire(wk) {
			d.fail(ErrMalformed, "", "bad kind %d", wk)
		}
		if i > 0 {
			j.out = append(j.out, ',')
		}
		var f *schema.Field
		if st != nil && id <= math.MaxUint32 {
			f = st.Field(uint32(id))
		}
		if f != nil {
			j.out = appendJSONString(j.out, f.Name)
		} else {
			j.out = append(j.out, `"#`...)
			j.out = strconv.AppendUint(j.out, id, 10)
			j.out = append(j.out, '"')
		}
		j.out = append(j.out, ':')
		var q schema.Quant
		if wk == wQuant {
			q = d.quant()
		}
		j.value(wk, q, f)
	}
	j.out = append(j.out, '}')
	d.depth--
}

// value writes a value of wire kind wk; f, if known, is the field it
// belongs to, for the names of nested structs.
func (j *jsonWriter) value(wk byte, q schema.Quant, f *schema.Field) {
	d := &j.d
	var t *schema.Type
	if f != nil {
		t = &f.Type
	}
	switch schema.Kind(wk) {
	case schema.Nested:
		j.structValue(structOf(t, schema.Nested))
	case schema.List:
		if !d.enter() {
			return
		}
		ek, eq := d.elemHeader()
		j.out = append(j.out, '[')
		for i, n := 0, d.count(1); i < n && d.err == nil; i++ {
			if i > 0 {
				j.out = append(j.out, ',')
			}
			j.elem(ek, eq, elemStruct(t))
		}
		j.out = append(j.out, ']')
		d.depth--
	case schema.Map, schema.Bag:
		if !d.enter() {
			return
		}
		bag := wk == byte(schema.Bag)
		kk := d.keyKind(bag)
		ek, eq := byte(schema.Nested), schema.Quant{}
		if !bag {
			ek, eq = d.elemHeader()
		}
		var st *schema.Struct
		if bag {
			st = structOf(t, schema.Bag)
		} else {
			st = elemStruct(t)
		}
		j.out = append(j.out, '{')
		// Entries are written without separators, then sorted by key
		// (bags are stored in no particular order) and joined.
		type entry struct {
			key        int64 // an unsigned key, offset to sort as signed
			start, end int
		}
		var ents []entry
		region := len(j.out)
		for i, n := 0, d.count(2); i < n && d.err == nil; i++ {
			e := entry{start: len(j.out)}
			switch {
			case kk == byte(schema.String):
				j.out = appendJSONString(j.out, d.string())
			case schema.Kind(kk).Signed():
				e.key = d.varint()
				j.out = strconv.AppendQuote(j.out, strconv.FormatInt(e.key, 10))
			default:
				u := d.uvarint()
				e.key = int64(u ^ 1<<63)
				j.out = strconv.AppendQuote(j.out, strconv.FormatUint(u, 10))
			}
			j.out = append(j.out, ':')
			j.elem(ek, eq, st)
			e.end = len(j.out)
			ents = append(ents, e)
		}
		if kk != byte(schema.String) {
			slices.SortStableFunc(ents, func(a, b entry) int { return cmp.Compare(a.key, b.key) })
		}
		body := slices.Clone(j.out[region:])
		j.out = j.out[:region]
		for i, e := range ents {
			if i > 0 {
				j.out = append(j.out, ',')
			}
			j.out = append(j.out, body[e.start-region:e.end-region]...)
		}
		j.out = append(j.out, '}')
		d.depth--
	default:
		j.elem(wk, q, nil)
	}
}

func structOf(t *schema.Type, k schema.Kind) *schema.Struct {
	if t != nil && t.Kind == k {
		return t.Struct
	}
	return nil
}

func elemStruct(t *schema.Type) *schema.Struct {
	if t != nil && (t.Kind == schema.List || t.Kind == schema.Map) && t.Elem.Kind == schema.Nested {
		return t.Elem.Struct
	}
	return nil
}

// elem writes a scalar, string or struct value of wire kind wk.
func (j *jsonWriter) elem(wk byte, q schema.Quant, st *schema.Struct) {
	switch schema.Kind(wk) {
	case schema.String:
		j.out = appendJSONString(j.out, j.d.string())
	case schema.Bytes:
		s := j.d.string()
		j.out = append(j.out, '"')
		j.out = base64.StdEncoding.AppendEncode(j.out, []byte(s))
		j.out = append(j.out, '"')
	case schema.Nested:
		j.structValue(st)
	default:
		if !scalarWire(wk) {
			j.d.fail(ErrMalformed, "", "bad kind %d", wk)
			return
		}
		j.scalar(wk, q)
	}
}

func (j *jsonWriter) scalar(wk byte, q schema.Quant) {
	d := &j.d
	switch k := schema.Kind(wk); {
	case wk == wQuant:
		j.float(q.Dequantize(d.varint()), 64)
	case k == schema.Float32:
		j.float(float64(math.Float32frombits(binary.LittleEndian.Uint32(pad(d.bytes(4), 4)))), 32)
	case k == schema.Float64:
		j.float(math.Float64frombits(binary.LittleEndian.Uint64(pad(d.bytes(8), 8))), 64)
	case k == schema.Bool:
		if d.uvarint() != 0 {
			j.out = append(j.out, "true"...)
		} else {
			j.out = append(j.out, "false"...)
		}
	case k.Signed():
		j.out = strconv.AppendInt(j.out, d.varint(), 10)
	default:
		j.out = strconv.AppendUint(j.out, d.uvarint(), 10)
	}
}

func (j *jsonWriter) float(f float64, bits int) {
	switch {
	case math.IsNaN(f):
		j.out = append(j.out, `"NaN"`...)
	case math.IsInf(f, 1):
		j.out = append(j.out, `"+Inf"`...)
	case math.IsInf(f, -1):
		j.out = append(j.out, `"-Inf"`...)
	default:
		j.out = strconv.AppendFloat(j.out, f, 'g', -1, bits)
	}
}

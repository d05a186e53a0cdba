package tsnode

import (
	"cmp"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// Canonical renders entities in the canonical text the driver renders a
// TypeScript replica in: one line per entity, by ascending ID,
//
//	<ID hex> c<class ID> o<owned 0|1> l<level> (<leaf>,<leaf>,...)
//
// with the leaves of the entity's class in leaf order (docs/protocol.md
// §5.5): numbers as their stored value S (§4.1) in hex, strings as s and
// the hex of their UTF-8 bytes, bytes as b and their hex, lists as
// [e,...], maps and bags as {key:value,...} in ascending key order, struct
// elements and items as (leaf,...). Strings are rendered as the
// TypeScript runtime decodes them (DecodedString). owned says whether the client owns an
// entity; nil means none. level is the entity's level of detail
// (docs/protocol.md §5.8), the number of its class's bands it is held at:
// an entity held at every band (state.Entity.Level's all, −1 in Go; the
// TypeScript Entity.level is then the class's band count) is written
// with its class's band count, so a class without bands is always l0.
func Canonical(ents []*state.Entity, owned func(*state.Entity) bool) string {
	ents = slices.Clone(ents)
	slices.SortFunc(ents, func(a, b *state.Entity) int { return cmp.Compare(uint32(a.ID()), uint32(b.ID())) })
	var b strings.Builder
	for _, e := range ents {
		b.WriteString(strconv.FormatUint(uint64(uint32(e.ID())), 16))
		b.WriteString(" c")
		b.WriteString(strconv.FormatUint(uint64(e.Class().ID), 10))
		if owned != nil && owned(e) {
			b.WriteString(" o1 l")
		} else {
			b.WriteString(" o0 l")
		}
		level, all := e.Level()
		if all {
			level = len(e.Class().Bands())
		}
		b.WriteString(strconv.Itoa(level))
		b.WriteByte(' ')
		canonRecord(&b, &e.Record)
		b.WriteByte('\n')
	}
	return b.String()
}

func canonRecord(b *strings.Builder, r *state.Record) {
	st := r.Type()
	b.WriteByte('(')
	for i := range st.Leaves {
		if i > 0 {
			b.WriteByte(',')
		}
		l := st.Leaf(i)
		t := &l.Field.Type
		switch k := t.Kind; {
		case k.Numeric():
			b.WriteString(strconv.FormatUint(r.Num(l.Num), 16))
		case k == schema.String:
			canonStr(b, 's', DecodedString(r.Str(l.Obj)))
		case k == schema.Bytes:
			canonStr(b, 'b', r.Str(l.Obj))
		case k == schema.List:
			list := r.List(l.Obj)
			b.WriteByte('[')
			for j := range list.Len() {
				if j > 0 {
					b.WriteByte(',')
				}
				canonElem(b, t.Elem, list.At(j))
			}
			b.WriteByte(']')
		case k == schema.Map:
			m := r.Map(l.Obj)
			b.WriteByte('{')
			for j, key := range m.Keys(nil) {
				if j > 0 {
					b.WriteByte(',')
				}
				canonElem(b, &schema.Type{Kind: t.Key}, key)
				b.WriteByte(':')
				v, _ := m.Get(key)
				canonElem(b, t.Elem, v)
			}
			b.WriteByte('}')
		case k == schema.Bag:
			bag := r.Bag(l.Obj)
			b.WriteByte('{')
			for j, key := range bag.Keys(nil) {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString(strconv.FormatUint(key, 16))
				b.WriteByte(':')
				canonRecord(b, bag.Get(key))
			}
			b.WriteByte('}')
		}
	}
	b.WriteByte(')')
}

func canonElem(b *strings.Builder, t *schema.Type, v state.Value) {
	switch k := t.Kind; {
	case k == schema.Nested:
		canonRecord(b, v.R)
	case k == schema.String:
		canonStr(b, 's', DecodedString(v.S))
	case k == schema.Bytes:
		canonStr(b, 'b', v.S)
	default:
		b.WriteString(strconv.FormatUint(v.N, 16))
	}
}

func canonStr(b *strings.Builder, tag byte, s string) {
	b.WriteByte(tag)
	b.WriteString(hex.EncodeToString([]byte(s)))
}

// DecodedString returns s as a UTF-8 decoder that replaces invalid
// sequences (the WHATWG "UTF-8 decode", which the TypeScript runtime's
// TextDecoder runs; docs/protocol.md OQ 10) gives it: each maximal
// invalid subpart becomes U+FFFD. Go keeps the bytes as they are.
func DecodedString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var out strings.Builder
	need, seen := 0, 0
	var cp rune
	lower, upper := byte(0x80), byte(0xBF)
	for i := 0; i < len(s); {
		c := s[i]
		if need == 0 {
			i++
			switch {
			case c <= 0x7F:
				out.WriteByte(c)
			case c >= 0xC2 && c <= 0xDF:
				need, cp = 1, rune(c&0x1F)
			case c >= 0xE0 && c <= 0xEF:
				if c == 0xE0 {
					lower = 0xA0
				}
				if c == 0xED {
					upper = 0x9F
				}
				need, cp = 2, rune(c&0xF)
			case c >= 0xF0 && c <= 0xF4:
				if c == 0xF0 {
					lower = 0x90
				}
				if c == 0xF4 {
					upper = 0x8F
				}
				need, cp = 3, rune(c&7)
			default:
				out.WriteRune(utf8.RuneError)
			}
			continue
		}
		if c < lower || c > upper {
			need, seen, cp, lower, upper = 0, 0, 0, 0x80, 0xBF
			out.WriteRune(utf8.RuneError) // c is read again
			continue
		}
		i++
		lower, upper = 0x80, 0xBF
		cp = cp<<6 | rune(c&0x3F)
		if seen++; seen == need {
			out.WriteRune(cp)
			need, seen, cp = 0, 0, 0
		}
	}
	if need != 0 {
		out.WriteRune(utf8.RuneError)
	}
	return out.String()
}

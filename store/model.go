package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/state"
)

// Incremental saves. The tick goroutine encodes, for an entity the Writer
// already holds whole, only what changed: the stored top-level fields
// whose leaves are dirty and, for a bag field, the items added, changed or
// removed. The Writer's goroutine keeps each entity's document split into
// those pieces (a docModel), applies the patches in order and reassembles
// the document at flush time. A bag of 40 items costs the tick one item's
// encoding rather than 40.

// Patch operations, each introduced by its code and the plan index of the
// field it touches.
const (
	patchField    = iota // uvarint length, the field's encoding (ID, wire kind, value)
	patchItem            // uvarint key (stored representation), uvarint length, the item's encoding (key, struct)
	patchRemove          // uvarint key
	patchClearBag        // no operand: the bag was replaced whole; its items follow
)

// fieldLeaves returns the first leaf and the number of leaves of a stored
// top-level field of a class plan.
func fieldLeaves(f *schema.Field) (int, int) {
	if f.Type.Kind == schema.Nested {
		return f.Leaf, f.Type.Struct.Leaves
	}
	return f.Leaf, 1
}

// appendPatch appends to dst the patch of the entity of c, whose document
// the Writer holds whole, and reports whether c touched any stored field.
func (x *Encoder) appendPatch(dst []byte, c *state.Change) ([]byte, bool) {
	e := c.Entity
	p := x.c.classes[e.Class().ID]
	r := &e.Record
	dirty := c.DirtySet()
	start := len(dst)
	for i := range p.fields {
		fp := &p.fields[i]
		lo, n := fieldLeaves(fp.f)
		if !state.AnyDirty(dirty, lo, lo+n) {
			continue
		}
		if fp.f.Type.Kind != schema.Bag {
			dst = append(dst, patchField)
			dst = binary.AppendUvarint(dst, uint64(i))
			dst = x.appendPiece(dst, func(b []byte) []byte { return x.appendField(b, r, fp, 0, 0, 0) })
			continue
		}
		bag := r.Bag(fp.f.Obj)
		cc := c.Cont(fp.f.Leaf)
		if cc == nil || cc.Whole {
			dst = append(dst, patchClearBag)
			dst = binary.AppendUvarint(dst, uint64(i))
			for k, item := range bag.All {
				dst = x.appendItemPatch(dst, i, fp, k, item)
			}
			continue
		}
		for k, kc := range cc.Keys {
			item := bag.Get(k)
			if kc.Removed || item == nil {
				dst = append(dst, patchRemove)
				dst = binary.AppendUvarint(dst, uint64(i))
				dst = binary.AppendUvarint(dst, k)
				continue
			}
			dst = x.appendItemPatch(dst, i, fp, k, item)
		}
	}
	return dst, len(dst) > start
}

func (x *Encoder) appendItemPatch(dst []byte, i int, fp *fieldPlan, k uint64, item *state.Record) []byte {
	dst = append(dst, patchItem)
	dst = binary.AppendUvarint(dst, uint64(i))
	dst = binary.AppendUvarint(dst, k)
	return x.appendPiece(dst, func(b []byte) []byte {
		b = appendScalar(b, byte(fp.f.Type.Key), k)
		return x.appendStruct(b, item, fp.sub, 0, 0, 0)
	})
}

// appendPiece appends a length-prefixed piece that enc writes. The length
// is reserved at its most common size (one byte) and the piece moved when
// it is longer.
func (x *Encoder) appendPiece(dst []byte, enc func([]byte) []byte) []byte {
	at := len(dst)
	dst = append(dst, 0)
	dst = enc(dst)
	n := len(dst) - at - 1
	if n < 0x80 {
		dst[at] = byte(n)
		return dst
	}
	var hdr [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(hdr[:], uint64(n))
	dst = append(dst, hdr[:h-1]...)
	copy(dst[at+h:], dst[at+1:at+1+n])
	copy(dst[at:], hdr[:h])
	return dst
}

// A docModel is an entity's document split into its fields, and a bag
// field into its items, kept by the Writer's goroutine.
type docModel struct {
	plan   *plan
	fields [][]byte                  // by plan index: the field's encoding, or nil for a bag field
	items  map[int]map[uint64][]byte // by plan index of a bag field: item key → encoding (key, struct)
}

var errModel = errors.New("store: document does not follow its class's plan")

// loadModel splits data, a whole document of class by this codec, into a
// model: m, reusing its storage, when it is one of the same class.
func (c *Codec) loadModel(m *docModel, class uint32, data []byte) (*docModel, error) {
	p := c.classes[class]
	if p == nil {
		return nil, fmt.Errorf("%w: class ID %d", ErrUnknownClass, class)
	}
	if m == nil || m.plan != p {
		m = &docModel{plan: p, fields: make([][]byte, len(p.fields))}
	}
	d := decoder{b: data, c: c}
	n := d.count(2)
	if n != len(p.fields) {
		return nil, errModel
	}
	for range n {
		at := d.off
		id := d.uvarint()
		wk := d.byte()
		j, ok := p.index[uint32(id)]
		if d.err != nil || !ok || wk != p.fields[j].wk {
			return nil, errModel
		}
		fp := &p.fields[j]
		if fp.f.Type.Kind != schema.Bag {
			d.skipField(wk)
			m.fields[j] = append(m.fields[j][:0], data[at:d.off]...)
			continue
		}
		kk := d.keyKind(true)
		items := m.bag(int(j))
		count := d.count(2)
		for k := count; k > 0 && d.err == nil; k-- {
			iat := d.off
			key := d.scalar(kk, schema.Quant{}, &schema.Type{Kind: fp.f.Type.Key}, "")
			d.skipStruct()
			items[key] = append(items[key][:0], data[iat:d.off]...)
		}
		if d.err == nil && len(items) > count {
			// Items the model had and the document has not: rare (a
			// whole document after items were removed), so found by
			// reading the keys again.
			keep := make(map[uint64]bool, count)
			d2 := decoder{b: data[at:], c: c}
			d2.uvarint()
			d2.byte()
			d2.byte()
			for k := d2.count(2); k > 0; k-- {
				keep[d2.scalar(kk, schema.Quant{}, &schema.Type{Kind: fp.f.Type.Key}, "")] = true
				d2.skipStruct()
			}
			for key := range items {
				if !keep[key] {
					delete(items, key)
				}
			}
		}
	}
	if d.err != nil || d.off != len(data) {
		return nil, errModel
	}
	return m, nil
}

// apply applies a patch that appendPatch wrote.
func (m *docModel) apply(patch []byte) error {
	for len(patch) > 0 {
		code := patch[0]
		i, n := binary.Uvarint(patch[1:])
		if n <= 0 || i >= uint64(len(m.fields)) {
			return errModel
		}
		patch = patch[1+n:]
		var key uint64
		if code == patchItem || code == patchRemove {
			if key, n = binary.Uvarint(patch); n <= 0 {
				return errModel
			}
			patch = patch[n:]
		}
		var piece []byte
		if code == patchField || code == patchItem {
			l, n := binary.Uvarint(patch)
			if n <= 0 || l > uint64(len(patch)-n) {
				return errModel
			}
			piece, patch = patch[n:n+int(l)], patch[n+int(l):]
		}
		switch code {
		case patchField:
			m.fields[i] = append(m.fields[i][:0], piece...)
		case patchItem:
			items := m.bag(int(i))
			items[key] = append(items[key][:0], piece...)
		case patchRemove:
			delete(m.bag(int(i)), key)
		case patchClearBag:
			clear(m.bag(int(i)))
		default:
			return errModel
		}
	}
	return nil
}

func (m *docModel) bag(i int) map[uint64][]byte {
	if m.items == nil {
		m.items = make(map[int]map[uint64][]byte)
	}
	items := m.items[i]
	if items == nil {
		items = make(map[uint64][]byte)
		m.items[i] = items
	}
	return items
}

// appendDoc appends the whole document m holds.
func (m *docModel) appendDoc(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(m.plan.fields)))
	for i := range m.plan.fields {
		fp := &m.plan.fields[i]
		if fp.f.Type.Kind != schema.Bag {
			b = append(b, m.fields[i]...)
			continue
		}
		b = binary.AppendUvarint(b, uint64(fp.f.ID))
		b = append(b, fp.wk, byte(fp.f.Type.Key))
		items := m.items[i]
		b = binary.AppendUvarint(b, uint64(len(items)))
		for _, it := range items {
			b = append(b, it...)
		}
	}
	return b
}

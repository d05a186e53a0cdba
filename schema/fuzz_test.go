package schema_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/replicago/replica/internal/arena"
	"github.com/replicago/replica/schema"
)

// FuzzDescriptor decodes arbitrary bytes as a schema descriptor. Decoding
// must never panic; it either fails with an error wrapping ErrDescriptor
// or returns a laid-out schema whose descriptor is exactly the input (the
// encoding is canonical) and which survives another round trip unchanged.
func FuzzDescriptor(f *testing.F) {
	full := fullSchema(f)
	desc := full.AppendDescriptor(nil)
	f.Add(desc)
	f.Add(arena.Schema().AppendDescriptor(nil))
	empty, err := schema.New()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(empty.AppendDescriptor(nil))
	// Corrupt ones: truncated, a flipped bit, trailing data.
	f.Add(desc[:len(desc)/2])
	flipped := bytes.Clone(desc)
	flipped[len(flipped)/3] ^= 0x10
	f.Add(flipped)
	f.Add(append(bytes.Clone(desc), 0xFF))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := schema.DecodeDescriptor(data)
		if err != nil {
			if s != nil {
				t.Fatal("a schema returned with an error")
			}
			if !errors.Is(err, schema.ErrDescriptor) {
				t.Fatalf("error %v does not wrap ErrDescriptor", err)
			}
			return
		}
		for i, c := range s.Classes {
			if !c.Class || s.Class(c.ID) != c {
				t.Fatalf("class %d (%s) not registered", i, c.Name)
			}
			if i > 0 && s.Classes[i-1].ID >= c.ID {
				t.Fatalf("classes not sorted by ID")
			}
			if err := c.Layout(); err != nil {
				t.Fatalf("decoded class %s does not lay out: %v", c.Name, err)
			}
			for l := 0; l < c.Leaves; l++ {
				li := c.Leaf(l)
				objs := c.StrSlots
				if li.Field.Type.Kind.Container() {
					objs = c.ContSlots
				}
				if li.Num>>3 >= c.NumBytes || li.Obj >= objs || (li.Num < 0) == (li.Obj < 0) {
					t.Fatalf("class %s leaf %d: slots %d/%d of %d bytes/%d", c.Name, l, li.Num, li.Obj, c.NumBytes, objs)
				}
			}
		}
		again := s.AppendDescriptor(nil)
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted a non-canonical descriptor:\n in  %x\n out %x", data, again)
		}
		s2, err := schema.DecodeDescriptor(again)
		if err != nil {
			t.Fatalf("re-encoded descriptor does not decode: %v", err)
		}
		if d := diffSchema(s, s2); d != "" {
			t.Fatalf("second round trip changed the schema: %s", d)
		}
		if !bytes.Equal(s2.AppendDescriptor(nil), again) {
			t.Fatal("re-encoding is not a fixed point")
		}
	})
}

package store_test

import (
	"encoding/json"
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/replicago/replica/internal/mutate"
	v1 "github.com/replicago/replica/internal/testschema/v1"
	v2 "github.com/replicago/replica/internal/testschema/v2"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/store"
)

// FuzzDecode feeds arbitrary bytes to the document decoder, as a document
// of each class of a schema storing every kind of value: it must return a
// typed error or a record that encodes back to a document decoding to the
// same record, and the JSON dump must agree.
func FuzzDecode(f *testing.F) {
	s1 := allPersist(f, v1.Schema())
	c1 := store.NewCodec(s1)
	f.Add(uint8(1), []byte{0})
	f.Add(uint8(2), []byte{1, 1, 2, 3})
	rapid.Check(f, func(rt *rapid.T) {
		cl := rapid.SampledFrom(s1.Classes).Draw(rt, "class")
		e := spawn(f, s1, cl, mutate.Record(rt, cl, 0))
		if rapid.IntRange(0, 9).Draw(rt, "seed") == 0 {
			f.Add(uint8(cl.ID), c1.AppendEntity(nil, e))
		}
	})
	s := allPersist(f, v2.Schema())
	c := store.NewCodec(s)
	f.Fuzz(func(t *testing.T, class uint8, data []byte) {
		doc := store.Document{Key: "k", Class: uint32(class%3) + 1, Data: data}
		r, err := c.Decode(doc)
		js, jerr := store.AppendJSON(nil, doc, s)
		if err != nil {
			var de *store.DecodeError
			if !errors.As(err, &de) || !(errors.Is(err, store.ErrMalformed) || errors.Is(err, store.ErrIncompatible)) {
				t.Fatalf("Decode error %v is not a typed decode error", err)
			}
			if errors.Is(err, store.ErrMalformed) && jerr == nil {
				t.Fatalf("AppendJSON accepts what Decode calls malformed: %v", err)
			}
			return
		}
		if jerr != nil {
			t.Fatalf("Decode accepts what AppendJSON rejects: %v", jerr)
		}
		if !json.Valid(js) {
			t.Fatalf("AppendJSON wrote invalid JSON: %s", js)
		}
		again := c.NewEncoder().AppendRecord(nil, r)
		r2, err := c.Decode(store.Document{Key: "k", Class: doc.Class, Data: again})
		if err != nil {
			t.Fatalf("decoding a re-encoded document: %v", err)
		}
		if !r2.Equal(r) {
			t.Fatal("re-encoded document decodes to another record")
		}
		_ = state.Value{}
	})
}

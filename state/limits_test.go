package state_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/replicago/replica/state"
)

// TestLimits checks that writes storing a string or container over the
// tracker's limits are refused, leave the entity and the changeset as they
// were, and are reported with the field they were aimed at.
func TestLimits(t *testing.T) {
	ts := newTestSchema(t)
	tr := state.NewTracker(ts.s)
	if got := tr.Limits(); got.MaxString != 64<<10 || got.MaxContainer != 1<<16 || got.MaxDepth != 16 {
		t.Fatalf("default limits %+v", got)
	}
	tr.SetLimits(state.Limits{MaxString: 8, MaxContainer: 2})
	e := spawn(t, tr, ts.player)
	tr.Commit()
	h := e.Handle()
	long := strings.Repeat("x", 9)

	h.SetStr(lName, "eight ch") // at the limit: stored
	h.SetStr(lName, long)
	scores := h.List(lScores)
	scores.Push(state.Value{N: 1})
	scores.Push(state.Value{N: 2})
	scores.Push(state.Value{N: 3})      // a third element
	scores.Insert(0, state.Value{N: 4}) // also a third
	stats := h.Map(lStats)
	stats.Put(state.Value{S: "a"}, state.Value{N: 1})
	stats.Put(state.Value{S: "b"}, state.Value{N: 2})
	stats.Put(state.Value{S: "a"}, state.Value{N: 3}) // replacing: no new key
	stats.Put(state.Value{S: "c"}, state.Value{N: 4}) // a third key
	stats.Put(state.Value{S: long}, state.Value{N: 5})
	item := state.NewValue(ts.item)
	item.SetStr(iName, long) // a detached value is not checked until stored
	if got := h.Bag(lInv).Add(1, item); got.Valid() {
		t.Error("a bag item with a long name was stored")
	}
	item.SetStr(iName, "ok")
	if got := h.Bag(lInv).Add(1, item); !got.Valid() {
		t.Error("a bag item within the limits was refused")
	} else {
		got.SetStr(iName, long) // through the item's tracked handle
		got.List(iTags).Push(state.Value{S: long})
	}

	if got := e.Str(obj(ts.player, lName)); got != "eight ch" {
		t.Errorf("name %q, want the last accepted value", got)
	}
	if l := e.List(obj(ts.player, lScores)); l.Len() != 2 || l.At(0).N != 1 {
		t.Errorf("scores %v", l)
	}
	if m := e.Map(obj(ts.player, lStats)); m.Len() != 2 {
		t.Errorf("stats has %d keys, want 2", m.Len())
	}
	if it := e.Bag(obj(ts.player, lInv)).Get(1); it == nil || it.Str(obj(ts.item, iName)) != "ok" || it.List(obj(ts.item, iTags)).Len() != 0 {
		t.Error("the stored bag item was changed by a refused write")
	}
	c := only(t, tr.Commit())
	if cc := c.Cont(lScores); cc == nil || len(cc.Ops) != 2 {
		t.Errorf("scores ops %+v, want the two pushes", cc)
	}
	errs, n := tr.TakeRefusals()
	if n != 8 || len(errs) != 8 {
		t.Fatalf("%d refusals (%d kept), want 8: %v", n, len(errs), errs)
	}
	var le *state.LimitError
	if !errors.As(errs[0], &le) || !errors.Is(errs[0], state.ErrTooLarge) ||
		le.Class != "Player" || le.Field != "Name" || le.What != "string" || le.Len != 9 || le.Max != 8 {
		t.Errorf("first refusal %v (%+v)", errs[0], le)
	}
	if !errors.As(errs[1], &le) || le.Field != "Scores" || le.What != "list" || le.Len != 3 {
		t.Errorf("second refusal %v", errs[1])
	}
	if !errors.As(errs[7], &le) || le.Field != "Inv" || le.What != "element string" {
		t.Errorf("last refusal %v, want the bag's", errs[7])
	}
	if _, n := tr.TakeRefusals(); n != 0 {
		t.Errorf("TakeRefusals kept %d", n)
	}

	// Past 16, refusals are only counted.
	for range 20 {
		h.SetStr(lName, long)
	}
	if errs, n := tr.TakeRefusals(); n != 20 || len(errs) != 16 {
		t.Errorf("%d refusals, %d kept; want 20 and 16", n, len(errs))
	}
}

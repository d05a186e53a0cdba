package demo

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/replicago/replica"
	"github.com/replicago/replica/state"
)

// explained is a bot the explainer picked, with its distance from the
// client's bot.
type explained struct {
	e    *state.Entity
	d    float64
	sees bool
}

// explain tells, in the server's words, why the first client sees or does
// not see n bots (see explainConn). It runs on the tick goroutine, between
// ticks.
func (r *runner) explain(n int) string {
	p := r.players[0]
	switch {
	case p.srv == nil:
		return fmt.Sprintf("  explain %s: it has not joined\n", p.name)
	case p.left:
		return fmt.Sprintf("  explain %s: it has left\n", p.name)
	}
	return explainConn(r.srv, r.world, p.name, p.srv, n)
}

// explainConn tells, in the server's words (Server.Explain), why client
// c, called name, sees or does not see n bots of world w: the farthest it
// sees, which show the radius and the hysteresis at work, and the nearest
// it does not; then, for the nearest bot it sees besides its own, why it
// does not get that bot's owner-only score.
func explainConn(srv *replica.Server, w *world, name string, c *replica.Conn, n int) string {
	var b strings.Builder
	me, ok := w.botOf(c)
	if !ok {
		fmt.Fprintf(&b, "  explain %s: it has no bot\n", name)
		return b.String()
	}
	mx, my := float64(me.X()), float64(me.Y())
	var seen, unseen []explained
	for _, e := range srv.Tracker().AppendEntities(nil) {
		o, _ := BotOf(e)
		x := explained{e: e, d: math.Hypot(mx-float64(o.X()), my-float64(o.Y())), sees: srv.Sees(c, e)}
		if x.sees {
			seen = append(seen, x)
		} else {
			unseen = append(unseen, x)
		}
	}
	byDistance := func(a, b explained) int { return cmp.Compare(a.d, b.d) }
	slices.SortFunc(seen, byDistance)
	slices.SortFunc(unseen, byDistance)
	fmt.Fprintf(&b, "  explain %s, from its bot at (%.1f, %.1f): it sees %d of %d bots\n",
		name, mx, my, len(seen), len(seen)+len(unseen))

	// Half seen, half not, as far as there are.
	ns := min((n+1)/2, len(seen))
	nu := min(n-ns, len(unseen))
	ns = min(n-nu, len(seen))
	picked := append(slices.Clone(seen[len(seen)-ns:]), unseen[:nu]...)
	slices.SortFunc(picked, byDistance)
	for _, x := range picked {
		verb := "sees"
		if !x.sees {
			verb = "not "
		}
		why, err := srv.Explain(c, x.e)
		reason := why.Reason
		if err != nil {
			reason = err.Error()
		}
		fmt.Fprintf(&b, "    %s %s: %s\n", verb, botName(x.e), reason)
	}
	for _, x := range seen {
		if x.e == me.Entity() {
			continue
		}
		why, err := srv.Explain(c, x.e, "score")
		reason := why.Reason
		if err != nil {
			reason = err.Error()
		}
		fmt.Fprintf(&b, "    field score of %s: %s\n", botName(x.e), reason)
		break
	}
	return b.String()
}

// botName names a bot for the explainer: its name and entity ID.
func botName(e *state.Entity) string {
	b, _ := BotOf(e)
	return fmt.Sprintf("%s [id %d]", b.Name(), e.ID())
}

package bench

import (
	"fmt"
	"runtime"
	"strconv"

	"github.com/replicago/replica"
	rclient "github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/bench/zone"
	"github.com/replicago/replica/internal/workload/w2"
	"github.com/replicago/replica/state"
)

// w2LOD says whether the server applies W2's distance level of detail (a
// player's gear and emote seen only within 50 units, and by its owner:
// the zone schema's lod=50 tags): seesNear then follows the workload's
// SeesNear, and verify expects the zero values beyond it.
const w2LOD = true

// The W2 check values after 220 ticks: entity 0's x, y, angle, hp, gold,
// armor, emote and inv[1].count, then entity 4999's x, y, angle and hp.
var w2Reference = []string{"1446.9379", "70.95578", "3.0986946", "42", "1495", "20", "2", "2",
	"494.89438", "655.21826", "3.5826893", "2"}

// RunW2 runs W2 "zone" on a replica.Server: the 5,000 entities in one AOI
// space (radius 100, Euclidean, no hysteresis; bosses 300 through
// SetRadius), and cfg.Clients clients (default 500, one per player) over
// the in-memory transport; client c owns player c and views the space
// from it (a client follows the first entity it is given).
func RunW2(cfg InterestConfig) (*InterestResult, error) {
	wc := w2.DefaultConfig()
	if cfg.Clients <= 0 {
		cfg.Clients = wc.P
	}
	if cfg.Clients > wc.P {
		return nil, fmt.Errorf("bench: W2 has %d players: %d clients", wc.P, cfg.Clients)
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 20
	}
	if cfg.Measured <= 0 {
		cfg.Measured = 200
	}
	w := &w2World{cfg: wc, world: w2.NewWorld(wc)}
	r, err := startInterest(zone.Schema(), w, cfg.Clients)
	if err != nil {
		return nil, err
	}
	defer r.close()
	lod := w2LOD
	res := &InterestResult{Scenario: "w2", Mode: "zone", Clients: cfg.Clients, Entities: wc.N,
		Ticks: cfg.Warmup + cfg.Measured, WarmupTicks: cfg.Warmup, GOMAXPROCS: runtime.GOMAXPROCS(0), LOD: &lod}
	if err := r.run(cfg, res); err != nil {
		return nil, err
	}
	res.Reference = w.reference()
	res.ReferenceOK = res.Ticks == 220 && fmt.Sprint(res.Reference) == fmt.Sprint(w2Reference)
	return res, nil
}

// w2World is the W2 world on the server.
type w2World struct {
	cfg     w2.Config
	world   *w2.World
	space   *replica.Space
	players []zone.Player // ids 0..P−1
	npcs    []zone.Npc    // ids P..N−1, at id−P
	bodies  []w2Body      // by W2 id: the players, then the NPCs
	ids     []state.ID    // by W2 id
}

// w2Body is what the generated Player and Npc have in common.
type w2Body interface {
	SetX(float32)
	SetY(float32)
	SetAngle(float32)
	SetHp(int16)
	SetLevel(uint8)
	SetName(string)
	Entity() *state.Entity
}

func (w *w2World) spawn(srv *replica.Server) error {
	sp, err := srv.NewSpace(replica.SpaceConfig{Name: "zone", Radius: w.cfg.Radius, Metric: replica.Euclidean})
	if err != nil {
		return err
	}
	w.space = sp
	wd := w.world
	for id := range w.cfg.N {
		var b w2Body
		if id < w.cfg.P {
			p, err := zone.SpawnPlayer(srv.Tracker())
			if err != nil {
				return err
			}
			p.SetGold(wd.Gold[id])
			g := p.Gear()
			g.SetHelm(wd.Gear[id].Helm)
			g.SetArmor(wd.Gear[id].Armor)
			g.SetWeapon(wd.Gear[id].Weapon)
			p.SetEmote(wd.Emote[id])
			for k, it := range wd.Inv[id] {
				item := zone.NewItem()
				item.SetKind(it.Kind)
				item.SetCount(it.Count)
				p.Inv().Add(uint8(k+1), item)
			}
			w.players = append(w.players, p)
			b = p
		} else {
			n, err := zone.SpawnNpc(srv.Tracker())
			if err != nil {
				return err
			}
			w.npcs = append(w.npcs, n)
			b = n
		}
		b.SetX(wd.X[id])
		b.SetY(wd.Y[id])
		b.SetAngle(wd.Angle[id])
		b.SetHp(wd.HP[id])
		b.SetLevel(wd.Level[id])
		b.SetName(wd.Name[id])
		w.bodies = append(w.bodies, b)
		e := b.Entity()
		w.ids = append(w.ids, e.ID())
		if err := srv.SetSpace(e, sp); err != nil {
			return err
		}
		if r := wd.Radius(id); r != w.cfg.Radius {
			if err := srv.SetRadius(e, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// join gives client i its player, which it then views the space from.
func (w *w2World) join(srv *replica.Server, i int, c *replica.Conn) error {
	if err := srv.View(c, w.space); err != nil {
		return err
	}
	srv.SetOwner(w.players[i].Entity(), c)
	return nil
}

func (w *w2World) step() {
	wd := w.world
	ch := wd.Step()
	for _, id := range ch.Moved {
		b := w.bodies[id]
		b.SetX(wd.X[id])
		b.SetY(wd.Y[id])
		b.SetAngle(wd.Angle[id])
	}
	for _, id := range ch.HP {
		w.bodies[id].SetHp(wd.HP[id])
	}
	for _, c := range ch.Inv {
		if item, ok := w.players[c.Player].Inv().Get(uint8(c.Key)); ok {
			item.SetCount(wd.Inv[c.Player][c.Key-1].Count)
		}
	}
	for _, id := range ch.Gold {
		w.players[id].SetGold(wd.Gold[id])
	}
	for _, id := range ch.Armor {
		w.players[id].Gear().SetArmor(wd.Gear[id].Armor)
	}
	for _, id := range ch.Emote {
		w.players[id].SetEmote(wd.Emote[id])
	}
}

// seesNear reports whether client c should hold player p's near-LOD
// fields, gear and emote.
func (w *w2World) seesNear(c, p int) bool {
	if !w2LOD {
		return true // sent to every client that sees p
	}
	return w.world.SeesNear(c, p)
}

// verify checks that client i holds exactly the entities W2's Sees gives
// it, with the workload's values in what it may see: every entity's
// common fields; its own player's gold and inventory, and no one else's;
// the gear and emote of the players seesNear allows, zeros for the others.
func (w *w2World) verify(i int, r *rclient.Replica) error {
	wd := w.world
	n := 0
	for id := range w.cfg.N {
		if !wd.Sees(i, id) {
			continue
		}
		n++
		e := r.Entity(w.ids[id])
		if e == nil {
			return fmt.Errorf("entity %d at distance %.3f is visible and not in the replica", id, wd.Dist(i, id))
		}
		var common [6]string
		if id < w.cfg.P {
			p, ok := zone.PlayerViewOf(e)
			if !ok {
				return fmt.Errorf("entity %d is a %s in the replica", id, e.Class().Name)
			}
			common = [6]string{f32s(p.X()), f32s(p.Y()), f32s(p.Angle()), strconv.Itoa(int(p.Hp())), strconv.Itoa(int(p.Level())), p.Name()}
			if err := w.verifyPlayer(i, id, p); err != nil {
				return err
			}
		} else {
			p, ok := zone.NpcViewOf(e)
			if !ok {
				return fmt.Errorf("entity %d is a %s in the replica", id, e.Class().Name)
			}
			common = [6]string{f32s(p.X()), f32s(p.Y()), f32s(p.Angle()), strconv.Itoa(int(p.Hp())), strconv.Itoa(int(p.Level())), p.Name()}
			if p.IsOwned() {
				return fmt.Errorf("npc %d: owned", id)
			}
		}
		want := [6]string{f32s(wd.X[id]), f32s(wd.Y[id]), f32s(wd.Angle[id]), strconv.Itoa(int(wd.HP[id])), strconv.Itoa(int(wd.Level[id])), wd.Name[id]}
		if common != want {
			return fmt.Errorf("entity %d: x, y, angle, hp, level, name = %v, want %v", id, common, want)
		}
	}
	if r.Len() != n {
		return fmt.Errorf("replica holds %d entities, W2 says %d are visible", r.Len(), n)
	}
	return nil
}

// verifyPlayer checks the owner-only and near-LOD fields of player id in
// client i's replica.
func (w *w2World) verifyPlayer(i, id int, p zone.PlayerView) error {
	wd := w.world
	own := id == i
	if p.IsOwned() != own {
		return fmt.Errorf("player %d: owned %v", id, p.IsOwned())
	}
	inv := p.Inv()
	if own {
		if p.Gold() != wd.Gold[id] {
			return fmt.Errorf("own player %d: gold %d, want %d", id, p.Gold(), wd.Gold[id])
		}
		if inv.Len() != len(wd.Inv[id]) {
			return fmt.Errorf("own player %d: %d items, want %d", id, inv.Len(), len(wd.Inv[id]))
		}
		for k, want := range wd.Inv[id] {
			it, ok := inv.Get(uint8(k + 1))
			if !ok || it.Kind() != want.Kind || it.Count() != want.Count {
				return fmt.Errorf("own player %d: item %d missing or not %+v", id, k+1, want)
			}
		}
	} else if p.Gold() != 0 || inv.Len() != 0 {
		return fmt.Errorf("player %d: another client's gold %d and %d items reached client %d", id, p.Gold(), inv.Len(), i)
	}
	g := p.Gear()
	gear, emote := w2.Gear{Helm: g.Helm(), Armor: g.Armor(), Weapon: g.Weapon()}, p.Emote()
	wantGear, wantEmote := w2.Gear{}, uint8(0)
	if w.seesNear(i, id) {
		wantGear, wantEmote = wd.Gear[id], wd.Emote[id]
	}
	if gear != wantGear || emote != wantEmote {
		return fmt.Errorf("player %d at distance %.3f: gear %+v emote %d, want %+v %d", id, wd.Dist(i, id), gear, emote, wantGear, wantEmote)
	}
	return nil
}

// reference returns the check values as the server's entities hold them.
func (w *w2World) reference() []string {
	p, n := w.players[0], w.npcs[len(w.npcs)-1]
	count := "missing"
	if it, ok := p.Inv().Get(1); ok {
		count = strconv.Itoa(int(it.Count()))
	}
	return []string{f32s(p.X()), f32s(p.Y()), f32s(p.Angle()), strconv.Itoa(int(p.Hp())), strconv.Itoa(int(p.Gold())),
		strconv.Itoa(int(p.Gear().Armor())), strconv.Itoa(int(p.Emote())), count,
		f32s(n.X()), f32s(n.Y()), f32s(n.Angle()), strconv.Itoa(int(n.Hp()))}
}

// f32s formats a float32 as the references print it: the shortest string
// that reads back to it.
func f32s(v float32) string { return strconv.FormatFloat(float64(v), 'g', -1, 32) }

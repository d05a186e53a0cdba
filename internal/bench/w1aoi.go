package bench

import (
	"fmt"
	"math"
	"runtime"
	"strconv"

	"github.com/replicago/replica"
	rclient "github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/bench/aoiarena"
	"github.com/replicago/replica/internal/workload/w1"
)

// RunW1AOI runs W1 in AOI mode on a replica.Server: the W1 world in one
// AOI space (radius 150, square metric: W1's |x−cx| ≤ 150 and
// |y−cy| ≤ 150), cfg.Clients clients (default 100) over the in-memory
// transport, each viewing the space from its W1 centre (SetViewpoint),
// drawn from W1's seed-2 generator in the reference's order.
func RunW1AOI(cfg InterestConfig) (*InterestResult, error) {
	if cfg.Clients <= 0 {
		cfg.Clients = 100
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 100
	}
	if cfg.Measured <= 0 {
		cfg.Measured = 500
	}
	w := &w1AOIWorld{world: w1.New(w1.DefaultConfig())}
	w.centres = w.world.Clients(cfg.Clients)
	r, err := startInterest(aoiarena.Schema(), w, cfg.Clients)
	if err != nil {
		return nil, err
	}
	defer r.close()
	res := &InterestResult{Scenario: "w1", Mode: "aoi", Clients: cfg.Clients, Entities: len(w.units),
		Ticks: cfg.Warmup + cfg.Measured, WarmupTicks: cfg.Warmup, GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if err := r.run(cfg, res); err != nil {
		return nil, err
	}
	// The check values, read from the server's entity.
	u := w.units[0]
	got := [4]string{f32s(u.X()), f32s(u.Y()), f32s(u.Angle()), strconv.Itoa(int(u.Hp()))}
	res.Reference = got[:]
	res.ReferenceOK = res.Ticks == 600 && got == w1Entity0
	return res, nil
}

// w1AOIWorld is the W1 world on the server.
type w1AOIWorld struct {
	world   *w1.World
	centres []w1.Client
	space   *replica.Space
	units   []aoiarena.Unit // by W1 id
	visible []int           // verify's buffer
}

func (w *w1AOIWorld) spawn(srv *replica.Server) error {
	sp, err := srv.NewSpace(replica.SpaceConfig{Name: "arena", Radius: 150, Metric: replica.Square})
	if err != nil {
		return err
	}
	w.space = sp
	w.units = make([]aoiarena.Unit, len(w.world.X))
	for id := range w.units {
		u, err := aoiarena.SpawnUnit(srv.Tracker())
		if err != nil {
			return err
		}
		u.SetX(w.world.X[id])
		u.SetY(w.world.Y[id])
		u.SetAngle(w.world.Angle[id])
		u.SetHp(w.world.HP[id])
		u.SetName(w.world.Name[id])
		if err := srv.SetSpace(u.Entity(), sp); err != nil {
			return err
		}
		w.units[id] = u
	}
	return nil
}

func (w *w1AOIWorld) join(srv *replica.Server, i int, c *replica.Conn) error {
	if err := srv.View(c, w.space); err != nil {
		return err
	}
	return srv.SetViewpoint(c, w.centres[i].CX, w.centres[i].CY)
}

func (w *w1AOIWorld) step() { stepW1(w.world, w.units) }

// verify checks that client i holds exactly the entities W1's AOI rule
// gives its centre, with the workload's values.
func (w *w1AOIWorld) verify(i int, r *rclient.Replica) error {
	w.visible = w.world.AppendVisible(w.visible[:0], w.centres[i])
	if r.Len() != len(w.visible) {
		return fmt.Errorf("replica holds %d entities, W1 says %d are visible", r.Len(), len(w.visible))
	}
	for _, id := range w.visible {
		e := r.Entity(w.units[id].ID())
		if e == nil {
			return fmt.Errorf("entity %d (%v, %v) is visible and not in the replica", id, w.world.X[id], w.world.Y[id])
		}
		u, ok := aoiarena.UnitViewOf(e)
		if !ok {
			return fmt.Errorf("entity %d is a %s in the replica", id, e.Class().Name)
		}
		if err := sameF32(id, "x", u.X(), w.world.X[id]); err != nil {
			return err
		}
		if err := sameF32(id, "y", u.Y(), w.world.Y[id]); err != nil {
			return err
		}
		if err := sameF32(id, "angle", u.Angle(), w.world.Angle[id]); err != nil {
			return err
		}
		if u.Hp() != w.world.HP[id] || u.Name() != w.world.Name[id] {
			return fmt.Errorf("entity %d: hp %d name %q, want %d %q", id, u.Hp(), u.Name(), w.world.HP[id], w.world.Name[id])
		}
		if e.Owned() {
			return fmt.Errorf("entity %d: owned", id)
		}
	}
	return nil
}

// sameF32 compares float32 values bit for bit.
func sameF32(id int, field string, got, want float32) error {
	if math.Float32bits(got) != math.Float32bits(want) {
		return fmt.Errorf("entity %d: %s = %v, want %v", id, field, got, want)
	}
	return nil
}

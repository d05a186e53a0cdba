package gen

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRPCFuncs generates a package with RPCs of every shape into a scratch
// module, with a test that calls each through a server and a client over
// the in-memory transport, and runs it.
func TestRPCFuncs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a test module")
	}
	dir := tempModule(t, map[string]string{})
	game := filepath.Join(dir, "game")
	if err := os.Mkdir(game, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, game, map[string]string{"spec.go": rpcE2ESpec, "rpc_test.go": rpcE2ETest})
	p, err := Load(Config{Dir: game})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(false); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(p.OutFile)
	if err != nil {
		t.Fatal(err)
	}
	// Arguments named like what the generated code uses are renamed.
	for _, sig := range []string{
		"func (p PlayerView) Fire(c *client.Conn, x, y float32, weapon Weapon, ok bool, label string, blob []byte, target replica.Ref, toArg int32, sArg int64, stateArg uint16, big uint64, f64 float64) error",
		"func HandlePlayerFire(s *replica.Server, fn func(c *replica.Conn, p Player, x, y float32, weapon Weapon, ok bool, label string, blob []byte, target replica.Ref, toArg int32, sArg int64, stateArg uint16, big uint64, f64 float64) error)",
		"func SendPlayerHit(s *replica.Server, to replica.RPCTarget, p Player, damage int16, cArg string, pArg replica.Ref, replicaXArg int8) error",
		"func OnPlayerHit(c *client.Conn, fn func(p PlayerView, damage int16, cArg string, pArg replica.Ref, replicaXArg int8)) (cancel func())",
		"func (p PlayerView) Aim(c *client.Conn, args Aim) error",
		"func HandlePlayerAim(s *replica.Server, fn func(c *replica.Conn, p Player, args Aim) error)",
		"func SendPlayerEffect(s *replica.Server, to replica.RPCTarget, p Player, args Effect) error",
		"func OnPlayerEffect(c *client.Conn, fn func(p PlayerView, args Effect)) (cancel func())",
		"func SendPlayerPing(s *replica.Server, to replica.RPCTarget, p Player) error",
		"func OnPlayerPing(c *client.Conn, fn func(p PlayerView)) (cancel func())",
		"func (p PlayerView) Move(c *client.Conn, x, y float32, seq uint32, on bool) error",
	} {
		if !strings.Contains(string(src), sig+" {") {
			t.Errorf("generated code lacks %s", sig)
		}
	}
	for _, args := range [][]string{{"vet", "./game"}, {"test", "-count=1", "./game"}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

const rpcE2ESpec = `package game

import "github.com/replicago/replica"

type Weapon uint8

//replica:class
type player struct {
	hp    int16
	shots int32
}

type vec struct{ x, y float32 }

// fire has scalar arguments of every kind, some named like the generated
// code's own identifiers.
//
//replica:rpc player client
type fire struct {
	x, y   float32 ` + "`replica:\"quant=1/64\"`" + `
	weapon Weapon
	ok     bool
	label  string
	blob   []byte
	target replica.Ref
	to     int32
	s      int64
	state  uint16
	big    uint64
	f64    float64
	old    int8 ` + "`replica:\"deprecated\"`" + `
}

//replica:rpc player client
type aim struct {
	at   vec
	tags []string
}

//replica:rpc player server
type hit struct {
	damage   int16
	c        string
	p        replica.Ref
	replicaX int8
}

//replica:rpc player server
type effect struct {
	at  vec
	ids map[uint32]string
}

//replica:rpc player server
type ping struct{}

//replica:rpc player client
type move struct {
	x, y float32 ` + "`replica:\"quant=1/64\"`" + `
	seq  uint32
	on   bool
}
`

const rpcE2ETest = `package game

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/replicago/replica/auth"
	"github.com/replicago/replica"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/transport"
)

type rig struct {
	t   *testing.T
	srv *replica.Server
	c   *client.Conn
	sp  Player // the server's player, owned by c
	cp  PlayerView // the client's replica of it
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t}
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r.srv, err = replica.NewServer(replica.Config{Schema: Schema(), Auth: auth.Anonymous{}, RPCRate: 10000, RPCBurst: 10000, OnJoin: func(c *replica.Conn) {
		p, err := SpawnPlayer(r.srv.Tracker())
		if err != nil {
			t.Error(err)
		}
		r.srv.SetOwner(p.Entity(), c)
		r.sp = p
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go r.srv.Serve(ctx, ln)
	t.Cleanup(func() { cancel(); r.srv.Close() })
	r.c, err = client.Dial(context.Background(), nw.Dialer(transport.Config{}), ln.Addr().String(), Schema(), client.DialConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.c.Close() })
	r.until(func() bool {
		if r.sp.Valid() {
			r.cp, _ = PlayerViewOf(r.c.Replica().Entity(r.sp.ID()))
		}
		return r.cp.Valid()
	})
	return r
}

// sync ticks and waits until the client has applied the tick and run the
// RPCs sent with it.
func (r *rig) sync() {
	r.t.Helper()
	r.srv.Tick()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for r.c.LastTick() != r.srv.TickNumber() {
		if _, err := r.c.Wait(ctx); err != nil {
			r.t.Fatal(err)
		}
	}
	r.c.Poll()
}

func (r *rig) until(cond func() bool) {
	r.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			r.t.Fatal("timed out")
		}
		r.sync()
		time.Sleep(time.Millisecond)
	}
}

func TestRPCs(t *testing.T) {
	r := newRig(t)
	var log []string
	add := func(format string, args ...any) { log = append(log, fmt.Sprintf(format, args...)) }
	HandlePlayerFire(r.srv, func(c *replica.Conn, p Player, x, y float32, weapon Weapon, ok bool, label string, blob []byte, target replica.Ref, toArg int32, sArg int64, stateArg uint16, big uint64, f64 float64) error {
		if p != r.sp || c == nil {
			t.Errorf("fire on %v from %v", p.ID(), c)
		}
		if label == "refuse" {
			return errors.New("refused")
		}
		p.SetShots(p.Shots() + 1)
		add("fire %g %g %d %v %q %v %d %d %d %d %d %g", x, y, weapon, ok, label, blob, target, toArg, sArg, stateArg, big, f64)
		return nil
	})
	HandlePlayerAim(r.srv, func(c *replica.Conn, p Player, args Aim) error {
		var tags []string
		for _, s := range args.Tags().All() {
			tags = append(tags, s)
		}
		add("aim %g %g %v", args.At().X(), args.At().Y(), tags)
		return nil
	})
	OnPlayerHit(r.c, func(p PlayerView, damage int16, cArg string, pArg replica.Ref, replicaXArg int8) {
		add("hit %v %d %q %d %d", p == r.cp, damage, cArg, pArg, replicaXArg)
	})
	cancelEffect := OnPlayerEffect(r.c, func(p PlayerView, args Effect) {
		v, _ := args.Ids().Get(3)
		add("effect %v %g %d %q", p == r.cp, args.At().X(), args.Ids().Len(), v)
	})
	OnPlayerPing(r.c, func(p PlayerView) { add("ping %v", p == r.cp) })
	check := func(want ...string) {
		t.Helper()
		if !reflect.DeepEqual(log, want) && !(len(log) == 0 && len(want) == 0) {
			t.Errorf("got\n\t%q\nwant\n\t%q", log, want)
		}
		log = nil
	}

	// Client → server, positional and with the argument struct.
	if err := r.cp.Fire(r.c, 1.5, -2.26, 3, true, "bang", []byte{1, 2}, replica.Ref(r.sp.ID()), -4, math.MinInt64, 65535, math.MaxUint64, 0.1); err != nil {
		t.Fatal(err)
	}
	if err := r.cp.Fire(r.c, 0, 0, 0, false, "refuse", nil, 0, 0, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	aim := NewAim()
	aim.At().SetX(7)
	aim.Tags().Push("a")
	aim.Tags().Push("b")
	if err := r.cp.Aim(r.c, aim); err != nil {
		t.Fatal(err)
	}
	if err := r.cp.Aim(r.c, Aim{}); err != nil { // a zero Aim sends zero arguments
		t.Fatal(err)
	}
	r.until(func() bool { return len(log) >= 3 })
	check(
		fmt.Sprintf("fire 1.5 -2.265625 3 true %q [1 2] %d -4 %d 65535 %d 0.1", "bang", r.sp.ID(), int64(math.MinInt64), uint64(math.MaxUint64)),
		"aim 7 0 [a b]",
		"aim 0 0 []",
	)
	if st := r.srv.Stats(); st.RPCs != 3 || st.RPCsRejected != 1 {
		t.Errorf("stats %+v: want 3 handled, 1 refused", st)
	}
	r.sync()
	if r.cp.Shots() != 1 {
		t.Errorf("shots = %d: the handler's change did not replicate", r.cp.Shots())
	}

	// Server → client.
	if err := SendPlayerHit(r.srv, replica.ToOwner, r.sp, -9, "c", replica.Ref(r.sp.ID()), -128); err != nil {
		t.Fatal(err)
	}
	eff := NewEffect()
	eff.At().SetX(2.5)
	eff.Ids().Put(3, "three")
	if err := SendPlayerEffect(r.srv, replica.ToObservers, r.sp, eff); err != nil {
		t.Fatal(err)
	}
	if err := SendPlayerPing(r.srv, replica.ToOwner, r.sp); err != nil {
		t.Fatal(err)
	}
	r.sync()
	check(
		fmt.Sprintf("hit true -9 %q %d -128", "c", r.sp.ID()),
		fmt.Sprintf("effect true 2.5 1 %q", "three"),
		"ping true",
	)
	cancelEffect()
	if err := SendPlayerEffect(r.srv, replica.ToObservers, r.sp, Effect{}); err != nil {
		t.Fatal(err)
	}
	r.sync()
	check()
}

// TestRPCHandlerAllocs checks that the generated handler adapter of an RPC
// with scalar arguments adds no allocation to the server's dispatch: a
// tick that runs n calls allocates about as much as one that runs none.
// (The runtime's own dispatch is measured by BenchmarkRPCDispatch.)
func TestRPCHandlerAllocs(t *testing.T) {
	r := newRig(t)
	calls := 0
	var sum uint32
	HandlePlayerMove(r.srv, func(c *replica.Conn, p Player, x, y float32, seq uint32, on bool) error {
		calls++
		sum += seq
		return nil
	})
	const n = 200
	// mallocs counts the allocations of one tick (testing.AllocsPerRun
	// would run a tick to warm up, and that tick would run the calls).
	mallocs := func() uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r.srv.Tick()
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	// measure returns the fewest allocations of a tick over a few tries,
	// each running n calls if send is set. A try in which the server had
	// not yet read every call does not count.
	measure := func(send bool) uint64 {
		best := uint64(math.MaxUint64)
		for try := 0; try < 10 && (try < 3 || best == math.MaxUint64); try++ {
			want := calls
			if send {
				want += n
				for range n {
					if err := r.cp.Move(r.c, 1.5, -2, 7, true); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Let the server's reader queue every call before the
			// measured tick runs them.
			time.Sleep(100 * time.Millisecond)
			m := mallocs()
			if calls == want {
				best = min(best, m)
				continue
			}
			r.until(func() bool { return calls == want })
		}
		if best == math.MaxUint64 {
			t.Fatal("no tick ran all the calls sent before it")
		}
		return best
	}
	base, with := measure(false), measure(true)
	if sum != uint32(calls)*7 {
		t.Errorf("the handler read seq wrong")
	}
	if per := (float64(with) - float64(base)) / n; per >= 0.5 {
		t.Errorf("a tick with %d calls allocates %d times, one without %d: %.2f per call, want none", n, with, base, per)
	}
}
`

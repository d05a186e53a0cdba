// Command w1page serves workload W1 (1000 wandering entities, package
// internal/workload/w1) on a replica.Server, with the browser page of
// package web, for the browser end-to-end test (ts/e2e/browser.mjs).
//
// It listens on loopback: the page and WebSocket (at /replica) on one TCP
// port, WebTransport on a UDP port with a development certificate whose
// hashes the page fetches. It runs -steps W1 steps at -hz, one per tick,
// then keeps ticking with no changes, so that a page that joins at any
// time converges to the final state. It prints one JSON line on stdout
// once it serves: {"url": "http://127.0.0.1:PORT/"}. GET /w1.json reports
// {"tick", "steps", "done", "hash"}: once done, hash is the FNV-1a 64 of the
// server's entities (their x, y and angle as float32 bits, then their hp,
// in ID order), as the page's stateHash(["x", "y", "angle", "hp"])
// computes it over its replica. It runs until interrupted or stdin closes.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/internal/arena"
	"github.com/replicago/replica/internal/web"
	"github.com/replicago/replica/internal/workload/w1"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
	"github.com/replicago/replica/wttransport"
)

func main() {
	steps := flag.Int("steps", 100, "W1 steps to run, one per tick")
	hz := flag.Int("hz", 20, "ticks per second")
	flag.Parse()
	if err := run(*steps, *hz); err != nil {
		log.Fatal("w1page: ", err)
	}
}

// status is /w1.json.
type status struct {
	Tick  uint64 `json:"tick"`
	Steps int    `json:"steps"`
	Done  bool   `json:"done"`
	Hash  string `json:"hash"`
}

func run(steps, hz int) error {
	srv, err := replica.NewServer(replica.Config{Schema: arena.Schema(), Auth: auth.Anonymous{}, TickRate: hz})
	if err != nil {
		return err
	}
	world := w1.New(w1.DefaultConfig())
	units := make([]arena.Unit, len(world.X))
	for i := range units {
		u, err := arena.SpawnUnit(srv.Tracker())
		if err != nil {
			return err
		}
		u.SetX(world.X[i])
		u.SetY(world.Y[i])
		u.SetAngle(world.Angle[i])
		u.SetHp(world.HP[i])
		u.SetName(world.Name[i])
		units[i] = u
	}

	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	host := hl.Addr().String()
	_, port, _ := net.SplitHostPort(host)
	quiet := log.New(io.Discard, "", 0)
	ws := wstransport.NewHandler(wstransport.Config{URL: "ws://" + host + "/replica", ErrorLog: quiet})
	certs := &wttransport.CertManager{}
	wt, err := wttransport.Listen("127.0.0.1:0", wttransport.Config{TLS: certs.TLSConfig(), CheckOrigin: web.LoopbackOrigin(port)})
	if err != nil {
		return err
	}
	page, err := web.Handler(web.Page{
		Title:           "W1",
		WebSocketURL:    "ws://" + host + "/replica",
		WebTransportURL: "https://" + wt.Addr().String() + wttransport.DefaultPath,
		Certs:           certs,
		Schema:          arena.Schema(),
		Token:           func() string { return "viewer" },
		World:           w1.DefaultConfig().W,
		MaxHP:           100,
	})
	if err != nil {
		return err
	}
	var (
		mu sync.Mutex
		st = status{Steps: steps}
	)
	mux := http.NewServeMux()
	mux.Handle("/replica", ws)
	mux.HandleFunc("GET /w1.json", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
	mux.Handle("/", page)
	go http.Serve(hl, mux)
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	for _, ln := range []transport.Listener{ws, wt} {
		go srv.Serve(ctx, ln)
	}
	json.NewEncoder(os.Stdout).Encode(map[string]string{"url": "http://" + host + "/"})
	go func() {
		io.Copy(io.Discard, os.Stdin) // the test ends: stdin closes
		cancel()
	}()

	t := time.NewTicker(time.Second / time.Duration(hz))
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			// Close every session with CloseGoingAway, and give the
			// close a moment to reach the pages before the process ends.
			srv.Close()
			time.Sleep(time.Second)
			return nil
		case <-t.C:
		}
		if n < steps {
			moved, hp := world.Step()
			for _, id := range moved {
				units[id].SetX(world.X[id])
				units[id].SetY(world.Y[id])
				units[id].SetAngle(world.Angle[id])
			}
			for _, id := range hp {
				units[id].SetHp(world.HP[id])
			}
		}
		srv.Tick()
		mu.Lock()
		st.Tick = srv.TickNumber()
		if n+1 >= steps && !st.Done {
			st.Done, st.Hash = true, stateHash(units)
		}
		mu.Unlock()
	}
}

// stateHash is FNV-1a 64 over the little-endian bytes of the units' x, y
// and angle (float32 bit patterns), then their hp, as the server holds
// them, read through the generated getters.
func stateHash(units []arena.Unit) string {
	var b []byte
	for _, get := range []func(arena.Unit) float32{arena.Unit.X, arena.Unit.Y, arena.Unit.Angle} {
		for _, u := range units {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(get(u)))
		}
	}
	for _, u := range units {
		b = binary.LittleEndian.AppendUint16(b, uint16(u.Hp()))
	}
	h := fnv.New64a()
	h.Write(b)
	return fmt.Sprintf("%016x", h.Sum64())
}

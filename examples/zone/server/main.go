// Command server is the zone example's game server: a 2000 × 2000 field
// with wandering monsters, where each player sees what is near its hero,
// bosses from farther away, and its party's heroes wherever they are.
//
//	go run ./examples/zone/server                  # serve on 127.0.0.1:7778
//	go run ./examples/zone/server -issue alice     # print a connect token for alice
package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/examples/zone/game"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

const size = 2000 // the field's side

func main() {
	addr := flag.String("addr", "127.0.0.1:7778", "address to serve WebSocket on")
	issue := flag.String("issue", "", "print a connect token for this user ID and exit")
	monsters := flag.Int("monsters", 400, "monsters in the field")
	seed := flag.Uint64("seed", 1, "where the monsters and heroes start")
	flag.Parse()

	key := []byte(os.Getenv("REPLICA_KEY"))
	if len(key) == 0 {
		key = []byte("zone example development key, not a secret")
	}
	tokens := &auth.HMAC{Keys: [][]byte{key}}
	if *issue != "" {
		token, err := tokens.Issue(auth.Identity{UserID: *issue, Expires: time.Now().Add(10 * time.Minute)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(hex.EncodeToString(token))
		return
	}

	rng := rand.New(rand.NewPCG(*seed, 2))
	heroes := map[*replica.Conn]game.Hero{}
	var srv *replica.Server
	var field *replica.Space
	var party *replica.Group
	srv, err := replica.NewServer(replica.Config{
		Schema: game.Schema(),
		Auth:   tokens,
		OnJoin: func(c *replica.Conn) {
			h, err := game.SpawnHero(srv.Tracker())
			if err != nil {
				c.Close(transport.CloseInternalError, "world full")
				return
			}
			h.SetName(c.UserID())
			h.SetHp(100)
			h.SetGold(50)
			h.SetX(rng.Float32() * size)
			h.SetY(rng.Float32() * size)
			// In the field, owned by c: c views the field from its hero
			// (the first entity with a position it owns), and sees the
			// hero's gold and emote wherever the hero is.
			srv.SetSpace(h.Entity(), field)
			srv.SetOwner(h.Entity(), c)
			srv.View(c, field)
			// The party's members see each other's heroes across the field.
			party.AddEntity(h.Entity())
			party.AddConn(c)
			heroes[c] = h
		},
		OnLeave: func(c *replica.Conn) {
			if h, ok := heroes[c]; ok {
				srv.Tracker().Destroy(h.Entity())
				delete(heroes, c)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	// An area of interest: a client sees what lies within 150 units of
	// its viewpoint, and keeps seeing it to 165 (no flicker at the edge).
	field, err = srv.NewSpace(replica.SpaceConfig{Name: "field", Radius: 150, Hysteresis: 15})
	if err != nil {
		log.Fatal(err)
	}
	party = srv.NewGroup("party")
	var herd []game.Monster
	for i := range *monsters {
		m, err := game.SpawnMonster(srv.Tracker())
		if err != nil {
			log.Fatal(err)
		}
		m.SetX(rng.Float32() * size)
		m.SetY(rng.Float32() * size)
		m.SetHp(50)
		srv.SetSpace(m.Entity(), field)
		if i%50 == 0 {
			m.SetBoss(true)
			srv.SetRadius(m.Entity(), 500) // a boss is seen from 500 units
			srv.SetPriority(m.Entity(), 4) // and goes first when a budget runs short
		}
		herd = append(herd, m)
	}
	game.HandleHeroWalk(srv, func(c *replica.Conn, h game.Hero, x, y float32) error {
		// A client's arguments are its own: numbers (NaN passes through
		// min and max), kept in the field.
		if bad := func(v float32) bool { return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) }; bad(x) || bad(y) {
			return errors.New("walk: x and y must be finite")
		}
		h.SetX(min(max(x, 0), size))
		h.SetY(min(max(y, 0), size))
		h.SetEmote(h.Emote() + 1) // a wave, seen only close by
		return nil
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ln, err := wstransport.Listen(*addr, wstransport.Config{})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving on %s: %d monsters in a %d × %d field", ln.Addr(), len(herd), size, size)
	go srv.Serve(ctx, ln)
	srv.Run(ctx, func(tick uint64) {
		// A tenth of the monsters take a step each tick: the others
		// cost nothing, whoever sees them.
		for range len(herd) / 10 {
			m := herd[rng.IntN(len(herd))]
			m.SetX(min(max(m.X()+rng.Float32()*8-4, 0), size))
			m.SetY(min(max(m.Y()+rng.Float32()*8-4, 0), size))
		}
	})
	// Tell the clients before exiting (Close would not wait for it).
	bye, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	srv.Shutdown(bye)
}

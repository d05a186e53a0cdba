// Command client is the zone example's player: it joins with a connect
// token, reports what its hero sees (monsters near it, bosses from
// farther, its party wherever they are), walks its hero across the field,
// reports again and leaves.
//
//	go run ./examples/zone/client -token $(go run ./examples/zone/server -issue alice)
package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/examples/zone/game"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7778", "the server's address")
	token := flag.String("token", "", "connect token, in hex (server -issue USER prints one)")
	toX := flag.Float64("x", 1000, "where to walk the hero: x")
	toY := flag.Float64("y", 1000, "where to walk the hero: y")
	stay := flag.Int("ticks", 40, "ticks to watch before walking, and again after")
	linger := flag.Int("linger", 0, "ticks to stay in the world after the last report")
	flag.Parse()
	if *token == "" {
		log.Fatal("-token is required: the server's -issue USER prints one")
	}
	tok, err := hex.DecodeString(*token)
	if err != nil {
		log.Fatalf("-token: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := client.Dial(ctx, wstransport.NewDialer(transport.Config{}), *addr, game.Schema(),
		client.DialConfig{Token: tok})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Entering the hero's view creates a monster on this client; leaving
	// it destroys it here only.
	entered, left := 0, 0
	game.OnMonsterCreate(c.Replica(), func(game.MonsterView) { entered++ })
	game.OnMonsterDestroy(c.Replica(), func(game.MonsterView) { left++ })

	var me game.HeroView
	game.OnHeroOwnership(c.Replica(), func(h game.HeroView, owned bool) {
		if owned {
			me = h
		}
	})
	wait := func(ticks int) {
		for range ticks {
			if _, err := c.Wait(ctx); err != nil {
				log.Fatalf("session ended: %v", err)
			}
		}
	}
	for !me.Valid() {
		wait(1)
	}
	wait(*stay)
	report("at start", c, me)
	if err := me.Walk(c, float32(*toX), float32(*toY)); err != nil {
		log.Fatal(err)
	}
	wait(*stay)
	report(fmt.Sprintf("after walking to (%.0f, %.0f)", *toX, *toY), c, me)
	log.Printf("monsters entered the view %d times and left it %d times", entered, left)
	wait(*linger)
	log.Print("leaving")
}

// report prints what the client holds: its hero, the monsters around it
// and the other heroes, with their emote where it is known (a field of
// level of detail, sent within 40 units).
func report(when string, c *client.Conn, me game.HeroView) {
	monsters, bosses := 0, 0
	var heroes []string
	for _, e := range c.Replica().Entities(nil) {
		if m, ok := game.MonsterViewOf(e); ok {
			monsters++
			if m.Boss() {
				bosses++
			}
		} else if h, ok := game.HeroViewOf(e); ok && !h.IsOwned() {
			// A level-of-detail field is known within its distance only.
			emote := "emote unknown (beyond 40)"
			if known, err := c.Replica().KnowsField(e, "emote"); err != nil {
				log.Fatal(err)
			} else if known {
				emote = fmt.Sprintf("emote %d", h.Emote())
			}
			heroes = append(heroes, fmt.Sprintf("%s at (%.0f, %.0f), %s", h.Name(), h.X(), h.Y(), emote))
		}
	}
	slices.Sort(heroes)
	log.Printf("%s: I am %s at (%.0f, %.0f), gold %d; I see %d monsters (%d bosses) and %d heroes: %s",
		when, me.Name(), me.X(), me.Y(), me.Gold(), monsters, bosses, len(heroes), strings.Join(heroes, ", "))
}

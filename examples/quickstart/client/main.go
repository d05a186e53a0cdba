// Command client is the quickstart's player: it joins the server with a
// connect token, finds the avatar it owns, fires a few shots and leaves.
//
//	go run ./examples/quickstart/client -token $(go run ./examples/quickstart/server -issue alice)
package main

import (
	"context"
	"encoding/hex"
	"flag"
	"log"
	"os"
	"os/signal"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/examples/quickstart/game"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7777", "the server's address")
	token := flag.String("token", "", "connect token, in hex (server -issue USER prints one)")
	shots := flag.Int("shots", 3, "shots to fire before leaving")
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
		log.Fatal(err) // a refusal says why: an expired token, a schema mismatch...
	}
	defer c.Close()

	// Callbacks run inside c.Wait, after each whole tick is applied.
	var me game.PlayerView
	var gold int32 // what me had when this client got it
	game.OnPlayerOwnership(c.Replica(), func(p game.PlayerView, owned bool) {
		if owned {
			me, gold = p, p.Gold()
			log.Printf("I am %s: hp %d, gold %d", p.Name(), p.Hp(), p.Gold())
		}
	})
	game.OnPlayerCreate(c.Replica(), func(p game.PlayerView) {
		if !p.IsOwned() {
			log.Printf("%s is here", p.Name())
		}
	})
	game.OnPlayerGoldChange(c.Replica(), func(p game.PlayerView, old, new int32) {
		log.Printf("gold %d -> %d", old, new)
	})

	for fired := 0; ; {
		if _, err := c.Wait(ctx); err != nil { // a tick arrived, or the session ended
			log.Fatalf("session ended: %v", err)
		}
		switch {
		case !me.Valid(): // not in the world yet
		case fired < *shots:
			if err := me.Fire(c, float32(10*fired), 20); err != nil {
				log.Fatal(err)
			}
			fired++
		case me.Gold() == gold-int32(fired): // every shot has been paid for
			log.Printf("fired %d shots, %d gold left; leaving", fired, me.Gold())
			return
		}
	}
}

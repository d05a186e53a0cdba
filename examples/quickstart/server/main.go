// Command server is the quickstart's game server: players join over
// WebSocket, each gets an avatar it owns, and firing costs gold.
//
//	go run ./examples/quickstart/server                 # serve on 127.0.0.1:7777
//	go run ./examples/quickstart/server -issue alice    # print a connect token for alice
package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/examples/quickstart/game"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7777", "address to serve WebSocket on")
	issue := flag.String("issue", "", "print a connect token for this user ID and exit")
	flag.Parse()

	// Tokens are signed with a secret the server shares with the game's
	// backend, which issues them to players after their login.
	key := []byte(os.Getenv("REPLICA_KEY"))
	if len(key) == 0 {
		key = []byte("quickstart development key, not a secret")
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

	avatars := map[*replica.Conn]game.Player{}
	var srv *replica.Server
	srv, err := replica.NewServer(replica.Config{
		Schema: game.Schema(),
		Auth:   tokens,
		// Joins, leaves and refused tokens, with why; without a Logger
		// the server logs only warnings and errors.
		Logger: slog.Default(),
		// OnJoin and OnLeave run on the tick goroutine, like the game loop.
		OnJoin: func(c *replica.Conn) {
			p, err := game.SpawnPlayer(srv.Tracker())
			if err != nil {
				c.Close(transport.CloseInternalError, "world full")
				return
			}
			p.SetName(c.UserID())
			p.SetHp(100)
			p.SetGold(500)
			srv.SetOwner(p.Entity(), c) // c sees p's gold and may call p.Fire
			avatars[c] = p
		},
		OnLeave: func(c *replica.Conn) {
			srv.Tracker().Destroy(avatars[c].Entity()) // nil if OnJoin failed: nothing to do
			delete(avatars, c)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Register RPC handlers before serving.
	game.HandlePlayerFire(srv, func(c *replica.Conn, p game.Player, x, y float32) error {
		if p.Gold() < 1 {
			// Refused: counted in srv.Stats().RPCsRejected, logged at
			// Debug (a refusal is the game's rule, not the server's error).
			return fmt.Errorf("%s is out of gold", p.Name())
		}
		p.SetGold(p.Gold() - 1) // replicates, to p's owner only
		p.SetX(x)
		p.SetY(y)
		return nil
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ln, err := wstransport.Listen(*addr, wstransport.Config{})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving on %s", ln.Addr())
	go srv.Serve(ctx, ln)
	srv.Run(ctx, func(tick uint64) {
		if tick%20 == 0 { // once a second at the default 20 ticks per second
			for _, p := range avatars {
				p.SetHp(min(p.Hp()+1, 100))
			}
		}
	})
	// Close the clients' sessions and wait until they are told, at most
	// three seconds: Close would not wait, and exiting would cut them off.
	bye, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	srv.Shutdown(bye)
}

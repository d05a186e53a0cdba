package crosslang_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/mutate"
	v1 "github.com/replicago/replica/internal/testschema/v1"
	v2 "github.com/replicago/replica/internal/testschema/v2"
	"github.com/replicago/replica/internal/tsnode"
	"github.com/replicago/replica/replay"
	"github.com/replicago/replica/schema"
	"github.com/replicago/replica/session"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
)

// TestReplayCrossLanguage records random histories of the test schemas,
// plays them back with seeks, and feeds what the player sends, its
// re-encoded full states included, to a Go replica and to the TypeScript
// runtime: both hold the same state after every tick.
func TestReplayCrossLanguage(t *testing.T) {
	mutate.ValidUTF8Keys = true
	proc := startNode(t, 1)[0]
	rapid.Check(t, func(rt *rapid.T) {
		file := recordHistory(t, rt)
		playToBoth(t, rt, file, v1.Schema(), proc)
	})
}

// recordHistory records random changes on a v2 server, ticking it by hand.
func recordHistory(t *testing.T, rt *rapid.T) []byte {
	sc := v2.Schema()
	srv, err := replica.NewServer(replica.Config{Schema: sc, Auth: auth.Anonymous{}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	var out bytes.Buffer
	rec, err := replay.Record(ctx, nw.Dialer(transport.Config{}), ln.Addr().String(), sc, &out,
		replay.RecordConfig{Keyframe: rapid.IntRange(1, 5).Draw(rt, "k")})
	if err != nil {
		t.Fatal(err)
	}
	var ents []*state.Entity
	caught := func() {
		for deadline := time.Now().Add(20 * time.Second); rec.LastTick() != srv.TickNumber(); time.Sleep(100 * time.Microsecond) {
			if time.Now().After(deadline) || rec.Err() != nil {
				t.Fatalf("recorder at tick %d, server %d: %v", rec.LastTick(), srv.TickNumber(), rec.Err())
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); len(srv.Conns()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the recorder did not join")
		}
		srv.Tick()
	}
	caught()
	for range rapid.IntRange(1, 20).Draw(rt, "ticks") {
		for range rapid.IntRange(0, 4).Draw(rt, "changes") {
			switch op := rapid.IntRange(0, 7).Draw(rt, "op"); {
			case op == 0 || len(ents) == 0:
				c := sc.Classes[rapid.IntRange(0, len(sc.Classes)-1).Draw(rt, "class")]
				e, err := srv.Tracker().Spawn(c)
				if err != nil {
					t.Fatal(err)
				}
				mutate.Struct(rt, e.Handle(), c, 0)
				ents = append(ents, e)
			case op == 1:
				j := rapid.IntRange(0, len(ents)-1).Draw(rt, "destroy")
				srv.Tracker().Destroy(ents[j])
				ents = slices.Delete(ents, j, j+1)
			default:
				e := ents[rapid.IntRange(0, len(ents)-1).Draw(rt, "entity")]
				mutate.Struct(rt, e.Handle(), e.Class(), 0)
			}
		}
		srv.Tick()
		caught()
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// playToBoth serves file to a raw session of schema local and applies
// every tick the player sends to a Go replica and to proc.
func playToBoth(t *testing.T, rt *rapid.T, file []byte, local *schema.Schema, proc *tsnode.Proc) {
	rd, err := replay.Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := replay.NewPlayer(rd, replay.PlayerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	nw := transport.NewMemNetwork()
	ln, err := nw.Listen("", transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go p.Serve(ctx, ln)
	tc, err := nw.Dialer(transport.Config{}).Dial(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close(transport.CloseNormal, "")
	desc := local.AppendDescriptor(nil)
	tc.Send(session.AppendHello(nil, &session.Hello{Version: session.ProtocolVersion, Descriptor: desc}))
	msg, err := tc.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := session.Parse(msg)
	if err != nil {
		t.Fatal(err)
	}
	wel, ok := m.(*session.Welcome)
	if !ok {
		t.Fatalf("got %T, want WELCOME", m)
	}
	remote, err := schema.DecodeDescriptor(wel.Descriptor)
	if err != nil {
		t.Fatal(err)
	}
	goc, err := client.New(local, client.Config{Remote: remote})
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Init(desc, wel.Descriptor); err != nil {
		t.Fatal(err)
	}
	// next applies the next tick the player sent to both replicas.
	next := func(what string) {
		for {
			msg, err := tc.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m, err := session.Parse(msg)
			if err != nil {
				t.Fatal(err)
			}
			switch m := m.(type) {
			case *session.Resync:
				if err := goc.Reset(remote); err != nil {
					t.Fatal(err)
				}
				if err := proc.Init(desc, wel.Descriptor); err != nil {
					t.Fatal(err)
				}
				continue
			case *session.Ping:
				continue
			case *session.Tick:
				segs := make([][]byte, m.Segments)
				for i := range segs {
					if segs[i], err = tc.Receive(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if err := goc.Apply(segs...); err != nil {
					t.Fatalf("%s: tick %d: Go: %v", what, m.Tick, err)
				}
				if _, err := proc.Tick(nil, nil, nil, segs...); err != nil {
					t.Fatalf("%s: tick %d: TypeScript: %v", what, m.Tick, err)
				}
				want := tsnode.Canonical(goc.Entities(nil), (*state.Entity).Owned)
				got, err := proc.Dump()
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("%s: tick %d: the TypeScript replica differs from the Go one:\n%s", what, m.Tick, diff(got, want))
				}
				return
			default:
				t.Fatalf("%s: unexpected %T", what, m)
			}
		}
	}
	next("join")
	for p.Step() == nil {
		next("step")
	}
	for range 3 {
		if err := p.Seek(rapid.Uint64Range(rd.FirstTick(), rd.LastTick()).Draw(rt, "seek")); err != nil {
			t.Fatal(err)
		}
		next("seek")
	}
}

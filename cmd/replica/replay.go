package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/replicago/replica/internal/web"
	"github.com/replicago/replica/replay"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

const replayUsage = `usage: replica replay [-addr A] [-http A] [-speed X] [-loop] FILE

Serves a recording (replica demo -record FILE, or a replay.Recorder) to
clients as if they were spectators of the recorded server: each client
gets the full state at the playhead when it joins, then the recorded
ticks at the recorded rate times -speed. Go clients dial the WebSocket
address it prints (client.Dial with wstransport) with the recorded
schema or a compatible one; -http serves the browser page, which watches
the whole world.

At the end of the recording the playhead stays on the last tick (-loop
starts over). Commands on standard input, one a line:

  seek TICK    jump to TICK: every client gets the full state there
  pause        stop the playhead
  play         resume
  speed X      play X times the recorded rate

Flags:
`

// replayConfig is what replica replay's flags select.
type replayConfig struct {
	file   string
	addr   string  // WebSocket listener for Go clients
	http   string  // the browser page and WebSocket for it; empty for none
	speed  float64 // times the recorded rate
	loop   bool
	world  float64 // the page's world side
	maxHP  int
	listen chan<- string // if set, receives the WebSocket URL once serving (tests)
}

func runReplay(args []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	cfg, err := parseReplayFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	return serveReplay(ctx, cfg, os.Stdin, os.Stdout)
}

func parseReplayFlags(args []string, stderr io.Writer) (replayConfig, error) {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), replayUsage)
		fs.PrintDefaults()
	}
	var cfg replayConfig
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:0", "TCP address of the WebSocket listener for Go clients")
	fs.StringVar(&cfg.http, "http", "127.0.0.1:0", "TCP address of the browser page (and of WebSocket for it, at /replica); empty for no page")
	fs.Float64Var(&cfg.speed, "speed", 1, "playback speed, times the recorded tick rate")
	fs.BoolVar(&cfg.loop, "loop", false, "start over at the end of the recording")
	fs.Float64Var(&cfg.world, "world", 2000, "the page's world side, in the units of the entities' x and y (the demo's arena is 2000)")
	fs.IntVar(&cfg.maxHP, "max-hp", 100, "the page's largest hp, for colours and bars")
	if err := parseFlags(fs, args); err != nil {
		return cfg, err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return cfg, errors.New("replay: give one recording file (flags go before it)")
	}
	if !(cfg.speed > 0) || cfg.speed > 1e6 {
		return cfg, fmt.Errorf("replay: -speed must be more than 0, got %v", cfg.speed)
	}
	cfg.file = fs.Arg(0)
	return cfg, nil
}

// serveReplay serves cfg.file until ctx is done, reading commands from in
// and writing what it does to out.
func serveReplay(ctx context.Context, cfg replayConfig, in io.Reader, out io.Writer) error {
	f, err := os.Open(cfg.file)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	rd, err := replay.Open(f, st.Size())
	if err != nil {
		return err
	}
	// Its warnings (spectators admitted on an address others can reach)
	// go where the command writes; refusals stay out of the way.
	logger := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p, err := replay.NewPlayer(rd, replay.PlayerConfig{Logger: logger})
	if err != nil {
		return err
	}
	defer p.Close()
	if err := p.SetSpeed(cfg.speed); err != nil {
		return err
	}
	h := rd.Header()
	fmt.Fprintf(out, "replica replay: %s, ticks %d to %d at %d Hz, a keyframe every %d ticks\n",
		cfg.file, rd.FirstTick(), rd.LastTick(), h.TickRate, h.Keyframe)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	serve := func(ln transport.Listener) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Serve(ctx, ln)
		}()
	}
	quiet := log.New(io.Discard, "", 0)
	wsln, err := wstransport.Listen(cfg.addr, wstransport.Config{ErrorLog: quiet})
	if err != nil {
		return fmt.Errorf("WebSocket listener: %w", err)
	}
	defer wsln.Close()
	serve(wsln)
	fmt.Fprintf(out, "Go clients: %s\n", wsln.Addr())
	if cfg.http != "" {
		hl, err := net.Listen("tcp", cfg.http)
		if err != nil {
			return fmt.Errorf("HTTP listener: %w", err)
		}
		host := hl.Addr().String()
		ws := wstransport.NewHandler(wstransport.Config{URL: "ws://" + host + "/replica", ErrorLog: quiet})
		serve(ws)
		page, err := web.Handler(web.Page{Title: "replay of " + cfg.file, WebSocketURL: "ws://" + host + "/replica",
			Schema: p.Schema(), Token: func() string { return "spectator" }, World: cfg.world, MaxHP: cfg.maxHP})
		if err != nil {
			hl.Close()
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/replica", ws)
		mux.Handle("/", page)
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, ErrorLog: quiet}
		go hs.Serve(hl)
		defer hs.Close()
		fmt.Fprintf(out, "watch in a browser:\nhttp://%s/\n", host)
	}
	if cfg.listen != nil {
		cfg.listen <- wsln.Addr().String()
	}
	go commands(ctx, p, in, out)
	for {
		err := p.Run(ctx)
		switch {
		case err == io.EOF && cfg.loop:
			if err := p.Seek(rd.FirstTick()); err != nil {
				return err
			}
			continue
		case err == io.EOF:
			fmt.Fprintf(out, "end of the recording at tick %d (seek, or Ctrl-C to stop)\n", p.Tick())
			// Wait for a seek back into the recording, or the end.
			for p.Tick() == rd.LastTick() {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(100 * time.Millisecond):
				}
			}
			continue
		case ctx.Err() != nil:
			return nil
		}
		return err
	}
}

// commands applies the commands read from in to p.
func commands(ctx context.Context, p *replay.Player, in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	for sc.Scan() && ctx.Err() == nil {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		var err error
		switch {
		case f[0] == "pause" && len(f) == 1:
			p.Pause()
		case f[0] == "play" && len(f) == 1:
			p.Resume()
		case f[0] == "seek" && len(f) == 2:
			var t uint64
			if t, err = strconv.ParseUint(f[1], 10, 64); err == nil {
				err = p.Seek(t)
			}
		case f[0] == "speed" && len(f) == 2:
			var x float64
			if x, err = strconv.ParseFloat(f[1], 64); err == nil {
				err = p.SetSpeed(x)
			}
		default:
			err = errors.New("commands: seek TICK, pause, play, speed X")
		}
		if err != nil {
			fmt.Fprintln(out, err)
		} else {
			fmt.Fprintf(out, "at tick %d\n", p.Tick())
		}
	}
}

package bench

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/codec"
	"github.com/replicago/replica/state"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wstransport"
)

// JoinStormConfig selects a run of the joinstorm scenario.
type JoinStormConfig struct {
	Transport string  // "ws" or "quic"
	Clients   int     // connections; default 1000
	Rate      float64 // dials started per second; default 800
	Hz        int     // tick rate; default 20
	After     int     // ticks measured once every client has its full state; default 20
	// ClientsCommand, if set, runs the clients in a child process: the
	// command (its path and first arguments) given -addr, -clients and
	// -rate, which runs RunStormClients (ws only). The clients then share
	// neither the server's scheduler nor its heap, as over a network.
	ClientsCommand []string
}

// JoinStormResult is the outcome of a joinstorm run. Times are in
// microseconds.
type JoinStormResult struct {
	Scenario  string  `json:"scenario"` // "joinstorm"
	Transport string  `json:"transport"`
	Clients   int     `json:"clients"`
	Rate      float64 `json:"rate"` // dials started per second
	Entities  int     `json:"entities"`
	Hz        int     `json:"hz"`
	// StormTicks are the ticks from the first dial until the server has
	// admitted every client, and StormSeconds their wall time.
	StormTicks   int     `json:"storm_ticks"`
	StormSeconds float64 `json:"storm_seconds"`
	// JoinsPerSecond is the clients admitted over StormSeconds: below
	// Rate when the handshakes cannot keep up, on either side.
	JoinsPerSecond float64 `json:"joins_per_second"`
	// AchievedHz is the storm's ticks per second of wall time: below Hz
	// when ticks took longer than their period.
	AchievedHz float64 `json:"achieved_hz"`
	// CPUUtilization is the CPU time the process used during the storm,
	// clients and their handshakes included, over GOMAXPROCS × wall time
	// (Linux only): near 1, tick times include waiting for a CPU.
	CPUUtilization float64 `json:"cpu_utilization"`
	// ServerUSPerTick times Server.Tick during the storm: admitting the
	// joiners, encoding the full state and the tick, and queueing them.
	ServerUSPerTick Percentiles `json:"server_us_per_tick"`
	// ServerCPUUSPerTick is the CPU time of the same ticks (Linux only):
	// the server's own work, without the time the tick goroutine waited
	// for a CPU. The clients run in this process: their goroutines, a
	// thousand decoding the full state, and the collection of their
	// replicas (a full world each) compete with the tick for the CPUs.
	ServerCPUUSPerTick Percentiles `json:"server_cpu_us_per_tick"`
	// AfterUSPerTick times Server.Tick for the After ticks that follow,
	// once every client has applied its full state.
	AfterUSPerTick Percentiles `json:"after_us_per_tick"`
	// JoinLatencyUS is, per client, the time from the start of its dial
	// to its applying the full state: handshake, waiting to be admitted,
	// the full state's transfer and decoding.
	JoinLatencyUS Percentiles `json:"join_latency_us"`
	// ClientsProcess reports that the clients ran in a child process.
	ClientsProcess bool `json:"clients_process"`
	Failed         int  `json:"clients_failed"`  // dials that failed
	Dropped        int  `json:"clients_dropped"` // connections that closed before the end
	// Verified reports that every client reached the last tick with a
	// replica equal to the server's entities.
	Verified bool `json:"verified"`
}

// RunJoinStorm runs the joinstorm scenario: the server of the clients
// scenario, ticking the W1 world, while cfg.Clients clients dial it at
// cfg.Rate a second, each then applying ticks on a goroutine of its own.
// It measures the server's ticks while the clients join, and their join
// latency.
func RunJoinStorm(cfg JoinStormConfig) (*JoinStormResult, error) {
	if cfg.Transport != "ws" && cfg.Transport != "quic" {
		return nil, fmt.Errorf("bench: transport %q: want ws or quic", cfg.Transport)
	}
	if cfg.ClientsCommand != nil && cfg.Transport != "ws" {
		return nil, fmt.Errorf("bench: clients in a child process dial over ws only, not %s", cfg.Transport)
	}
	if cfg.Clients <= 0 {
		cfg.Clients = 1000
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 800
	}
	if cfg.Hz <= 0 {
		cfg.Hz = 20
	}
	if cfg.After <= 0 {
		cfg.After = 20
	}
	res := &JoinStormResult{Scenario: "joinstorm", Transport: cfg.Transport, Clients: cfg.Clients, Rate: cfg.Rate, Hz: cfg.Hz,
		ClientsProcess: cfg.ClientsCommand != nil}
	srv, s, err := newW1Served(cfg.Hz)
	if err != nil {
		return nil, err
	}
	res.Entities = len(s.units)
	sv, err := serve(srv, cfg.Transport)
	if err != nil {
		return nil, err
	}
	defer sv.stop()

	// The storm: the clients dial on schedule, and play once dialed.
	t := time.NewTicker(time.Second / time.Duration(cfg.Hz))
	defer t.Stop()
	start := time.Now()
	var js joiners
	if cfg.ClientsCommand != nil {
		js, err = startChildJoiners(cfg.ClientsCommand, sv.ln.Addr().String(), cfg.Clients, cfg.Rate)
		if err != nil {
			return nil, err
		}
	} else {
		js = startJoiners(sv.dial, sv.ln.Addr().String(), cfg.Clients, cfg.Rate)
	}
	defer js.close()
	// The tick goroutine keeps its thread, whose CPU time is then the
	// tick's own.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var serverUS, cpuUS []float64
	cpu0, cpuOK := cpuSeconds()
	deadline := start.Add(time.Minute + time.Duration(float64(cfg.Clients)/cfg.Rate*float64(time.Second)))
	for {
		failed, _ := js.failed()
		if len(srv.Conns())+failed >= cfg.Clients {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: only %d of %d clients joined, %d failed", len(srv.Conns()), cfg.Clients, failed)
		}
		_, server, cpu := s.tickServer(t, srv)
		serverUS = append(serverUS, float64(server.Nanoseconds())/1e3)
		cpuUS = append(cpuUS, float64(cpu.Nanoseconds())/1e3)
	}
	res.StormSeconds = time.Since(start).Seconds()
	res.StormTicks = len(serverUS)
	res.JoinsPerSecond = float64(len(srv.Conns())) / res.StormSeconds
	res.AchievedHz = float64(res.StormTicks) / res.StormSeconds
	if cpu1, ok := cpuSeconds(); ok && cpuOK {
		res.CPUUtilization = (cpu1 - cpu0) / res.StormSeconds / float64(runtime.GOMAXPROCS(0))
	}
	res.ServerUSPerTick = percentiles(serverUS)
	res.ServerCPUUSPerTick = percentiles(cpuUS)

	// Once every dial has returned (each client has joined or failed),
	// let the clients apply their full states, then tick on.
	for {
		failed, done := js.failed()
		if done {
			res.Failed = failed
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: the dials have not returned")
		}
		time.Sleep(time.Millisecond)
	}
	if err := js.caughtUp(srv.TickNumber()); err != nil {
		return nil, err
	}
	afterUS := make([]float64, 0, cfg.After)
	for range cfg.After {
		_, server, _ := s.tickServer(t, srv)
		afterUS = append(afterUS, float64(server.Nanoseconds())/1e3)
	}
	res.AfterUSPerTick = percentiles(afterUS)
	res.Dropped = cfg.Clients - res.Failed - len(srv.Conns())
	verified, joinUS, err := js.verify(srv)
	if err != nil {
		return nil, err
	}
	res.Verified = verified && res.Failed == 0 && res.Dropped == 0
	res.JoinLatencyUS = percentiles(joinUS)
	return res, nil
}

// joiners are the clients of a join storm, in this process or in a child
// process.
type joiners interface {
	// failed returns the number of dials that failed so far, and whether
	// every dial has returned.
	failed() (n int, done bool)
	// caughtUp waits until every client has applied tick.
	caughtUp(tick uint64) error
	// verify lets every client apply the server's last tick, ends them
	// and the server, and reports whether each one's replica equals the
	// server's entities, with the join latencies of those that joined:
	// from the start of the dial to the full state applied.
	verify(srv *replica.Server) (ok bool, joinUS []float64, err error)
	close()
}

// localJoiners are the clients of a join storm in this process.
type localJoiners struct {
	clients           []*benchClient
	dialing, playing  sync.WaitGroup
	failures, returns atomic.Int64 // dials that failed; that returned
	abandon           func()
}

// startJoiners dials n clients at rate a second, on schedule whatever
// the earlier dials became; each plays on its goroutine once dialed.
func startJoiners(d transport.Dialer, addr string, n int, rate float64) *localJoiners {
	js := &localJoiners{clients: make([]*benchClient, n)}
	for i := range js.clients {
		js.clients[i] = &benchClient{}
	}
	ctx, abandon := context.WithCancel(context.Background())
	js.abandon = abandon
	never := new(atomic.Uint64) // no warm-up to end: the clients count no bytes
	never.Store(1 << 62)
	js.dialing.Add(n)
	js.playing.Add(n)
	start := time.Now()
	go func() {
		for i, c := range js.clients {
			time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
			go func() {
				err := c.dial(ctx, d, addr)
				if err != nil {
					js.failures.Add(1)
				}
				js.returns.Add(1)
				js.dialing.Done()
				defer js.playing.Done()
				if err != nil {
					return
				}
				c.play(ctx, never)
			}()
		}
	}()
	return js
}

func (js *localJoiners) failed() (int, bool) {
	done := js.returns.Load() == int64(len(js.clients))
	return int(js.failures.Load()), done
}

func (js *localJoiners) caughtUp(tick uint64) error { return caughtUp(js.clients, tick, time.Minute) }

func (js *localJoiners) verify(srv *replica.Server) (bool, []float64, error) {
	ok := verify(srv, js.clients, &js.playing, js.abandon)
	return ok, js.joinLatencies(), nil
}

func (js *localJoiners) joinLatencies() []float64 {
	var us []float64
	for _, c := range js.clients {
		if !c.applied.IsZero() {
			us = append(us, float64(c.applied.Sub(c.dialed).Nanoseconds())/1e3)
		}
	}
	return us
}

func (js *localJoiners) close() {
	js.abandon()
	js.dialing.Wait()
	for _, c := range js.clients {
		if c.conn != nil {
			c.conn.Close()
		}
	}
}

// RunStormClients runs the clients of a join storm for RunJoinStorm in a
// child process: n clients dial addr over WebSocket at rate a second and
// play. It writes "dialed <failed>" to out once every dial has returned,
// and then serves the requests read from in, one a line:
//   - "tick <n>": answers "at <n>" once every client has applied tick n;
//   - "verify <tick> <digest>": lets the clients apply that last tick,
//     ends them and answers, in one line of JSON, whether each one's
//     replica has the digest (see digest) and the join latencies.
func RunStormClients(addr string, n int, rate float64, in io.Reader, out io.Writer) error {
	js := startJoiners(wstransport.NewDialer(transport.Config{}), addr, n, rate)
	defer js.close()
	for {
		if failed, done := js.failed(); done {
			fmt.Fprintf(out, "dialed %d\n", failed)
			break
		}
		time.Sleep(time.Millisecond)
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var (
			req    string
			tick   uint64
			digest string
		)
		fmt.Sscan(sc.Text(), &req, &tick, &digest)
		switch req {
		case "tick":
			if err := js.caughtUp(tick); err != nil {
				fmt.Fprintf(out, "error %v\n", err)
				continue
			}
			fmt.Fprintf(out, "at %d\n", tick)
		case "verify":
			caughtUp(js.clients, tick, 30*time.Second) // the comparison reports those that did not
			for _, c := range js.clients {
				if c.conn != nil {
					c.conn.Close()
				}
			}
			waitPlaying(&js.playing, js.abandon)
			res := stormVerdict{Verified: true, JoinUS: js.joinLatencies()}
			for i, c := range js.clients {
				switch {
				case c.conn == nil:
					res.Why = fmt.Sprintf("client %d has no connection", i)
				case c.conn.LastTick() != tick:
					res.Why = fmt.Sprintf("client %d is at tick %d, not %d", i, c.conn.LastTick(), tick)
				case stateDigest(c.conn.Replica().Entities(nil)) != digest:
					res.Why = fmt.Sprintf("client %d's replica differs from the server's state", i)
				default:
					continue
				}
				res.Verified = false
				break
			}
			return json.NewEncoder(out).Encode(res)
		default:
			return fmt.Errorf("bench: storm clients: unknown request %q", sc.Text())
		}
	}
	return sc.Err()
}

// stormVerdict is what RunStormClients answers to verify.
type stormVerdict struct {
	Verified bool      `json:"verified"`
	Why      string    `json:"why,omitempty"` // the first client that failed, and how
	JoinUS   []float64 `json:"join_us"`
}

// stateDigest digests the full state of ents, in slot order: equal
// digests, equal values.
func stateDigest(ents []*state.Entity) string {
	var enc codec.Encoder
	sum := sha256.Sum256(enc.Full(nil, ents, codec.PartAll))
	return hex.EncodeToString(sum[:])
}

// childJoiners are the clients of a join storm in a child process, which
// runs RunStormClients.
type childJoiners struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	lines   chan string
	nfailed int
	dialed  bool
}

func startChildJoiners(command []string, addr string, n int, rate float64) (*childJoiners, error) {
	args := append(slices.Clone(command[1:]), "-addr", addr, "-clients", strconv.Itoa(n), "-rate", strconv.FormatFloat(rate, 'g', -1, 64))
	cmd := exec.Command(command[0], args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting the storm's clients: %w", err)
	}
	js := &childJoiners{cmd: cmd, in: in, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20) // the join latencies
		for sc.Scan() {
			js.lines <- sc.Text()
		}
		close(js.lines)
	}()
	return js, nil
}

// line returns the child's next line.
func (js *childJoiners) line(timeout time.Duration) (string, error) {
	select {
	case l, ok := <-js.lines:
		if !ok {
			return "", errors.New("bench: the storm's clients exited")
		}
		return l, nil
	case <-time.After(timeout):
		return "", errors.New("bench: the storm's clients did not answer")
	}
}

func (js *childJoiners) failed() (int, bool) {
	if !js.dialed {
		select {
		case l := <-js.lines:
			_, err := fmt.Sscanf(l, "dialed %d", &js.nfailed)
			js.dialed = err == nil
		default:
		}
	}
	return js.nfailed, js.dialed
}

func (js *childJoiners) caughtUp(tick uint64) error {
	fmt.Fprintf(js.in, "tick %d\n", tick)
	l, err := js.line(2 * time.Minute)
	if err == nil && l != fmt.Sprint("at ", tick) {
		err = fmt.Errorf("bench: the storm's clients: %s", l)
	}
	return err
}

func (js *childJoiners) verify(srv *replica.Server) (bool, []float64, error) {
	last := srv.TickNumber()
	fmt.Fprintf(js.in, "verify %d %s\n", last, stateDigest(srv.Tracker().AppendEntities(nil)))
	l, err := js.line(2 * time.Minute)
	srv.Close()
	if err != nil {
		return false, nil, err
	}
	var res stormVerdict
	if err := json.Unmarshal([]byte(l), &res); err != nil {
		return false, nil, fmt.Errorf("bench: the storm's clients: %s", l)
	}
	if !res.Verified {
		fmt.Fprintf(os.Stderr, "bench: the storm's clients do not verify: %s\n", res.Why)
	}
	return res.Verified, res.JoinUS, nil
}

func (js *childJoiners) close() {
	js.in.Close()
	exited := make(chan struct{})
	go func() { js.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		js.cmd.Process.Kill()
		<-exited
	}
}

package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// JoinStormConfig selects a run of the joinstorm scenario.
type JoinStormConfig struct {
	Transport string  // "ws" or "quic"
	Clients   int     // connections; default 1000
	Rate      float64 // dials started per second; default 800
	Hz        int     // tick rate; default 20
	After     int     // ticks measured once every client has its full state; default 20
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
	Failed        int         `json:"clients_failed"`  // dials that failed
	Dropped       int         `json:"clients_dropped"` // connections that closed before the end
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
	res := &JoinStormResult{Scenario: "joinstorm", Transport: cfg.Transport, Clients: cfg.Clients, Rate: cfg.Rate, Hz: cfg.Hz}
	srv, s, err := newW1Served(cfg.Hz)
	if err != nil {
		return nil, err
	}
	res.Entities = len(s.units)
	sv, err := serve(srv, cfg.Transport)
	if err != nil {
		return nil, err
	}
	clients := make([]*benchClient, cfg.Clients)
	for i := range clients {
		clients[i] = &benchClient{}
	}
	var (
		dialing, playing sync.WaitGroup
		failed           atomic.Int64
	)
	defer func() {
		sv.stop()
		dialing.Wait()
		for _, c := range clients {
			if c.conn != nil {
				c.conn.Close()
			}
		}
	}()
	ctx, abandon := context.WithCancel(context.Background())
	defer abandon()
	var never atomic.Uint64 // no warm-up to end: the clients count no bytes
	never.Store(1 << 62)

	// The storm: the dials start on schedule, whatever the ones before
	// became; each client plays once dialed.
	t := time.NewTicker(time.Second / time.Duration(cfg.Hz))
	defer t.Stop()
	start := time.Now()
	dialing.Add(len(clients))
	playing.Add(len(clients))
	go func() {
		for i, c := range clients {
			time.Sleep(time.Until(start.Add(time.Duration(float64(i) / cfg.Rate * float64(time.Second)))))
			go func() {
				err := c.dial(ctx, sv.dial, sv.ln.Addr().String())
				dialing.Done()
				defer playing.Done()
				if err != nil {
					failed.Add(1)
					return
				}
				c.play(ctx, &never)
			}()
		}
	}()
	// The tick goroutine keeps its thread, whose CPU time is then the
	// tick's own.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var serverUS, cpuUS []float64
	cpu0, cpuOK := cpuSeconds()
	for deadline := start.Add(time.Minute + time.Duration(float64(cfg.Clients)/cfg.Rate*float64(time.Second))); len(srv.Conns())+int(failed.Load()) < cfg.Clients; {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: only %d of %d clients joined, %d failed", len(srv.Conns()), cfg.Clients, failed.Load())
		}
		_, server, cpu := s.tickServer(t, srv)
		serverUS = append(serverUS, float64(server.Nanoseconds())/1e3)
		cpuUS = append(cpuUS, float64(cpu.Nanoseconds())/1e3)
	}
	res.StormSeconds = time.Since(start).Seconds()
	res.StormTicks = len(serverUS)
	res.AchievedHz = float64(res.StormTicks) / res.StormSeconds
	if cpu1, ok := cpuSeconds(); ok && cpuOK {
		res.CPUUtilization = (cpu1 - cpu0) / res.StormSeconds / float64(runtime.GOMAXPROCS(0))
	}
	res.ServerUSPerTick = percentiles(serverUS)
	res.ServerCPUUSPerTick = percentiles(cpuUS)

	// Every dial has returned (each client has joined or failed); let the
	// clients apply their full states, then tick on.
	dialing.Wait()
	res.Failed = int(failed.Load())
	if err := caughtUp(clients, srv.TickNumber(), time.Minute); err != nil {
		return nil, err
	}
	afterUS := make([]float64, 0, cfg.After)
	for range cfg.After {
		_, server, _ := s.tickServer(t, srv)
		afterUS = append(afterUS, float64(server.Nanoseconds())/1e3)
	}
	res.AfterUSPerTick = percentiles(afterUS)
	res.Dropped = cfg.Clients - res.Failed - len(srv.Conns())
	verified := verify(srv, clients, &playing, abandon)
	res.Verified = verified && res.Failed == 0 && res.Dropped == 0
	var joinUS []float64
	for _, c := range clients {
		if !c.applied.IsZero() {
			joinUS = append(joinUS, float64(c.applied.Sub(c.dialed).Nanoseconds())/1e3)
		}
	}
	res.JoinLatencyUS = percentiles(joinUS)
	return res, nil
}

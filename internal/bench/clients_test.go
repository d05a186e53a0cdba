package bench

import (
	"strings"
	"testing"
)

// TestClientsVerifies runs the clients scenario briefly over each
// transport: every client must end with the server's entities.
func TestClientsVerifies(t *testing.T) {
	for _, tr := range []string{"ws", "quic"} {
		t.Run(tr, func(t *testing.T) {
			// The memory measurement does not depend on the transport
			// (TestSide covers the attribution of QUIC's stacks) and
			// profiles every allocation: once is enough.
			res, err := RunClients(ClientsConfig{Transport: tr, Clients: 20, Warmup: 5, Measured: 30, SkipMemory: tr == "quic"})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", *res)
			if !res.Verified || res.Dropped != 0 {
				t.Fatalf("verified=%v, %d clients dropped", res.Verified, res.Dropped)
			}
			if res.Ticks != 30 || res.Entities != 1000 || res.Transport != tr {
				t.Errorf("ticks %d, entities %d, transport %q", res.Ticks, res.Entities, res.Transport)
			}
			// W1 moves 100 entities and changes 10 hp a tick: hundreds of
			// bytes, the same for every client.
			if res.BytesPerClientTick < 100 || res.BytesPerClientTick > 10000 {
				t.Errorf("%.1f bytes per client per tick", res.BytesPerClientTick)
			}
			if res.ServerUSPerTick.P50 <= 0 || res.AchievedHz <= 0 {
				t.Errorf("no timings: %+v", res)
			}
			// Every connection costs the server a reader goroutine at
			// least and some heap; the figures are not checked against
			// targets here (see the benchmark's report).
			if m := res.Memory; tr == "ws" && (m == nil || m.Connections != 19 || m.ServerHeap <= 0 || m.ServerGoroutines < 1 ||
				m.ClientHeap <= 0 || res.MemoryPerConnection <= m.ServerHeap) {
				t.Errorf("memory %+v, per connection %.0f", m, res.MemoryPerConnection)
			}
		})
	}
}

func TestClientsBadTransport(t *testing.T) {
	if _, err := RunClients(ClientsConfig{Transport: "carrier-pigeon"}); err == nil || !strings.Contains(err.Error(), "want ws or quic") {
		t.Fatalf("err = %v", err)
	}
}

// TestSide checks the attribution of allocation stacks, innermost first.
func TestSide(t *testing.T) {
	for _, tc := range []struct {
		funcs []string
		want  string
	}{
		{[]string{"bufio.NewReaderSize", "net/http.newBufioReader", "net/http.(*conn).serve"}, "server"},
		{[]string{"github.com/replicago/replica.(*Server).handshake"}, "server"},
		{[]string{"github.com/coder/websocket.newConn", "github.com/coder/websocket.Dial",
			"github.com/replicago/replica/wstransport.(*Dialer).Dial", "github.com/replicago/replica/client.Dial",
			"github.com/replicago/replica/internal/bench.connect.func1", "runtime/pprof.Do"}, "client"},
		// The outermost function decides: a server's QUIC connection
		// starts in (*Conn).run, a client's in a closure of doDial.
		{[]string{"crypto/tls.(*Conn).HandshakeContext", "github.com/quic-go/quic-go.(*Conn).run"}, "server"},
		{[]string{"github.com/quic-go/quic-go.(*Conn).run", "github.com/quic-go/quic-go.(*Transport).doDial.func1"}, "client"},
		{[]string{"bufio.NewReaderSize", "github.com/replicago/replica/internal/quicconn.(*Conn).readLoop"}, "shared"},
		{[]string{"runtime.malg", "runtime.newproc1"}, "other"},
	} {
		if got := side(tc.funcs); got != tc.want {
			t.Errorf("side(%q) = %s, want %s", tc.funcs, got, tc.want)
		}
	}
}

func TestParseProfiles(t *testing.T) {
	heap := `heap profile: 3: 300 [5: 500] @ heap/2
1: 100 [1: 100] @ 0x1 0x2
#	0x1	bufio.NewReaderSize+0x10	/go/src/bufio/bufio.go:1
#	0x2	net/http.(*conn).serve+0x20	/go/src/net/http/server.go:2

2: 200 [4: 400] @ 0x3
#	0x3	github.com/replicago/replica/client.Dial+0x30	/work/client/conn.go:3


# runtime.MemStats
# Alloc = 1
`
	recs := map[string]heapRecord{}
	parseHeap(strings.NewReader(heap), recs)
	if len(recs) != 2 || recs["0x1 0x2"] != (heapRecord{100, "server"}) || recs["0x3"] != (heapRecord{200, "client"}) {
		t.Errorf("heap records %v", recs)
	}
	goroutines := `goroutine profile: total 6
3 @ 0x1 0x2
# labels: {"side":"server"}
#	0x1	runtime.gopark+0x1	/go/src/runtime/proc.go:1

2 @ 0x3
#	0x3	runtime.gopark+0x1	/go/src/runtime/proc.go:1

1 @ 0x4
# labels: {"other":"x", "side":"client"}
#	0x4	runtime.gopark+0x1	/go/src/runtime/proc.go:1
`
	counts := map[string]int{}
	parseGoroutines(strings.NewReader(goroutines), counts)
	if counts["server"] != 3 || counts["client"] != 1 || counts[""] != 2 {
		t.Errorf("goroutines %v", counts)
	}
}

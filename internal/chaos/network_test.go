package chaos_test

import (
	"encoding/binary"
	"errors"
	"math"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quic-go/quic-go/testutils/simnet"

	"github.com/replicago/replica/internal/chaos"
)

// TestNetworkProfile sends numbered, timestamped packets one way and
// checks that the network applies the profile: every delay within
// [Latency, Latency+Jitter), the loss and duplication rates, and, with
// jitter, reordering.
func TestNetworkProfile(t *testing.T) {
	for _, p := range []chaos.Profile{chaos.Unit, chaos.Brutal} {
		t.Run(p.Name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { checkProfile(t, p) })
		})
	}
}

func checkProfile(t *testing.T, p chaos.Profile) {
	nw := chaos.NewNetwork(p, 7)
	from := nw.Endpoint(&net.UDPAddr{IP: net.IPv4(127, 9, 0, 1), Port: 1})
	to := nw.Endpoint(&net.UDPAddr{IP: net.IPv4(127, 9, 0, 2), Port: 2})
	if err := nw.Start(); err != nil {
		t.Fatal(err)
	}
	defer nw.Close()

	const n = 5000
	type arrival struct {
		seq   uint64
		delay time.Duration
	}
	got := make(chan []arrival)
	go func() {
		var a []arrival
		buf := make([]byte, 64)
		for {
			to.SetReadDeadline(time.Now().Add(p.Latency + p.Jitter + time.Second))
			k, _, err := to.ReadFrom(buf)
			if err != nil {
				if !errors.Is(err, simnet.ErrDeadlineExceeded) {
					t.Error(err)
				}
				got <- a
				return
			}
			sent := time.Unix(0, int64(binary.LittleEndian.Uint64(buf[8:k])))
			a = append(a, arrival{binary.LittleEndian.Uint64(buf[:8]), time.Since(sent)})
		}
	}()
	pkt := make([]byte, 16)
	for i := range uint64(n) {
		binary.LittleEndian.PutUint64(pkt[:8], i)
		binary.LittleEndian.PutUint64(pkt[8:], uint64(time.Now().UnixNano()))
		if _, err := from.WriteTo(pkt, to.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	arrivals := <-got

	seen := map[uint64]int{}
	reordered := 0
	var last uint64
	for i, a := range arrivals {
		seen[a.seq]++
		if a.delay < p.Latency || a.delay >= p.Latency+max(p.Jitter, 1) {
			t.Errorf("packet %d delayed %v, want [%v, %v)", a.seq, a.delay, p.Latency, p.Latency+p.Jitter)
		}
		if i > 0 && a.seq < last {
			reordered++
		}
		last = a.seq
	}
	lost, dup := 0, 0
	for i := range uint64(n) {
		switch seen[i] {
		case 0:
			lost++
		case 1:
		case 2:
			dup++
		default:
			t.Errorf("packet %d arrived %d times", i, seen[i])
		}
	}
	near := func(what string, count int, of int, want float64) {
		if got := float64(count) / float64(of); math.Abs(got-want) > 0.03 {
			t.Errorf("%s: %.3f, want %.3f", what, got, want)
		}
	}
	near("loss", lost, n, p.Loss)
	near("duplication of the delivered packets", dup, n-lost, p.Duplication)
	if p.Jitter > 0 && reordered == 0 {
		t.Error("jitter reordered nothing")
	}
	st := nw.Stats()
	if st.Sent != n || st.Dropped != int64(lost) || st.Duplicated != int64(dup) {
		t.Errorf("Stats = %+v; counted %d sent, %d lost, %d duplicated", st, n, lost, dup)
	}
	t.Logf("%v: %d packets, %d lost, %d duplicated, %d arrived before an earlier-sent one", p, n, lost, dup, reordered)
}

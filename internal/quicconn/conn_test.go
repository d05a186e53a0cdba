package quicconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/replicago/replica/transport"
)

// fakeBackend records closes and lets a test block datagram sends.
type fakeBackend struct {
	mu     sync.Mutex
	closes []transport.CloseCode
	closed chan struct{}

	gate  chan struct{} // SendDatagram waits on it
	sent  chan []byte
	recvd chan []byte
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{closed: make(chan struct{}), gate: make(chan struct{}), sent: make(chan []byte, 1000), recvd: make(chan []byte)}
}

func (b *fakeBackend) SendDatagram(p []byte) error {
	select {
	case <-b.gate:
	case <-b.closed:
		return io.ErrClosedPipe
	}
	b.sent <- p
	return nil
}

func (b *fakeBackend) ReceiveDatagram(ctx context.Context) ([]byte, error) {
	select {
	case m := <-b.recvd:
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.closed:
		return nil, io.ErrClosedPipe
	}
}

func (b *fakeBackend) Close(code transport.CloseCode, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closes = append(b.closes, code)
	if len(b.closes) == 1 {
		close(b.closed)
	}
}

func (b *fakeBackend) MapError(err error) (transport.CloseCode, string, bool) {
	if errors.Is(err, io.ErrClosedPipe) {
		return transport.CloseNormal, "peer closed", true
	}
	return MapQUICError(err)
}

func (b *fakeBackend) closeCodes() []transport.CloseCode {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]transport.CloseCode(nil), b.closes...)
}

// pipeStream is a stream whose writes a test reads from w and whose reads a
// test feeds through r.
type pipeStream struct {
	io.Reader
	io.Writer
}

func newTestConn(t *testing.T, cfg transport.Config) (*Conn, *fakeBackend, *io.PipeWriter, *io.PipeReader) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	b := newFakeBackend()
	c := New(pipeStream{inR, outW}, b, Options{Config: cfg, MaxDatagramSize: MaxDatagramSize})
	t.Cleanup(func() {
		c.Close(transport.CloseNormal, "")
		inW.Close()
		outR.Close()
	})
	return c, b, inW, outR
}

func TestSendFramesInOrder(t *testing.T) {
	c, _, _, out := newTestConn(t, transport.Config{})
	msgs := [][]byte{{}, []byte("a"), bytes.Repeat([]byte("b"), 200), bytes.Repeat([]byte("c"), 10000)}
	for _, m := range msgs {
		if err := c.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	br := bufio.NewReader(out)
	for i, want := range msgs {
		n, err := readHeader(br, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, n)
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: %d bytes, want %d", i, len(got), len(want))
		}
	}
}

// A stalled stream fills the queue; Send then fails with ErrSlowConsumer
// and closes with CloseSlowConsumer, never blocking. In virtual time
// (testing/synctest): a Send that blocked would deadlock the bubble, and
// the time the Sends take does not depend on the machine's load.
func TestSlowConsumerByCount(t *testing.T) { synctest.Test(t, slowConsumerByCount) }

func slowConsumerByCount(t *testing.T) {
	c, b, _, _ := newTestConn(t, transport.Config{SendQueueMessages: 4})
	// Nobody reads the output pipe, so the writer blocks on its first
	// write; up to 4 more messages queue (one may be in the writer's hand).
	var err error
	n := 0
	start := time.Now()
	for err == nil && n < 100 {
		err = c.Send([]byte("x"))
		n++
	}
	if !errors.Is(err, transport.ErrSlowConsumer) {
		t.Fatalf("Send = %v after %d messages, want ErrSlowConsumer", err, n)
	}
	if n > 6 {
		t.Errorf("ErrSlowConsumer after %d messages, want at most 6", n)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Sends took %v", d)
	}
	<-c.Done()
	if code, _, byPeer := c.CloseInfo(); code != transport.CloseSlowConsumer || byPeer {
		t.Errorf("CloseInfo = %v, %v", code, byPeer)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(b.closeCodes()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := b.closeCodes(); len(got) != 1 || got[0] != transport.CloseSlowConsumer {
		t.Errorf("backend closes = %v, want [slow consumer]", got)
	}
	if err := c.Send([]byte("x")); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("Send after = %v", err)
	}
}

func TestSlowConsumerByBytes(t *testing.T) {
	c, _, _, _ := newTestConn(t, transport.Config{SendQueueBytes: 1000})
	var err error
	total := 0
	for err == nil && total < 10000 {
		err = c.Send(make([]byte, 100))
		total += 100
	}
	if !errors.Is(err, transport.ErrSlowConsumer) {
		t.Fatalf("Send = %v", err)
	}
	if total > 1200 {
		t.Errorf("ErrSlowConsumer after %d bytes, want at most 1200", total)
	}
}

// The datagram mailbox drops the oldest datagram and SendDatagram never
// blocks while the network's send blocks.
func TestDatagramDropOldest(t *testing.T) {
	const q = 4
	c, b, _, _ := newTestConn(t, transport.Config{DatagramQueue: q})
	for i := range 100 {
		if err := c.SendDatagram([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The loop may hold one datagram blocked in SendDatagram; the mailbox
	// holds the last q.
	close(b.gate)
	var got []byte
	timeout := time.After(5 * time.Second)
	for len(got) == 0 || got[len(got)-1] != 99 {
		select {
		case m := <-b.sent:
			got = append(got, m[0])
		case <-timeout:
			t.Fatalf("got %v", got)
		}
	}
	want := []byte{96, 97, 98, 99}
	if len(got) > q+1 || !bytes.Equal(got[len(got)-q:], want) {
		t.Errorf("sent %v, want at most one early datagram, then %v", got, want)
	}
	if err := c.SendDatagram(make([]byte, MaxDatagramSize+1)); !errors.Is(err, transport.ErrMessageTooLarge) {
		t.Errorf("oversized SendDatagram = %v", err)
	}
}

func TestReceiveFrames(t *testing.T) {
	c, _, in, _ := newTestConn(t, transport.Config{MaxMessageSize: 100})
	go func() {
		var b []byte
		b = appendHeader(b, 3)
		b = append(b, "abc"...)
		b = appendHeader(b, 0)
		b = appendHeader(b, 100)
		b = append(b, bytes.Repeat([]byte("z"), 100)...)
		in.Write(b)
	}()
	ctx := context.Background()
	for _, want := range []string{"abc", "", strings.Repeat("z", 100)} {
		got, err := c.Receive(ctx)
		if err != nil || string(got) != want {
			t.Fatalf("Receive = %q, %v; want %q", got, err, want)
		}
	}
}

func TestReceiveTooLarge(t *testing.T) {
	c, b, in, _ := newTestConn(t, transport.Config{MaxMessageSize: 100})
	// A header claiming 2^62 bytes is refused before it is read whole.
	go func() {
		in.Write([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f})
		in.Close() // the peer ends its side, as it does on the close
	}()
	_, err := c.Receive(context.Background())
	var ce *transport.CloseError
	if !errors.As(err, &ce) || ce.Code != transport.CloseMessageTooLarge || ce.ByPeer {
		t.Fatalf("Receive = %v, want CloseMessageTooLarge", err)
	}
	if got := waitCloses(b); len(got) != 1 || got[0] != transport.CloseMessageTooLarge {
		t.Errorf("backend closes = %v", got)
	}
}

// waitCloses returns the backend's closes once there is one: Close closes
// the backend on a goroutine, after the flush.
func waitCloses(b *fakeBackend) []transport.CloseCode {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if got := b.closeCodes(); len(got) > 0 {
			return got
		}
	}
	return nil
}

func TestReceiveTruncated(t *testing.T) {
	c, _, in, _ := newTestConn(t, transport.Config{})
	go func() {
		in.Write([]byte{10, 'a', 'b'})
		in.Close() // EOF mid-frame
	}()
	_, err := c.Receive(context.Background())
	var ce *transport.CloseError
	if !errors.As(err, &ce) || ce.Code != transport.CloseProtocolError {
		t.Fatalf("Receive = %v, want CloseProtocolError", err)
	}
}

func TestReadHeader(t *testing.T) {
	for _, tc := range []struct {
		in    []byte
		limit int
		n     int
		err   bool
	}{
		{[]byte{0}, 10, 0, false},
		{[]byte{10}, 10, 10, false},
		{[]byte{11}, 10, 0, true},
		{[]byte{0x80, 0x01}, 1000, 128, false},
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 1 << 62, 0, true},
		{[]byte{0x80}, 1000, 0, true},
	} {
		n, err := readHeader(bufio.NewReader(bytes.NewReader(tc.in)), tc.limit)
		if (err != nil) != tc.err || (!tc.err && n != tc.n) {
			t.Errorf("readHeader(%x, %d) = %d, %v", tc.in, tc.limit, n, err)
		}
	}
}

func TestCloseIdempotentFake(t *testing.T) {
	c, b, _, _ := newTestConn(t, transport.Config{})
	c.Close(transport.CloseAuthFailed, "x")
	c.Close(transport.CloseNormal, "y")
	c.Ended(io.ErrClosedPipe)
	if got := waitCloses(b); len(got) != 1 || got[0] != transport.CloseAuthFailed {
		t.Errorf("backend closes = %v", got)
	}
	if _, err := c.ReceiveDatagram(context.Background()); !errors.Is(err, transport.ErrClosed) {
		t.Errorf("ReceiveDatagram = %v", err)
	}
}

func TestRing(t *testing.T) {
	var r ring[int]
	next := 0 // the value pop must return
	for i := range 100 {
		r.push(i)
		if i%3 == 0 {
			if v := r.pop(); v != next {
				t.Fatalf("pop = %d, want %d", v, next)
			}
			next++
		}
	}
	prev := next - 1
	for r.len() > 0 {
		v := r.pop()
		if v <= prev {
			t.Fatalf("out of order: %d after %d", v, prev)
		}
		prev = v
	}
}

func TestTruncateReason(t *testing.T) {
	s := strings.Repeat("日", 200) // 3 bytes each
	got := TruncateReason(s)
	if len(got) > MaxReasonLen || len(got)%3 != 0 {
		t.Errorf("TruncateReason cut to %d bytes", len(got))
	}
	if TruncateReason("short") != "short" {
		t.Error("short reason changed")
	}
}

func TestMapQUICError(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   transport.CloseCode
		byPeer bool
	}{
		{io.EOF, transport.CloseProtocolError, false},
		{nil, transport.CloseNetworkError, false},
		{errors.New("socket gone"), transport.CloseNetworkError, false},
	} {
		code, _, byPeer := MapQUICError(tc.err)
		if code != tc.code || byPeer != tc.byPeer {
			t.Errorf("MapQUICError(%v) = %v, %v; want %v, %v", tc.err, code, byPeer, tc.code, tc.byPeer)
		}
	}
}

// TestReadBody checks that a frame's body is read whole and in order,
// short or long, that a short body is an error, and that a body declared
// large of which little arrives costs what arrived, not what the header
// said (a 1 MiB header and 100 bytes: under 256 KiB allocated).
func TestReadBody(t *testing.T) {
	for _, n := range []int{0, 1, bodyStep - 1, bodyStep, bodyStep + 1, 5*bodyStep + 3} {
		in := make([]byte, n+7)
		for i := range in {
			in[i] = byte(i * 7)
		}
		got, err := readBody(iotest.OneByteReader(bytes.NewReader(in)), n)
		if err != nil || !bytes.Equal(got, in[:n]) {
			t.Fatalf("n=%d: %d bytes, err %v; want the first %d bytes", n, len(got), err, n)
		}
	}
	if _, err := readBody(bytes.NewReader(make([]byte, 10)), 20); err != io.ErrUnexpectedEOF {
		t.Fatalf("short body: %v, want %v", err, io.ErrUnexpectedEOF)
	}
	if _, err := readBody(bytes.NewReader(nil), 20); err != io.EOF {
		t.Fatalf("no body: %v, want %v", err, io.EOF)
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	if _, err := readBody(bytes.NewReader(make([]byte, 100)), 1<<20); err != io.ErrUnexpectedEOF {
		t.Fatalf("1 MiB declared, 100 bytes sent: %v", err)
	}
	runtime.ReadMemStats(&m1)
	if d := m1.TotalAlloc - m0.TotalAlloc; d > 256<<10 {
		t.Errorf("1 MiB declared, 100 bytes sent: %d KiB allocated", d>>10)
	}
}

package replica_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replicago/replica"
	"github.com/replicago/replica/auth"
	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/transport"
)

// TestAuthRequired checks that a server is never anonymous by omission:
// NewServer fails without Config.Auth and says what to set.
func TestAuthRequired(t *testing.T) {
	_, err := replica.NewServer(replica.Config{Schema: demo.Schema()})
	if err == nil {
		t.Fatal("NewServer without Auth succeeded")
	}
	for _, want := range []string{"Config.Auth", "auth.HMAC", "auth.Anonymous{}"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, err := replica.NewServer(replica.Config{Schema: demo.Schema(), Auth: auth.Anonymous{}}); err != nil {
		t.Fatalf("NewServer with auth.Anonymous{}: %v", err)
	}
	// A key every token would fail on: the server does not start.
	_, err = replica.NewServer(replica.Config{Schema: demo.Schema(), Auth: &auth.HMAC{Keys: [][]byte{[]byte("dev key")}}})
	if !errors.Is(err, auth.ErrKey) || !strings.Contains(err.Error(), "key 0 is 7 bytes, under 16") {
		t.Fatalf("NewServer with a 7-byte HMAC key: %v, want auth.ErrKey naming the key", err)
	}
}

// logBuffer collects a text slog handler's output from any goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// addrListener is a listener that reports another address.
type addrListener struct {
	transport.Listener
	addr net.Addr
}

func (l addrListener) Addr() net.Addr { return l.addr }

type urlAddr string

func (a urlAddr) Network() string { return "ws" }
func (a urlAddr) String() string  { return string(a) }

// TestAnonymousWarning checks that Serve warns when the server admits
// anonymous clients on an address other hosts may reach, and only then.
func TestAnonymousWarning(t *testing.T) {
	hmac := &auth.HMAC{Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}}
	for _, c := range []struct {
		name string
		auth auth.Authenticator
		addr net.Addr // nil: the in-memory listener's own
		warn bool
	}{
		{"anonymous, all interfaces", auth.Anonymous{}, &net.TCPAddr{IP: net.IPv4zero, Port: 7777}, true},
		{"anonymous pointer, public IP", &auth.Anonymous{}, &net.UDPAddr{IP: net.IPv4(203, 0, 113, 5), Port: 7777}, true},
		{"anonymous, ws URL on all interfaces", auth.Anonymous{}, urlAddr("ws://[::]:7777/"), true},
		{"anonymous, ws URL on a host name", auth.Anonymous{}, urlAddr("wss://game.example.com/replica"), true},
		{"anonymous, loopback IPv4", auth.Anonymous{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7777}, false},
		{"anonymous, loopback IPv6", auth.Anonymous{}, &net.UDPAddr{IP: net.IPv6loopback, Port: 7777}, false},
		{"anonymous, ws URL on localhost", auth.Anonymous{}, urlAddr("ws://localhost:7777/"), false},
		{"anonymous, in memory", auth.Anonymous{}, nil, false},
		{"HMAC, all interfaces", hmac, &net.TCPAddr{IP: net.IPv4zero, Port: 7777}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs logBuffer
			srv, err := replica.NewServer(replica.Config{Schema: demo.Schema(), Auth: c.auth,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := transport.NewMemNetwork().Listen("", transport.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if c.addr != nil {
				ln = addrListener{ln, c.addr}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // Serve returns at its first Accept
			if err := srv.Serve(ctx, ln); !errors.Is(err, context.Canceled) {
				t.Fatalf("Serve = %v", err)
			}
			out := logs.String()
			warned := strings.Contains(out, "level=WARN") && strings.Contains(out, "auth.Anonymous")
			if warned != c.warn {
				t.Fatalf("warned = %v, want %v; log:\n%s", warned, c.warn, out)
			}
			if c.warn && !strings.Contains(out, "addr="+c.addr.String()) {
				t.Errorf("the warning does not name the address %s:\n%s", c.addr, out)
			}
		})
	}
}

// TestAuthRefusalGeneric checks that a client refused by the HMAC
// authenticator learns the kind of failure and nothing of the server's
// state (its clock), which goes to the server's log, and that tokens
// signed for a lifetime over HMAC.MaxLifetime are refused.
func TestAuthRefusalGeneric(t *testing.T) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	h := &auth.HMAC{Keys: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}, Now: func() time.Time { return now }}
	issue := func(exp time.Time) []byte {
		tok, err := h.Issue(auth.Identity{UserID: "alice", Expires: exp})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	var logs logBuffer
	r := memRig(t, replica.Config{Auth: h, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, c := range []struct {
		name, want string
		token      []byte
	}{
		{"expired", "token expired", issue(now.Add(-time.Minute))},
		{"year 9999", "invalid token", issue(time.Unix(auth.MaxExpiry, 0))},
		{"just over the lifetime", "invalid token", issue(now.Add(auth.DefaultMaxLifetime + time.Second))},
		{"garbage", "invalid token", []byte("guess")},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := client.Dial(context.Background(), r.dialer, r.ln.Addr().String(), demo.Schema(), client.DialConfig{Token: c.token})
			var refused *client.RefusedError
			if !errors.As(err, &refused) || refused.Code != transport.CloseAuthFailed || refused.Message != c.want {
				t.Fatalf("err = %v, want a refusal with %s: %q", err, transport.CloseAuthFailed, c.want)
			}
		})
	}
	if out := logs.String(); !strings.Contains(out, "now 2030-06-01T12:00:00Z") {
		t.Errorf("the server's log lacks the authenticator's detail:\n%s", out)
	}
	if c := r.dial(string(issue(now.Add(time.Hour)))); c.UserID() != "alice" {
		t.Fatalf("user %q", c.UserID())
	}
}

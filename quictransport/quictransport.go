// Package quictransport carries replica connections over raw QUIC
// (quic-go), for native clients.
//
// # Mapping
//
// Each transport.Conn is one QUIC connection. Right after the handshake the
// client opens one bidirectional stream and writes a 4-byte preamble ("rpl"
// and the framing version); the server's Accept returns once it has read
// it. Reliable messages are frames on that stream: a uvarint length, then
// the payload. A frame over MaxMessageSize closes the connection with
// CloseMessageTooLarge. Datagrams are QUIC DATAGRAM frames (RFC 9221), at
// most 1150 bytes, which fits the 1200-byte minimum QUIC packet.
//
// Close(code, reason) sends CONNECTION_CLOSE with application error code
// code and the reason (cut to 256 bytes); the peer's CloseInfo reports both
// with byPeer set. A QUIC idle timeout maps to CloseIdleTimeout, a failed
// handshake to CloseHandshakeTimeout, and other network failures (a
// stateless reset, a closed socket) to CloseNetworkError.
//
// # Sending
//
// Send and SendDatagram never block. Each connection has a writer goroutine
// that drains its bounded send queue into the stream, batching queued
// messages into one write; when the peer reads too slowly, QUIC flow
// control stalls the writer, the queue fills, and Send closes the
// connection with CloseSlowConsumer. Datagrams go through a drop-oldest
// mailbox of Config.DatagramQueue entries drained by a second goroutine
// (started with the first datagram), because quic-go's SendDatagram blocks
// once its own queue of 32 is full.
//
// # Timeouts
//
// The defaults suit a game: keep-alive PINGs every 5 s keep NAT bindings
// open and an idle connection alive; a connection that hears nothing for
// 15 s closes with CloseIdleTimeout (QUIC uses the smaller of both peers'
// values); the handshake, including opening the message stream, must finish
// within 10 s.
package quictransport

import (
	"crypto/tls"
	"crypto/x509"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica/internal/quicconn"
	"github.com/replicago/replica/transport"
)

// ALPN is the TLS application protocol replica's QUIC connections use.
const ALPN = "replica"

// Config configures a listener or a dialer.
type Config struct {
	transport.Config

	// TLS is required. A server needs a certificate; a client verifies the
	// server with it (RootCAs, ServerName, which defaults to the dialed
	// host). NextProtos defaults to ALPN. See DevTLS for tests.
	TLS *tls.Config

	// KeepAlivePeriod is how often an otherwise idle connection sends a
	// PING. The default is 5 s; a negative value sends none.
	KeepAlivePeriod time.Duration
	// IdleTimeout closes a connection that receives nothing for this long,
	// with CloseIdleTimeout. The default is 15 s.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds the QUIC handshake plus the opening of the
	// message stream (and, on the server, the wait for Accept). The
	// default is 10 s.
	HandshakeTimeout time.Duration
	// MaxPending bounds, on the server, the connections that have not
	// opened their message stream and been accepted yet, at once: one
	// beyond is closed with CloseServerBusy as it arrives, so that
	// connections which never open a stream, from however many
	// addresses, cannot pile up until their HandshakeTimeout. The default
	// is transport.DefaultMaxPending (1024).
	MaxPending int
	// DisableDatagrams turns QUIC datagrams off; SendDatagram then returns
	// transport.ErrDatagramsUnsupported.
	DisableDatagrams bool

	// QUIC, if set, is the base of the quic.Config (to set a Tracer or
	// flow-control windows, say). The fields above, datagrams and the
	// stream limits override it.
	QUIC *quic.Config
}

func (c Config) tunables() quicconn.Tunables {
	return quicconn.Tunables{
		KeepAlivePeriod:  c.KeepAlivePeriod,
		IdleTimeout:      c.IdleTimeout,
		HandshakeTimeout: c.HandshakeTimeout,
		Base:             c.QUIC,
	}.WithDefaults()
}

func (c Config) tlsConfig() *tls.Config {
	t := c.TLS.Clone()
	if len(t.NextProtos) == 0 {
		t.NextProtos = []string{ALPN}
	}
	return t
}

// quicConfig returns the quic.Config for one side: the server admits one
// bidirectional stream, the client none, and neither admits
// unidirectional streams.
func (c Config) quicConfig(server bool) *quic.Config {
	q := c.tunables().QUICConfig()
	q.EnableDatagrams = !c.DisableDatagrams
	q.MaxIncomingUniStreams = -1
	q.MaxIncomingStreams = -1
	if server {
		q.MaxIncomingStreams = 1
	}
	return q
}

// DevTLS returns a server and a client TLS configuration for tests and
// local demos: a fresh self-signed ECDSA certificate for hosts (default
// "localhost", "127.0.0.1" and "::1"), valid for 14 days, which the client
// configuration trusts. Both use ALPN.
func DevTLS(hosts ...string) (server, client *tls.Config, err error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	cert, err := quicconn.SelfSigned(hosts, 14*24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	server = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{ALPN}}
	client = &tls.Config{RootCAs: pool, NextProtos: []string{ALPN}}
	return server, client, nil
}

// Package wttransport carries replica connections over WebTransport
// (HTTP/3, webtransport-go), for browsers and for Go clients.
//
// # Mapping
//
// Each transport.Conn is one WebTransport session on its own QUIC
// connection, opened with an extended CONNECT to Config.Path (default
// "/replica"). The client then opens one bidirectional stream and writes a
// 4-byte preamble ("rpl" and the framing version); the server's Accept
// returns once it has read it. Reliable messages are frames on that
// stream, a uvarint length then the payload, exactly as in quictransport;
// datagrams are WebTransport datagrams of at most 1150 bytes. A browser
// client writes the same preamble and frames on a stream from
// createBidirectionalStream().
//
// Close(code, reason) closes the session with a CLOSE_WEBTRANSPORT_SESSION
// capsule carrying code and reason (cut to 256 bytes), which a browser
// reports as WebTransportCloseInfo{closeCode, reason}; the receiving side
// then closes the QUIC connection, and the closing side closes it itself
// after a short linger if the peer does not. A QUIC idle timeout maps to
// CloseIdleTimeout; the QUIC connection closing without a session close
// maps to CloseGoingAway (by the peer) or CloseNetworkError.
//
// Send never blocks; the send queue, the slow-consumer close and the
// drop-oldest datagram mailbox work as in quictransport.
//
// # Certificates
//
// Browsers accept a self-signed certificate through serverCertificateHashes
// only if it is ECDSA and valid for at most 14 days. GenerateCert makes
// one and returns the SHA-256 hash to hand to the page. A server using it
// must rotate it before it expires: generate the next certificate a few
// days ahead, serve it through tls.Config.GetCertificate, and publish both
// hashes (serverCertificateHashes takes a list) while clients move over.
// CertManager does exactly that; a page fetches its Hashes from the HTTP
// server that serves the page, each time it connects.
package wttransport

import (
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"net/http"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica/internal/quicconn"
	"github.com/replicago/replica/transport"
)

// DefaultPath is the HTTP path of the WebTransport endpoint.
const DefaultPath = "/replica"

// Config configures a listener or a dialer.
type Config struct {
	transport.Config

	// TLS is required on a server: it needs a certificate (see
	// GenerateCert). On a client it verifies the server (RootCAs,
	// ServerName, which defaults to the dialed host); it may be nil when
	// Dialer.CertHashes is set. NextProtos is always "h3".
	TLS *tls.Config

	// Path is the path of the WebTransport endpoint, DefaultPath if empty.
	Path string

	// CheckOrigin, on a server, decides whether a browser's Origin may
	// connect. If nil, a request with an Origin header is accepted only if
	// the origin's host:port equals the request's; a page served from
	// another port or host needs its own CheckOrigin.
	CheckOrigin func(r *http.Request) bool

	// Fallback, on a server, serves HTTP/3 requests to other paths; if nil
	// they get 404.
	Fallback http.Handler

	// KeepAlivePeriod is how often an otherwise idle connection sends a
	// PING. The default is 5 s; a negative value sends none.
	KeepAlivePeriod time.Duration
	// IdleTimeout closes a connection that receives nothing for this long,
	// with CloseIdleTimeout. The default is 15 s.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds the QUIC handshake, the session's CONNECT
	// and the opening of the message stream (on the server, each of the
	// wait for a session and the wait for the stream). The default is 10 s.
	HandshakeTimeout time.Duration
	// MaxPending bounds, on the server, the connections that have not
	// opened their session and message stream and been accepted yet, at
	// once: one beyond is closed as it arrives (HTTP/3's
	// H3_EXCESSIVE_LOAD), so that connections which never finish, from
	// however many addresses, cannot pile up until their
	// HandshakeTimeout. The default is transport.DefaultMaxPending (1024).
	MaxPending int

	// QUIC, if set, is the base of the quic.Config. The fields above and
	// what WebTransport needs (datagrams, stream resets with partial
	// delivery) override it. A server's streams start with a receive
	// window of 64 KiB unless it sets InitialStreamReceiveWindow (what
	// a client may send on streams of no session is held within it).
	QUIC *quic.Config
}

func (c Config) path() string {
	if c.Path == "" {
		return DefaultPath
	}
	return c.Path
}

func (c Config) tunables() quicconn.Tunables {
	return quicconn.Tunables{
		KeepAlivePeriod:  c.KeepAlivePeriod,
		IdleTimeout:      c.IdleTimeout,
		HandshakeTimeout: c.HandshakeTimeout,
		Base:             c.QUIC,
	}.WithDefaults()
}

// serverStreamWindow is a server's initial receive window of a stream,
// unless Config.QUIC sets one: what a client sends is a HELLO and small
// messages, and streams a client opens before (or beside) its session are
// held unread for a while (Server.ReorderingTimeout) within the
// connection's window, which follows this one; a window the size of a
// large message (quic-go's 512 KiB) let a client that never sent its
// CONNECT pin about 0.8 MiB of buffers per connection. The message
// stream's window grows from there as the server reads it.
const serverStreamWindow = 64 << 10

// serverReordering is how long a server holds streams that name a
// session it does not have (yet): a client opens its streams once its
// CONNECT is answered, so only a hostile one needs any time at all.
const serverReordering = time.Second

func (c Config) quicConfig(server bool) *quic.Config {
	q := c.tunables().QUICConfig()
	q.EnableDatagrams = true
	q.EnableStreamResetPartialDelivery = true
	if server && q.InitialStreamReceiveWindow == 0 {
		q.InitialStreamReceiveWindow = serverStreamWindow
	}
	// The message stream must never use up the connection's flow-control
	// window, or the CONNECT stream could not carry the close capsule to
	// a peer that stopped reading.
	stream := q.InitialStreamReceiveWindow
	if stream == 0 {
		stream = 512 << 10
	}
	if q.InitialConnectionReceiveWindow < stream+64<<10 {
		q.InitialConnectionReceiveWindow = stream + 64<<10
	}
	if q.MaxConnectionReceiveWindow != 0 && q.MaxConnectionReceiveWindow < q.InitialConnectionReceiveWindow {
		q.MaxConnectionReceiveWindow = q.InitialConnectionReceiveWindow
	}
	return q
}

// MaxCertValidity is the longest validity browsers accept for a
// certificate given through serverCertificateHashes.
const MaxCertValidity = 14 * 24 * time.Hour

// DefaultCertValidity is what GenerateCert uses for a zero validity: a day
// short of the maximum, to leave room for clock skew.
const DefaultCertValidity = 13 * 24 * time.Hour

// GenerateCert returns a fresh self-signed ECDSA P-256 certificate for
// hosts (DNS names or IP addresses; default "localhost", "127.0.0.1" and
// "::1"), valid from a minute ago for validity (DefaultCertValidity if 0,
// at most MaxCertValidity), and its SHA-256 hash for
// serverCertificateHashes (and Dialer.CertHashes).
func GenerateCert(validity time.Duration, hosts ...string) (cert tls.Certificate, hash [32]byte, err error) {
	if validity == 0 {
		validity = DefaultCertValidity
	}
	if validity < 0 || validity > MaxCertValidity {
		return tls.Certificate{}, hash, errors.New("wttransport: certificate validity must be at most 14 days for serverCertificateHashes")
	}
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	cert, err = quicconn.SelfSigned(hosts, validity)
	if err != nil {
		return tls.Certificate{}, hash, err
	}
	return cert, CertHash(cert), nil
}

// CertHash returns the SHA-256 hash of cert's leaf, the value of
// serverCertificateHashes.
func CertHash(cert tls.Certificate) [32]byte {
	if len(cert.Certificate) == 0 {
		return [32]byte{}
	}
	return sha256.Sum256(cert.Certificate[0])
}

// Package wstransport is replica's WebSocket transport, over
// github.com/coder/websocket. It is the transport browsers can use.
//
// Each replica message is one binary WebSocket message; text messages from
// the peer close the connection with CloseProtocolError. WebSocket has no
// datagrams: MaxDatagramSize is 0 and SendDatagram returns
// transport.ErrDatagramsUnsupported. Permessage-deflate is not negotiated.
//
// # Servers
//
// Listen listens on a TCP address and serves WebSocket upgrades at
// Config.Path; NewListener does the same on a net.Listener the caller made
// (a simulated network, a listener with socket options); NewHandler returns
// an http.Handler to mount on an existing http.Server, which is also the
// transport.Listener its connections are accepted from.
//
// Browsers send an Origin header and, by default, only a page of the same
// host and port may connect (a page served on :8080 may not connect to a
// server on :7777: another origin); list the hosts a game page is served
// from in
// Config.OriginPatterns (for example "game.example.com" or
// "*.itch.zone"). Clients that are not browsers send no Origin header and
// are always allowed. The origin check defends cookie-authenticated
// endpoints from other sites' pages; a game server that authenticates with
// a connect token sent in a message (see transport.CloseAuthFailed) and
// honours no cookie or other ambient credential gains little from it, so
// Config.InsecureSkipOriginCheck is acceptable there, though an explicit
// list is better.
//
// # Close codes
//
// A transport.CloseCode c of 0 to 998 travels as the WebSocket status
// 4000+c with the reason. Codes 999 to 4095 do not fit the private status
// range 4000-4999; they travel as status 4999 with the reason prefixed by
// the decimal code and a colon ("1234:reason"). Reasons are truncated, on
// a UTF-8 boundary, to the 123 bytes a close frame carries. Standard
// statuses from other peers map to the nearest code: 1000 and 1005 to
// CloseNormal, 1001, 1012 and 1013 to CloseGoingAway, 1008 to
// ClosePolicyViolation, 1009 to CloseMessageTooLarge, 1011 to
// CloseInternalError, 1014 to CloseNetworkError, and other statuses to
// CloseProtocolError. A connection that ends without a close frame reports
// CloseNetworkError.
//
// # Receiving
//
// A connection's reader goroutine reads one message ahead and waits for
// Receive to take it, so a peer sending faster than the application
// receives is held back by TCP rather than by memory. The peer's close
// frame is therefore seen, and Done closed, only once the application has
// received the messages before it: a session layer must keep a Receive
// loop running on every connection. A local Close, a slow consumer and a
// network failure close Done at once.
//
// The connection enforces MaxMessageSize itself, or the lower limit set
// with SetReadLimit (transport.ReadLimiter), checking it as the message
// grows: a message over it is read no further than the limit, and the
// connection closes with CloseMessageTooLarge, status 4003 (the library's
// own 1009 is not used).
//
// # Closing and backlog
//
// Close closes Done at once but still writes the messages already queued,
// for up to two seconds, before the close frame, so that a last message
// (a refusal) reaches the peer. Backlog counts the messages queued or being
// written and, on Linux, the bytes the kernel holds in the socket's send
// queue for the peer: a peer that stops reading leaves megabytes there,
// which would otherwise look like no backlog. Connections of Listen and
// NewListener measure it; a Handler mounted on another http.Server does
// when that server's ConnContext is ConnContext.
//
// # Memory and goroutines
//
// An idle server connection holds the socket, the 4 KiB read and 4 KiB
// write buffers of the HTTP server's hijacked connection, the library's
// and this package's state, and one reader goroutine: about 15 KiB of heap
// and stack in all (TestIdleConnMemory measures it; the budget is 32 KiB).
// The writer goroutine that drains the send queue runs only while messages
// are queued, and Close runs the close handshake on a goroutine of its own
// for at most 10 seconds.
//
// # Dead peers
//
// Keep-alive is the session layer's job: it must send a message at least
// every few seconds when it has nothing else to send and close a
// connection with transport.CloseIdleTimeout when nothing was received for
// longer than its timeout. The transport only guarantees that a dead peer
// ends the connection eventually: connections of Listen and of a Dialer
// without an HTTPClient use TCP keep-alive (probes after 15 s idle, every
// 5 s, 3 lost probes fail the connection: about 30 s), and a connection
// whose writes stall fills its send queue and closes with
// CloseSlowConsumer. Connections on a caller's net.Listener or
// http.Client get whatever keep-alive those configure.
package wstransport

import (
	"crypto/tls"
	"log"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/replicago/replica/transport"
)

// Config configures a WebSocket listener.
type Config struct {
	transport.Config

	// Path is the URL path of the WebSocket endpoint, for Listen and
	// NewListener. The default is "/". A Handler serves whatever path it
	// is mounted at.
	Path string

	// TLSConfig, if set, makes Listen and NewListener serve wss: it must
	// have a certificate. HTTP/2 is not offered.
	TLSConfig *tls.Config

	// OriginPatterns lists the hosts, besides the server's own, whose
	// pages may connect from a browser, as path.Match patterns matched
	// against the Origin header's host (or "scheme://host" when the
	// pattern has a scheme). See the package documentation.
	OriginPatterns []string

	// InsecureSkipOriginCheck allows pages of any origin to connect.
	InsecureSkipOriginCheck bool

	// HandshakeTimeout bounds reading the upgrade request (and the TLS
	// handshake) for Listen and NewListener, and how long a connection
	// may stay idle after a request that did not upgrade it. The default
	// is 10 seconds.
	HandshakeTimeout time.Duration

	// AcceptBacklog bounds the connections upgraded and not yet accepted;
	// more wait in their HTTP handlers. The default is 128.
	AcceptBacklog int

	// MaxPending bounds, for Listen and NewListener, the connections that
	// have not finished their upgrade (the TLS and HTTP handshakes) at
	// once: a connection beyond it is closed as it arrives, so that
	// connections which never finish, from however many addresses, cannot
	// take every file descriptor until their HandshakeTimeout. The
	// default is transport.DefaultMaxPending (1024).
	MaxPending int

	// URL is the address a Handler's Addr reports, the URL clients dial
	// (for example "wss://game.example.com/replica"). Listen and
	// NewListener derive it from the listening address and Path.
	URL string

	// ErrorLog receives the HTTP server's errors for Listen and
	// NewListener, and, for a Handler too, a note when a page is refused
	// for its origin (at most every 10 seconds); nil logs with the log
	// package.
	ErrorLog *log.Logger
}

func (c Config) withDefaults() Config {
	c.Config = c.Config.WithDefaults()
	if c.Path == "" {
		c.Path = "/"
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 10 * time.Second
	}
	if c.AcceptBacklog <= 0 {
		c.AcceptBacklog = 128
	}
	if c.MaxPending <= 0 {
		c.MaxPending = transport.DefaultMaxPending
	}
	return c
}

// Addr is a WebSocket endpoint. Its String is the URL clients dial.
type Addr struct {
	URL string
}

// Network returns "wss" for a wss URL and "ws" otherwise.
func (a *Addr) Network() string {
	if strings.HasPrefix(a.URL, "wss:") || strings.HasPrefix(a.URL, "https:") {
		return "wss"
	}
	return "ws"
}

func (a *Addr) String() string { return a.URL }

// keepAlive is the TCP keep-alive of the sockets this package makes.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// Close statuses. A close frame carries at most 125 bytes: the status and
// 123 bytes of reason.
const (
	statusBase      = 4000
	statusExtended  = 4999 // codes that do not fit 4000+code: "code:reason"
	maxDirectCode   = statusExtended - statusBase - 1
	maxReasonLength = 123
)

// closeStatus returns the WebSocket status and reason that carry code and
// reason.
func closeStatus(code transport.CloseCode, reason string) (websocket.StatusCode, string) {
	if code <= maxDirectCode {
		return websocket.StatusCode(statusBase + int(code)), truncateReason(reason, maxReasonLength)
	}
	prefix := strconv.Itoa(int(code)) + ":"
	return statusExtended, prefix + truncateReason(reason, maxReasonLength-len(prefix))
}

// closeCode returns the transport code and reason that a WebSocket close
// status and reason carry.
func closeCode(status websocket.StatusCode, reason string) (transport.CloseCode, string) {
	switch {
	case status == statusExtended:
		if i := strings.IndexByte(reason, ':'); i > 0 {
			if n, err := strconv.Atoi(reason[:i]); err == nil && n >= 0 && n <= int(transport.MaxCloseCode) {
				return transport.CloseCode(n), reason[i+1:]
			}
		}
		return statusExtended - statusBase, reason
	case status >= statusBase && status < statusExtended:
		return transport.CloseCode(status - statusBase), reason
	}
	switch status {
	case websocket.StatusNormalClosure, websocket.StatusNoStatusRcvd:
		return transport.CloseNormal, reason
	case websocket.StatusGoingAway, websocket.StatusServiceRestart, websocket.StatusTryAgainLater:
		return transport.CloseGoingAway, reason
	case websocket.StatusPolicyViolation:
		return transport.ClosePolicyViolation, reason
	case websocket.StatusMessageTooBig:
		return transport.CloseMessageTooLarge, reason
	case websocket.StatusInternalError:
		return transport.CloseInternalError, reason
	case websocket.StatusBadGateway, websocket.StatusAbnormalClosure:
		return transport.CloseNetworkError, reason
	}
	return transport.CloseProtocolError, reason
}

// truncateReason returns reason as valid UTF-8 of at most n bytes, cut on
// a character boundary.
func truncateReason(reason string, n int) string {
	if !utf8.ValidString(reason) {
		reason = strings.ToValidUTF8(reason, "\uFFFD")
	}
	if len(reason) <= n {
		return reason
	}
	for n > 0 && !utf8.RuneStart(reason[n]) {
		n--
	}
	return reason[:n]
}

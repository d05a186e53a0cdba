package wttransport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/webtransport-go"

	"github.com/replicago/replica/internal/quicconn"
	"github.com/replicago/replica/transport"
)

type connKey struct{}

type listener struct {
	cfg Config
	ep  *quicconn.Endpoint
	ln  *quic.Listener
	wt  *webtransport.Server
	q   *quicconn.AcceptQueue

	// pending holds QUIC connections that have no session yet; each is
	// closed if it has none within HandshakeTimeout.
	pending sync.Map // *quic.Conn → struct{}
	// shaking holds those not yet accepted, with their message stream,
	// nshaking their number (Config.MaxPending).
	shaking  sync.Map // *quic.Conn → struct{}
	nshaking atomic.Int64
}

// handshaken counts qc out of the connections in their handshake, once.
func (l *listener) handshaken(qc *quic.Conn) {
	if _, ok := l.shaking.LoadAndDelete(qc); ok {
		l.nshaking.Add(-1)
	}
}

// Listen serves WebTransport on the UDP address addr (such as
// "127.0.0.1:0"), with sessions at Config.Path. Close stops accepting and
// refuses new connections at once; established connections stay open, and
// the socket closes once the last of them ends.
func Listen(addr string, cfg Config) (transport.Listener, error) {
	return quicconn.ListenAddr(addr, func(pc net.PacketConn) (transport.Listener, error) { return listen(pc, true, cfg) })
}

// ListenPacket serves WebTransport on pc, which may be a simulated network.
// The caller closes pc after closing the listener and its connections.
func ListenPacket(pc net.PacketConn, cfg Config) (transport.Listener, error) {
	return listen(pc, false, cfg)
}

// listen serves on pc, which the listener closes when done if ownPC.
func listen(pc net.PacketConn, ownPC bool, cfg Config) (transport.Listener, error) {
	if err := quicconn.CheckServerTLS("wttransport", cfg.TLS); err != nil {
		return nil, err
	}
	cfg.Config = cfg.Config.WithDefaults()
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = transport.DefaultMaxPending
	}
	tlsConf := cfg.TLS.Clone()
	tlsConf.NextProtos = []string{http3.NextProtoH3}

	ep := quicconn.NewEndpoint(pc, ownPC)
	ln, err := ep.Transport.Listen(tlsConf, cfg.quicConfig(true))
	if err != nil {
		ep.Release()
		return nil, err
	}
	l := &listener{cfg: cfg, ep: ep, ln: ln, q: quicconn.NewAcceptQueue()}
	mux := http.NewServeMux()
	mux.HandleFunc(cfg.path(), l.serveSession)
	if cfg.Fallback != nil {
		mux.Handle("/", cfg.Fallback)
	}
	l.wt = &webtransport.Server{
		H3: &http3.Server{
			Handler: mux,
			ConnContext: func(ctx context.Context, qc *quic.Conn) context.Context {
				return context.WithValue(ctx, connKey{}, qc)
			},
		},
		CheckOrigin:       cfg.CheckOrigin,
		ReorderingTimeout: min(cfg.tunables().HandshakeTimeout, serverReordering),
	}
	ep.OnClose = func() {
		l.wt.Close()
		ln.Close()
	}
	go l.acceptLoop()
	return l, nil
}

func (l *listener) acceptLoop() {
	timeout := l.cfg.tunables().HandshakeTimeout
	for {
		qc, err := l.ln.Accept(context.Background())
		if err != nil {
			l.Close()
			return
		}
		l.ep.Track(qc)
		if l.isClosed() {
			qc.CloseWithError(h3NoError, "server is not accepting connections")
			continue
		}
		if l.nshaking.Add(1) > int64(l.cfg.MaxPending) {
			l.nshaking.Add(-1)
			qc.CloseWithError(h3ExcessiveLoad, "too many connections in their handshake")
			continue
		}
		l.shaking.Store(qc, struct{}{})
		l.pending.Store(qc, struct{}{})
		t := time.AfterFunc(timeout, func() {
			if _, ok := l.pending.LoadAndDelete(qc); ok {
				qc.CloseWithError(h3NoError, "no WebTransport session in time")
			}
		})
		context.AfterFunc(qc.Context(), func() {
			t.Stop()
			l.pending.Delete(qc)
			l.handshaken(qc)
		})
		go l.wt.ServeQUICConn(qc)
	}
}

// serveSession upgrades a CONNECT request to a session, waits for the
// message stream and its preamble, and hands the connection to Accept.
func (l *listener) serveSession(w http.ResponseWriter, r *http.Request) {
	qc, _ := r.Context().Value(connKey{}).(*quic.Conn)
	if qc == nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if _, ok := l.pending.LoadAndDelete(qc); !ok || l.isClosed() {
		// One session per connection, and none after Close.
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	sess, err := l.wt.Upgrade(w, r)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		qc.CloseWithError(h3NoError, "WebTransport upgrade failed")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.tunables().HandshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(l.q.Context(), cancel)
	defer stop()
	str, err := sess.AcceptStream(ctx)
	if err == nil {
		deadline, _ := ctx.Deadline()
		err = quicconn.ReadPreamble(str, deadline)
	}
	if err != nil {
		code, reason := transport.CloseHandshakeTimeout, "no message stream in time"
		switch {
		case errors.Is(err, quicconn.ErrNotReplica):
			code, reason = transport.CloseProtocolError, err.Error()
		case errors.Is(err, quicconn.ErrIncompatible):
			code, reason = transport.CloseIncompatible, err.Error()
		case l.isClosed():
			code, reason = transport.CloseGoingAway, "server is not accepting connections"
		}
		backend{qc: qc, sess: sess}.Close(code, reason)
		return
	}
	go refuseStreams(sess)
	l.q.Push(ctx, newConn(qc, sess, str, l.cfg.Config))
	l.handshaken(qc)
}

// refuseStreams resets, for the session's life, every stream the client
// opens beside its message stream: the protocol has one (docs/protocol.md
// §10.1), and a stream left unread would hold what the client writes to
// it, up to the connection's flow-control window, until the session ends.
func refuseStreams(sess *webtransport.Session) {
	ctx := sess.Context()
	go func() {
		for {
			str, err := sess.AcceptUniStream(ctx)
			if err != nil {
				return
			}
			str.CancelRead(streamRefused)
		}
	}()
	for {
		str, err := sess.AcceptStream(ctx)
		if err != nil {
			return
		}
		str.CancelRead(streamRefused)
		str.CancelWrite(streamRefused)
	}
}

// streamRefused is the error code of the streams refuseStreams resets.
const streamRefused webtransport.StreamErrorCode = 1

func (l *listener) isClosed() bool {
	select {
	case <-l.q.Closed():
		return true
	default:
		return false
	}
}

func (l *listener) Accept(ctx context.Context) (transport.Conn, error) { return l.q.Accept(ctx) }

func (l *listener) Addr() net.Addr { return l.ln.Addr() }

func (l *listener) Close() error {
	if l.q.Close() {
		l.ep.Refuse()
		l.ep.Release() // closes the socket once no connection uses it
	}
	return nil
}

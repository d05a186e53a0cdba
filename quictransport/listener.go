package quictransport

import (
	"context"
	"errors"
	"net"
	"sync/atomic"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica/internal/quicconn"
	"github.com/replicago/replica/transport"
)

type listener struct {
	cfg     Config
	ep      *quicconn.Endpoint
	ln      *quic.Listener
	q       *quicconn.AcceptQueue
	pending atomic.Int64 // connections in handshake (Config.MaxPending)
}

// Listen listens for QUIC connections on the UDP address addr (such as
// "127.0.0.1:0"). Close stops accepting and refuses new connections at
// once; established connections stay open, and the socket closes once the
// last of them ends.
func Listen(addr string, cfg Config) (transport.Listener, error) {
	return quicconn.ListenAddr(addr, func(pc net.PacketConn) (transport.Listener, error) { return listen(pc, true, cfg) })
}

// ListenPacket listens for QUIC connections on pc, which may be a simulated
// network. The caller closes pc after closing the listener and its
// connections.
func ListenPacket(pc net.PacketConn, cfg Config) (transport.Listener, error) {
	return listen(pc, false, cfg)
}

// listen serves on pc, which the listener closes when done if ownPC.
func listen(pc net.PacketConn, ownPC bool, cfg Config) (transport.Listener, error) {
	if err := quicconn.CheckServerTLS("quictransport", cfg.TLS); err != nil {
		return nil, err
	}
	cfg.Config = cfg.Config.WithDefaults()
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = transport.DefaultMaxPending
	}
	ep := quicconn.NewEndpoint(pc, ownPC)
	ln, err := ep.Transport.Listen(cfg.tlsConfig(), cfg.quicConfig(true))
	if err != nil {
		ep.Release()
		return nil, err
	}
	l := &listener{cfg: cfg, ep: ep, ln: ln, q: quicconn.NewAcceptQueue()}
	ep.OnClose = func() { ln.Close() }
	go l.acceptLoop()
	return l, nil
}

func (l *listener) acceptLoop() {
	for {
		qc, err := l.ln.Accept(context.Background())
		if err != nil {
			l.Close()
			return
		}
		l.ep.Track(qc)
		if l.isClosed() { // completed its handshake as the listener closed
			qc.CloseWithError(quic.ApplicationErrorCode(transport.CloseGoingAway), "server is not accepting connections")
			continue
		}
		if l.pending.Add(1) > int64(l.cfg.MaxPending) {
			l.pending.Add(-1)
			qc.CloseWithError(quic.ApplicationErrorCode(transport.CloseServerBusy), "too many connections in their handshake")
			continue
		}
		go func() {
			defer l.pending.Add(-1)
			l.handshake(qc)
		}()
	}
}

// handshake waits for the client's message stream and preamble, then hands
// the connection to Accept.
func (l *listener) handshake(qc *quic.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.tunables().HandshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(l.q.Context(), cancel)
	defer stop()
	str, err := qc.AcceptStream(ctx)
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
		qc.CloseWithError(quic.ApplicationErrorCode(code), reason)
		return
	}
	l.q.Push(ctx, newConn(qc, str, l.cfg.Config))
}

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

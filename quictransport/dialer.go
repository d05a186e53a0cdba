package quictransport

import (
	"context"
	"errors"
	"net"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica/internal/quicconn"
	"github.com/replicago/replica/transport"
)

// A Dialer connects to a quictransport listener.
type Dialer struct {
	Config Config

	// PacketConn, if set, returns the packet conn each Dial sends from (a
	// simulated network, say); the connection closes it when it ends, or
	// Dial does when it fails. If nil, each Dial opens its own UDP socket on
	// an ephemeral port of the local address that routes to the server.
	PacketConn func() (net.PacketConn, error)
}

var _ transport.Dialer = (*Dialer)(nil)

// Dial connects to addr ("host:port"), opens the message stream and writes
// the preamble. ctx bounds all of it, as does Config.HandshakeTimeout.
func (d *Dialer) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	cfg := d.Config
	if cfg.TLS == nil {
		return nil, errors.New("quictransport: Dialer.Config.TLS is required")
	}
	cfg.Config = cfg.Config.WithDefaults()
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	tlsConf := cfg.tlsConfig()
	if tlsConf.ServerName == "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			tlsConf.ServerName = host
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.tunables().HandshakeTimeout)
	defer cancel()
	qc, err := quicconn.Dial(ctx, raddr, d.PacketConn, tlsConf, cfg.quicConfig(false))
	if err != nil {
		return nil, err
	}
	str, err := qc.OpenStreamSync(ctx)
	if err == nil {
		deadline, _ := ctx.Deadline()
		err = quicconn.WritePreamble(str, deadline)
	}
	if err != nil {
		qc.CloseWithError(quic.ApplicationErrorCode(transport.CloseHandshakeTimeout), "could not open the message stream")
		return nil, err
	}
	return newConn(qc, str, cfg.Config), nil
}

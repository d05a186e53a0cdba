package quictransport

import (
	"context"
	"errors"
	"net"
	"time"

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
	var pc net.PacketConn
	if d.PacketConn != nil {
		pc, err = d.PacketConn()
	} else {
		pc, err = listenUDPFor(raddr)
	}
	if err != nil {
		return nil, err
	}
	tr := &quic.Transport{Conn: pc}
	release := func() {
		tr.Close()
		pc.Close()
	}

	ctx, cancel := context.WithTimeout(ctx, cfg.tunables().HandshakeTimeout)
	defer cancel()
	qc, err := tr.Dial(ctx, raddr, tlsConf, cfg.quicConfig(false))
	if err != nil {
		release()
		return nil, err
	}
	context.AfterFunc(qc.Context(), release)
	str, err := qc.OpenStreamSync(ctx)
	if err == nil {
		deadline, _ := ctx.Deadline()
		str.SetWriteDeadline(deadline)
		_, err = str.Write(quicconn.Preamble[:])
		str.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		qc.CloseWithError(quic.ApplicationErrorCode(transport.CloseHandshakeTimeout), "could not open the message stream")
		return nil, err
	}
	return newConn(qc, str, cfg.Config), nil
}

// listenUDPFor opens a UDP socket on the local address the system routes to
// raddr from, so that LocalAddr reports the address the server sees rather
// than a wildcard.
func listenUDPFor(raddr *net.UDPAddr) (*net.UDPConn, error) {
	var laddr *net.UDPAddr
	if probe, err := net.DialUDP("udp", nil, raddr); err == nil {
		if a, ok := probe.LocalAddr().(*net.UDPAddr); ok {
			laddr = &net.UDPAddr{IP: a.IP, Zone: a.Zone}
		}
		probe.Close()
	}
	return net.ListenUDP("udp", laddr)
}

package quicconn

import (
	"context"
	"crypto/tls"
	"errors"
	"net"

	"github.com/quic-go/quic-go"

	"github.com/replicago/replica/transport"
)

// ListenAddr opens a UDP socket on addr and has start serve on it. The
// listener start returns owns the socket; if start fails, the socket is
// closed.
func ListenAddr(addr string, start func(net.PacketConn) (transport.Listener, error)) (transport.Listener, error) {
	udp, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenUDP("udp", udp)
	if err != nil {
		return nil, err
	}
	l, err := start(pc)
	if err != nil {
		pc.Close()
		return nil, err
	}
	return l, nil
}

// CheckServerTLS reports an error, prefixed with pkg, if cfg cannot present
// a certificate.
func CheckServerTLS(pkg string, cfg *tls.Config) error {
	if cfg == nil || len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil {
		return errors.New(pkg + ": Config.TLS needs a certificate")
	}
	return nil
}

// Dial opens a client QUIC connection to raddr from the packet conn newPC
// returns (a simulated network, say) or, if newPC is nil, from a new UDP
// socket on the local address that routes to raddr. The connection owns the
// packet conn: it closes when the connection ends, or at once if Dial fails.
func Dial(ctx context.Context, raddr *net.UDPAddr, newPC func() (net.PacketConn, error), tlsConf *tls.Config, conf *quic.Config) (*quic.Conn, error) {
	var pc net.PacketConn
	var err error
	if newPC != nil {
		pc, err = newPC()
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
	qc, err := tr.Dial(ctx, raddr, tlsConf, conf)
	if err != nil {
		release()
		return nil, err
	}
	context.AfterFunc(qc.Context(), release)
	return qc, nil
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

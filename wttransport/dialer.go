package wttransport

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/webtransport-go"

	"github.com/replicago/replica/internal/quicconn"
	"github.com/replicago/replica/transport"
)

// A Dialer connects to a wttransport listener from Go.
type Dialer struct {
	Config Config

	// CertHashes, if set, makes the dialer accept the server's certificate
	// the way a browser's serverCertificateHashes does: its SHA-256 must
	// be one of these, it must be an ECDSA certificate valid now and for
	// at most 14 days. Config.TLS's own verification is then skipped.
	CertHashes [][32]byte

	// Header is added to the CONNECT request (an Origin, say).
	Header http.Header

	// PacketConn, if set, returns the packet conn each Dial sends from (a
	// simulated network, say); the connection closes it when it ends, or
	// Dial does when it fails. If nil, each Dial opens its own UDP socket on
	// an ephemeral port of the local address that routes to the server.
	PacketConn func() (net.PacketConn, error)
}

var _ transport.Dialer = (*Dialer)(nil)

// Dial connects to addr, either "host:port" (the session goes to
// https://host:port/ + Config.Path) or an https URL, opens the message
// stream and writes the preamble. ctx bounds all of it, as does
// Config.HandshakeTimeout.
func (d *Dialer) Dial(ctx context.Context, addr string) (transport.Conn, error) {
	cfg := d.Config
	cfg.Config = cfg.Config.WithDefaults()
	u, err := d.url(addr)
	if err != nil {
		return nil, err
	}
	raddr, err := net.ResolveUDPAddr("udp", u.Host)
	if err != nil {
		return nil, err
	}
	tlsConf, err := d.tlsConfig(u)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.tunables().HandshakeTimeout)
	defer cancel()
	qc, err := quicconn.Dial(ctx, raddr, d.PacketConn, tlsConf, cfg.quicConfig(false))
	if err != nil {
		return nil, err
	}
	fail := func(err error) (transport.Conn, error) {
		qc.CloseWithError(h3NoError, "")
		return nil, err
	}
	cc, err := (&webtransport.Transport{StreamReorderingTimeout: cfg.tunables().HandshakeTimeout}).NewClientConn(qc)
	if err != nil {
		return fail(err)
	}
	rsp, sess, err := cc.Dial(ctx, u.String(), d.Header)
	if err != nil {
		if rsp != nil {
			return fail(fmt.Errorf("wttransport: %s: %w", rsp.Status, err))
		}
		return fail(err)
	}
	str, err := sess.OpenStreamSync(ctx)
	if err == nil {
		deadline, _ := ctx.Deadline()
		err = quicconn.WritePreamble(str, deadline)
	}
	if err != nil {
		sess.CloseWithError(webtransport.SessionErrorCode(transport.CloseHandshakeTimeout), "could not open the message stream")
		return fail(err)
	}
	return newConn(qc, sess, str, cfg.Config), nil
}

func (d *Dialer) url(addr string) (*url.URL, error) {
	if strings.Contains(addr, "://") {
		u, err := url.Parse(addr)
		if err != nil {
			return nil, err
		}
		if u.Scheme != "https" {
			return nil, fmt.Errorf("wttransport: dial %s: the scheme must be https", addr)
		}
		if u.Port() == "" {
			u.Host = net.JoinHostPort(u.Hostname(), "443")
		}
		return u, nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, err
	}
	return &url.URL{Scheme: "https", Host: addr, Path: d.Config.path()}, nil
}

func (d *Dialer) tlsConfig(u *url.URL) (*tls.Config, error) {
	var t *tls.Config
	switch {
	case d.Config.TLS != nil:
		t = d.Config.TLS.Clone()
	case len(d.CertHashes) > 0:
		t = &tls.Config{}
	default:
		return nil, errors.New("wttransport: the Dialer needs Config.TLS or CertHashes")
	}
	t.NextProtos = []string{http3.NextProtoH3}
	if t.ServerName == "" {
		t.ServerName = u.Hostname()
	}
	if len(d.CertHashes) > 0 {
		hashes := slices.Clone(d.CertHashes)
		t.InsecureSkipVerify = true
		t.VerifyConnection = func(cs tls.ConnectionState) error { return verifyHash(cs, hashes, time.Now()) }
	}
	return t, nil
}

// verifyHash checks the server's certificate as serverCertificateHashes
// does.
func verifyHash(cs tls.ConnectionState, hashes [][32]byte, now time.Time) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("wttransport: the server sent no certificate")
	}
	leaf := cs.PeerCertificates[0]
	if !slices.Contains(hashes, sha256.Sum256(leaf.Raw)) {
		return errors.New("wttransport: the server certificate matches none of CertHashes")
	}
	if _, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok {
		return errors.New("wttransport: a certificate given by hash must be ECDSA")
	}
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return fmt.Errorf("wttransport: the server certificate is valid from %v to %v", leaf.NotBefore, leaf.NotAfter)
	}
	if leaf.NotAfter.Sub(leaf.NotBefore) > MaxCertValidity {
		return errors.New("wttransport: a certificate given by hash must be valid for at most 14 days")
	}
	return nil
}

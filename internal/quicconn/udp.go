package quicconn

import (
	"crypto/tls"
	"errors"
	"net"
)

// ListenUDP opens the UDP socket a QUIC listener serves on.
func ListenUDP(addr string) (*net.UDPConn, error) {
	udp, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	return net.ListenUDP("udp", udp)
}

// CheckServerTLS reports an error, prefixed with pkg, if cfg cannot present
// a certificate.
func CheckServerTLS(pkg string, cfg *tls.Config) error {
	if cfg == nil || len(cfg.Certificates) == 0 && cfg.GetCertificate == nil && cfg.GetConfigForClient == nil {
		return errors.New(pkg + ": Config.TLS needs a certificate")
	}
	return nil
}

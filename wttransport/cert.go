package wttransport

import (
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/replicago/replica/internal/quicconn"
)

// A CertManager keeps a self-signed development certificate for browsers,
// which accept it through serverCertificateHashes, and rotates it before
// it expires. Serve with TLSConfig (or GetCertificate) and give pages the
// current Hashes each time they connect.
//
// Rotation: when the certificate served has less than Renew left, the
// manager makes the next one and publishes both hashes; when it has less
// than half of Renew left, the manager serves the next one. A page that
// fetched the hashes in between accepts either, and one that fetched them
// before the next certificate existed keeps connecting until the switch.
// Certificates are made lazily, when the manager is asked for one or for
// the hashes, so an idle manager does no work.
//
// The zero value is ready to use. A CertManager is safe for concurrent use.
type CertManager struct {
	// Hosts the certificates are for (DNS names or IP addresses); default
	// "localhost", "127.0.0.1" and "::1".
	Hosts []string
	// Validity of each certificate: DefaultCertValidity if zero, at most
	// MaxCertValidity.
	Validity time.Duration
	// Renew is how long before the served certificate expires the next is
	// made and published; the served certificate changes at half of it.
	// The default is a third of Validity.
	Renew time.Duration
	// Now returns the current time; time.Now if nil.
	Now func() time.Time

	mu    sync.Mutex
	certs []*tls.Certificate // oldest first, none expired after rotate
}

func (m *CertManager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *CertManager) validity() (validity, renew time.Duration, err error) {
	validity = m.Validity
	if validity == 0 {
		validity = DefaultCertValidity
	}
	if validity < 0 || validity > MaxCertValidity {
		return 0, 0, fmt.Errorf("wttransport: CertManager.Validity must be more than 0 and at most %v, got %v", MaxCertValidity, validity)
	}
	renew = m.Renew
	if renew == 0 {
		renew = validity / 3
	}
	if renew < 0 || renew >= validity {
		return 0, 0, fmt.Errorf("wttransport: CertManager.Renew must be more than 0 and less than the validity %v, got %v", validity, renew)
	}
	return validity, renew, nil
}

// rotate drops expired certificates and makes the next one when it is
// due. m.mu is held.
func (m *CertManager) rotate() error {
	validity, renew, err := m.validity()
	if err != nil {
		return err
	}
	now := m.now()
	live := m.certs[:0]
	for _, c := range m.certs {
		if now.Before(c.Leaf.NotAfter) {
			live = append(live, c)
		}
	}
	clear(m.certs[len(live):])
	m.certs = live
	if n := len(m.certs); n == 0 || m.certs[n-1].Leaf.NotAfter.Sub(now) < renew {
		hosts := m.Hosts
		if len(hosts) == 0 {
			hosts = []string{"localhost", "127.0.0.1", "::1"}
		}
		c, err := quicconn.SelfSignedAt(hosts, now, validity)
		if err != nil {
			return err
		}
		m.certs = append(m.certs, &c)
	}
	return nil
}

// current returns the certificate to serve: the oldest that has at least
// half of Renew left, else the newest. m.mu is held, after rotate.
func (m *CertManager) current() *tls.Certificate {
	_, renew, _ := m.validity()
	now := m.now()
	for _, c := range m.certs {
		if c.Leaf.NotAfter.Sub(now) >= renew/2 {
			return c
		}
	}
	return m.certs[len(m.certs)-1]
}

// GetCertificate returns the certificate to serve now; it is the
// tls.Config.GetCertificate of TLSConfig.
func (m *CertManager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.rotate(); err != nil {
		return nil, err
	}
	return m.current(), nil
}

// Hashes returns the SHA-256 hashes of the certificates a client may be
// served from now until the next rotation, for serverCertificateHashes
// (and Dialer.CertHashes): the one served now, then the next if there is
// one.
func (m *CertManager) Hashes() ([][32]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.rotate(); err != nil {
		return nil, err
	}
	cur := m.current()
	hashes := [][32]byte{CertHash(*cur)}
	for _, c := range m.certs {
		if c != cur && c.Leaf.NotAfter.After(cur.Leaf.NotAfter) {
			hashes = append(hashes, CertHash(*c))
		}
	}
	return hashes, nil
}

// TLSConfig returns a server tls.Config that serves m's certificates, for
// Config.TLS.
func (m *CertManager) TLSConfig() *tls.Config {
	return &tls.Config{GetCertificate: m.GetCertificate}
}

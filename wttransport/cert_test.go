package wttransport_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wttransport"
)

// clock is a settable time source for CertManager.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func served(t *testing.T, m *wttransport.CertManager) *tls.Certificate {
	t.Helper()
	c, err := m.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hashes(t *testing.T, m *wttransport.CertManager) [][32]byte {
	t.Helper()
	h, err := m.Hashes()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A CertManager's certificate is one browsers accept by hash, and it is
// replaced before it expires, with an overlap in which both hashes are
// published and the old certificate is still served.
func TestCertManagerRotation(t *testing.T) {
	day := 24 * time.Hour
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	m := &wttransport.CertManager{Validity: 12 * day, Renew: 4 * day, Now: clk.now}

	first := served(t, m)
	if _, ok := first.Leaf.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("key is %T, want ECDSA", first.Leaf.PublicKey)
	}
	if v := first.Leaf.NotAfter.Sub(first.Leaf.NotBefore); v > wttransport.MaxCertValidity {
		t.Errorf("validity %v, over 14 days", v)
	}
	if now := clk.now(); now.Before(first.Leaf.NotBefore) || !now.Before(first.Leaf.NotAfter) {
		t.Errorf("certificate valid %v to %v, not at %v", first.Leaf.NotBefore, first.Leaf.NotAfter, now)
	}
	h1 := wttransport.CertHash(*first)
	if got := hashes(t, m); !slices.Equal(got, [][32]byte{h1}) {
		t.Fatalf("Hashes = %x, want only the served certificate's", got)
	}

	// 5 days left: still the first certificate, nothing new.
	clk.advance(7 * day)
	if served(t, m) != first || len(hashes(t, m)) != 1 {
		t.Fatal("rotated with more than Renew left")
	}
	// Under 4 days left: the next certificate is made and published,
	// the first still served.
	clk.advance(day + time.Hour)
	got := hashes(t, m)
	if len(got) != 2 || got[0] != h1 || got[1] == h1 {
		t.Fatalf("Hashes = %x, want the served certificate's, then the next one's", got)
	}
	h2 := got[1]
	if served(t, m) != first {
		t.Fatal("switched with more than Renew/2 left")
	}
	// Under 2 days left: the next certificate is served, and is the only
	// hash.
	clk.advance(2 * day)
	second := served(t, m)
	if wttransport.CertHash(*second) != h2 {
		t.Fatal("the certificate served is not the one published next")
	}
	if got := hashes(t, m); !slices.Equal(got, [][32]byte{h2}) {
		t.Fatalf("Hashes = %x, want only the new certificate's", got)
	}
	if !second.Leaf.NotAfter.After(first.Leaf.NotAfter) {
		t.Error("the next certificate does not outlive the first")
	}
	// Days later, long after the first expired, the cycle goes on: the
	// manager never serves an expired certificate.
	for range 40 {
		clk.advance(day)
		c := served(t, m)
		if now := clk.now(); !now.Before(c.Leaf.NotAfter) || now.Before(c.Leaf.NotBefore) {
			t.Fatalf("at %v served a certificate valid %v to %v", now, c.Leaf.NotBefore, c.Leaf.NotAfter)
		}
		if h := hashes(t, m); h[0] != wttransport.CertHash(*c) {
			t.Fatal("the first hash is not the served certificate's")
		}
	}
}

func TestCertManagerConfig(t *testing.T) {
	for _, m := range []*wttransport.CertManager{
		{Validity: 15 * 24 * time.Hour},
		{Validity: -time.Hour},
		{Validity: 24 * time.Hour, Renew: 24 * time.Hour},
		{Renew: -time.Hour},
	} {
		if _, err := m.Hashes(); err == nil {
			t.Errorf("Validity %v, Renew %v: no error", m.Validity, m.Renew)
		}
		if _, err := m.GetCertificate(nil); err == nil {
			t.Errorf("Validity %v, Renew %v: GetCertificate made a certificate", m.Validity, m.Renew)
		}
	}
}

// A client that knows only the published hashes connects to a listener
// serving the manager's certificate, as a browser page does.
func TestCertManagerServes(t *testing.T) {
	m := &wttransport.CertManager{}
	ln, err := wttransport.Listen("127.0.0.1:0", wttransport.Config{TLS: m.TLSConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h, err := m.Hashes()
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{ln: ln}
	c, _ := s.pair(t, &wttransport.Dialer{CertHashes: h}, "")
	c.Close(transport.CloseNormal, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wrong := &wttransport.Dialer{CertHashes: [][32]byte{{9}}}
	if c, err := wrong.Dial(ctx, ln.Addr().String()); err == nil {
		c.Close(0, "")
		t.Fatal("Dial accepted a certificate matching no hash")
	}
}

package quicconn

import (
	"time"

	"github.com/quic-go/quic-go"
)

// Defaults of the QUIC tunables.
const (
	DefaultKeepAlivePeriod  = 5 * time.Second
	DefaultIdleTimeout      = 15 * time.Second
	DefaultHandshakeTimeout = 10 * time.Second
)

// Tunables are the QUIC settings quictransport and wttransport expose.
type Tunables struct {
	KeepAlivePeriod  time.Duration // 0: default; < 0: none
	IdleTimeout      time.Duration // 0: default
	HandshakeTimeout time.Duration // 0: default
	Base             *quic.Config  // copied, then overridden
}

// WithDefaults returns t with zero fields set to their defaults.
func (t Tunables) WithDefaults() Tunables {
	if t.KeepAlivePeriod == 0 {
		t.KeepAlivePeriod = DefaultKeepAlivePeriod
	}
	if t.IdleTimeout <= 0 {
		t.IdleTimeout = DefaultIdleTimeout
	}
	if t.HandshakeTimeout <= 0 {
		t.HandshakeTimeout = DefaultHandshakeTimeout
	}
	return t
}

// QUICConfig returns the quic.Config for t (which must have its defaults).
// quic-go aborts a handshake after twice HandshakeIdleTimeout, so that is
// half of HandshakeTimeout.
func (t Tunables) QUICConfig() *quic.Config {
	var c quic.Config
	if t.Base != nil {
		c = *t.Base.Clone()
	}
	c.KeepAlivePeriod = max(t.KeepAlivePeriod, 0)
	c.MaxIdleTimeout = t.IdleTimeout
	c.HandshakeIdleTimeout = t.HandshakeTimeout / 2
	return &c
}

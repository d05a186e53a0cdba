package wttransport_test

import (
	"crypto/tls"
	"testing"

	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/transport/transporttest"
	"github.com/replicago/replica/wttransport"
)

func TestConformance(t *testing.T) {
	cert, hash, err := wttransport.GenerateCert(0)
	if err != nil {
		t.Fatal(err)
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{cert}}
	transporttest.Run(t, func(t *testing.T, server, client transport.Config) (transport.Listener, transport.Dialer) {
		ln, err := wttransport.Listen("127.0.0.1:0", wttransport.Config{Config: server, TLS: serverTLS})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln, &wttransport.Dialer{Config: wttransport.Config{Config: client}, CertHashes: [][32]byte{hash}}
	})
}

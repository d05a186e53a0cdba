package quictransport_test

import (
	"testing"

	"github.com/replicago/replica/quictransport"
	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/transport/transporttest"
)

func TestConformance(t *testing.T) {
	serverTLS, clientTLS, err := quictransport.DevTLS()
	if err != nil {
		t.Fatal(err)
	}
	transporttest.Run(t, func(t *testing.T, server, client transport.Config) (transport.Listener, transport.Dialer) {
		ln, err := quictransport.Listen("127.0.0.1:0", quictransport.Config{Config: server, TLS: serverTLS})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln, &quictransport.Dialer{Config: quictransport.Config{Config: client, TLS: clientTLS}}
	})
}

// The suite again with QUIC datagrams off, which exercises its no-datagram
// branch.
func TestConformanceNoDatagrams(t *testing.T) {
	serverTLS, clientTLS, err := quictransport.DevTLS()
	if err != nil {
		t.Fatal(err)
	}
	transporttest.Run(t, func(t *testing.T, server, client transport.Config) (transport.Listener, transport.Dialer) {
		ln, err := quictransport.Listen("127.0.0.1:0", quictransport.Config{Config: server, TLS: serverTLS, DisableDatagrams: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln, &quictransport.Dialer{Config: quictransport.Config{Config: client, TLS: clientTLS, DisableDatagrams: true}}
	})
}

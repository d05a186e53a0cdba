package wttransport_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log"
	"net/http"

	"github.com/replicago/replica/transport"
	"github.com/replicago/replica/wttransport"
)

func Example() {
	// A 13-day ECDSA certificate; a browser page passes its hash as
	// serverCertificateHashes: [{algorithm: "sha-256", value: ...}].
	cert, hash, err := wttransport.GenerateCert(0, "localhost", "127.0.0.1")
	if err != nil {
		log.Fatal(err)
	}
	_ = base64.StdEncoding.EncodeToString(hash[:]) // for the page

	ln, err := wttransport.Listen("127.0.0.1:0", wttransport.Config{
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	ctx := context.Background()
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		msg, _ := c.Receive(ctx)
		c.Send(append([]byte("echo: "), msg...))
	}()

	// A Go client checks the certificate by hash, as a browser does.
	d := &wttransport.Dialer{CertHashes: [][32]byte{hash}}
	c, err := d.Dial(ctx, ln.Addr().String()) // https://127.0.0.1:port/replica
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(transport.CloseNormal, "")
	c.Send([]byte("hello"))
	reply, _ := c.Receive(ctx)
	fmt.Println(string(reply))
	// Output: echo: hello
}

func ExampleCertManager() {
	// A development certificate that browsers accept by hash, rotated
	// before it expires.
	certs := &wttransport.CertManager{}
	ln, err := wttransport.Listen("127.0.0.1:0", wttransport.Config{TLS: certs.TLSConfig()})
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()

	// The page fetches the current hashes before each connect, from the
	// HTTP server that serves it, and passes them as
	// serverCertificateHashes: [{algorithm: "sha-256", value: ...}, ...].
	http.HandleFunc("/hashes", func(w http.ResponseWriter, r *http.Request) {
		hashes, err := certs.Hashes()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var list []string
		for _, h := range hashes {
			list = append(list, base64.StdEncoding.EncodeToString(h[:]))
		}
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(list)
	})
}

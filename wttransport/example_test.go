package wttransport_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"log"

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

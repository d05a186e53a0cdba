package quictransport_test

import (
	"context"
	"fmt"
	"log"

	"github.com/replicago/replica/quictransport"
	"github.com/replicago/replica/transport"
)

func Example() {
	serverTLS, clientTLS, err := quictransport.DevTLS()
	if err != nil {
		log.Fatal(err)
	}
	ln, err := quictransport.Listen("127.0.0.1:0", quictransport.Config{TLS: serverTLS})
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

	d := &quictransport.Dialer{Config: quictransport.Config{TLS: clientTLS}}
	c, err := d.Dial(ctx, ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(transport.CloseNormal, "")
	c.Send([]byte("hello"))
	reply, _ := c.Receive(ctx)
	fmt.Println(string(reply))
	// Output: echo: hello
}

package client_test

import (
	"context"
	"testing"

	"github.com/replicago/replica/client"
	"github.com/replicago/replica/internal/demo"
	"github.com/replicago/replica/transport"
)

// TestDialMissingArguments: a nil dialer or schema is an error, not a panic.
func TestDialMissingArguments(t *testing.T) {
	nw := transport.NewMemNetwork()
	if _, err := client.Dial(context.Background(), nil, "game", demo.Schema(), client.DialConfig{}); err == nil {
		t.Error("Dial with a nil dialer succeeded")
	}
	if _, err := client.Dial(context.Background(), nw.Dialer(transport.Config{}), "game", nil, client.DialConfig{}); err == nil {
		t.Error("Dial with a nil schema succeeded")
	}
}

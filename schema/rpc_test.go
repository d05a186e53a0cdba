package schema_test

import (
	"strings"
	"testing"

	"github.com/replicago/replica/schema"
)

func rpcSchema(t *testing.T, dir schema.Direction, argKind schema.Kind) *schema.Schema {
	t.Helper()
	args := &schema.Struct{Name: "Fire", Fields: []*schema.Field{
		{ID: 1, Name: "x", Type: schema.Type{Kind: argKind}, Vis: schema.VisAll},
	}}
	c := &schema.Struct{Name: "Player", Class: true, ID: 1,
		Fields: []*schema.Field{{ID: 1, Name: "hp", Type: schema.Type{Kind: schema.Int16}, Vis: schema.VisAll}},
		RPCs:   []*schema.RPC{{ID: 1, Name: "fire", Dir: dir, Args: args}},
	}
	s, err := schema.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRPCDescriptor round-trips a class with an RPC through the
// descriptor and checks the compatibility rules for RPCs.
func TestRPCDescriptor(t *testing.T) {
	s := rpcSchema(t, schema.ClientToServer, schema.Float32)
	d, err := schema.DecodeDescriptor(s.AppendDescriptor(nil))
	if err != nil {
		t.Fatal(err)
	}
	r := d.Class(1).RPC(1)
	if r == nil || r.Name != "fire" || r.Dir != schema.ClientToServer || r.Args.Field(1).Type.Kind != schema.Float32 {
		t.Fatalf("decoded RPC %+v", r)
	}
	if err := schema.Compatible(s, d); err != nil {
		t.Fatal(err)
	}
	if err := schema.Compatible(s, rpcSchema(t, schema.ServerToClient, schema.Float32)); err == nil || !strings.Contains(err.Error(), "called by the client here") {
		t.Fatalf("direction change: %v", err)
	}
	if err := schema.Compatible(s, rpcSchema(t, schema.ClientToServer, schema.Int32)); err == nil || !strings.Contains(err.Error(), "RPC fire") {
		t.Fatalf("argument type change: %v", err)
	}
}

func TestRPCLayoutErrors(t *testing.T) {
	args := &schema.Struct{Name: "A"}
	for _, tc := range []struct {
		name string
		rpcs []*schema.RPC
		want string
	}{
		{"id 0", []*schema.RPC{{ID: 0, Name: "r", Args: args}}, "RPC ID 0"},
		{"duplicate", []*schema.RPC{{ID: 1, Name: "r", Args: args}, {ID: 1, Name: "s", Args: args}}, "duplicate RPC ID"},
		{"no args", []*schema.RPC{{ID: 1, Name: "r"}}, "must be a struct"},
	} {
		c := &schema.Struct{Name: "C", Class: true, ID: 1, RPCs: tc.rpcs}
		if _, err := schema.New(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

package store_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps: package store and its conformance suite import only the
// standard library and replica's core packages, like the core itself
// (see the module's deps_test.go); the database drivers live in the
// adapter packages sqlitestore, pgstore and redisstore.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".", "./storetest").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, "github.com/replicago/replica") || strings.Contains(p, "/internal/") || strings.HasSuffix(p, "store") && !strings.HasSuffix(p, "/store") {
			t.Errorf("store depends on %s", p)
		}
	}
}

package replay_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps checks that package replay, like the core packages it builds
// on (see the module's TestCoreDeps), imports only the standard library
// and the core.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, "github.com/replicago/replica") || strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/gen") {
			t.Errorf("package replay depends on %s", p)
		}
	}
}

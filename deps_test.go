package replica_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreDeps enforces that the core packages, which every user compiles,
// import only the standard library and each other. Heavy dependencies
// belong in adapter packages named <backend><role>.
func TestCoreDeps(t *testing.T) {
	core := []string{".", "./schema", "./wire", "./state", "./codec", "./client", "./transport", "./session", "./auth", "./ratelimit"}
	args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, core...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, "github.com/replicago/replica") || strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/gen") {
			t.Errorf("core package depends on %s", p)
		}
	}
}

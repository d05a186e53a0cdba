package replica_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/replicago/replica"
)

// TestDefaultLogger checks that the default logger passes warnings and
// errors, with their attributes and groups, to slog's default handler,
// and drops the rest.
func TestDefaultLogger(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	defer slog.SetDefault(old)
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))

	l := replica.DefaultLogger().With("user", "alice").WithGroup("conn")
	l.Debug("debug line")
	l.Info("info line")
	l.Warn("warn line", "code", 7)
	l.Error("error line")
	out := buf.String()
	for _, dropped := range []string{"debug line", "info line"} {
		if strings.Contains(out, dropped) {
			t.Errorf("%q reached the handler:\n%s", dropped, out)
		}
	}
	for _, kept := range []string{`level=WARN msg="warn line" user=alice conn.code=7`, `level=ERROR msg="error line" user=alice`} {
		if !strings.Contains(out, kept) {
			t.Errorf("missing %q in:\n%s", kept, out)
		}
	}
}

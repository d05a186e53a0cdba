package replica

import (
	"context"
	"log/slog"
)

// DefaultLogger returns the logger a Server (and a replay.Player) uses
// when its configuration gives none: records of level Warn and above go to
// slog.Default's handler as it is when DefaultLogger is called (the
// standard error, unless the game set another), the rest nowhere. A
// server that discarded everything by default would also discard its
// warnings, such as serving auth.Anonymous on a public address.
func DefaultLogger() *slog.Logger {
	return slog.New(minLevel{h: slog.Default().Handler(), min: slog.LevelWarn})
}

// minLevel passes h the records of level min and above.
type minLevel struct {
	h   slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}

func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h: m.h.WithAttrs(as), min: m.min}
}

func (m minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h: m.h.WithGroup(name), min: m.min}
}

package gen

import (
	"cmp"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Error is a mistake in the user's package: a spec struct, a tag, a
// directive or the lock file. Pos locates it; Msg is a sentence for the
// game programmer who wrote the spec.
type Error struct {
	Pos token.Position
	Msg string
}

// Error formats e as "file:line:col: msg". The file name is relative to the
// working directory when that is shorter; line and column are left out when
// unknown (as for errors about the lock file as a whole).
func (e *Error) Error() string {
	if e.Pos.Filename == "" {
		return e.Msg
	}
	s := shortPath(e.Pos.Filename)
	if e.Pos.Line > 0 {
		s += fmt.Sprintf(":%d", e.Pos.Line)
		if e.Pos.Column > 0 {
			s += fmt.Sprintf(":%d", e.Pos.Column)
		}
	}
	return s + ": " + e.Msg
}

// ErrorList is every user error Load found, sorted by position. It is the
// error Load returns when the package has mistakes.
type ErrorList []*Error

// Error returns the errors one per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the errors, so that errors.As finds a *Error.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// Len, Less and Swap make ErrorList a sort.Interface ordering errors by
// file, line, column and message.
func (l ErrorList) Len() int      { return len(l) }
func (l ErrorList) Swap(i, j int) { l[i], l[j] = l[j], l[i] }
func (l ErrorList) Less(i, j int) bool {
	return compareErrors(l[i], l[j]) < 0
}

func compareErrors(a, b *Error) int {
	return cmp.Or(
		cmp.Compare(a.Pos.Filename, b.Pos.Filename),
		cmp.Compare(a.Pos.Line, b.Pos.Line),
		cmp.Compare(a.Pos.Column, b.Pos.Column),
		cmp.Compare(a.Msg, b.Msg))
}

// sort orders l and drops duplicates.
func (l ErrorList) sort() ErrorList {
	slices.SortStableFunc(l, compareErrors)
	return slices.CompactFunc(l, func(a, b *Error) bool { return a.Pos == b.Pos && a.Msg == b.Msg })
}

// shortPath returns name relative to the working directory when that is
// shorter, the way the go command prints file names.
func shortPath(name string) string {
	if !filepath.IsAbs(name) {
		return name
	}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, name); err == nil && len(rel) < len(name) {
			return rel
		}
	}
	return name
}

// posString formats a position for use inside a message.
func posString(p token.Position) string {
	if p.Line == 0 {
		return shortPath(p.Filename)
	}
	return fmt.Sprintf("%s:%d", shortPath(p.Filename), p.Line)
}

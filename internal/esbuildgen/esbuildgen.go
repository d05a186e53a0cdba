// Package esbuildgen holds what the go:generate bundlers of the
// repository's TypeScript share (internal/web/bundle, internal/tsnode/bundle):
// finding the module root, running esbuild's Go API for one output file,
// and writing a file only when its contents change, so that generating
// again touches nothing.
package esbuildgen

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// RuntimeAlias maps the package name generated TypeScript files import
// the runtime by to the runtime's sources, relative to the module root
// (use it with AbsWorkingDir set to ModuleRoot).
var RuntimeAlias = map[string]string{"@replicago/replica": "./ts/src/index.ts"}

// Build runs esbuild with opts, which must produce one output file, and
// returns that file's contents.
func Build(opts api.BuildOptions) ([]byte, error) {
	res := api.Build(opts)
	if len(res.Errors) > 0 {
		var msgs []string
		for _, m := range res.Errors {
			where := ""
			if m.Location != nil {
				where = fmt.Sprintf("%s:%d: ", m.Location.File, m.Location.Line)
			}
			msgs = append(msgs, where+m.Text)
		}
		return nil, fmt.Errorf("esbuild: %s", strings.Join(msgs, "; "))
	}
	if len(res.OutputFiles) != 1 {
		return nil, fmt.Errorf("esbuild wrote %d files, want 1", len(res.OutputFiles))
	}
	return res.OutputFiles[0].Contents, nil
}

// WriteIfChanged writes b to path unless it already holds b.
func WriteIfChanged(path string, b []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		return nil
	}
	return os.WriteFile(path, b, 0o644)
}

// ModuleRoot returns the directory of the go.mod above the working
// directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

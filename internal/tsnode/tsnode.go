// Package tsnode runs the TypeScript client runtime (ts/src) in Node for Go
// tests and benchmarks: it starts `node` on driver.mjs, the runtime and a
// small driver (driver.ts) bundled by go generate with esbuild's Go API
// (./bundle; committed, so no npm, tsc or esbuild is needed to run it), and
// feeds it the bytes a client would receive, tick by tick, over
// stdin/stdout. Canonical renders a Go replica in the same canonical text
// the driver renders the TypeScript one in, so the two can be compared.
//
// Frames, both ways: a uint32 little-endian length, then the payload. Go
// sends an op byte and its operands:
//
//	'I' uint32 n, the local descriptor (n bytes), the remote descriptor (the rest; none: the same)
//	'T' uint16 n, n uint32 IDs gained; uint16 n, n IDs lost; uint16 n, n (uint32 ID, uint8 level);
//	    uint16 n, n (uint32 length, segment bytes)
//	'D' the canonical dump
//	'Q' quit
//
// and Node answers each but 'Q' with 'O' and the result (for 'T' the
// float64 nanoseconds applyTick took, for 'D' the dump) or 'E' and an error.
package tsnode

import (
	"bufio"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

//go:generate go run ./bundle

// The bundles go generate builds from ts/src with esbuild's Go API, so
// that the packages and commands that run the runtime in Node need
// neither npm nor esbuild.
var (
	//go:embed runtime.min.js
	runtimeBundle []byte
	//go:embed driver.mjs
	driverBundle []byte
)

// ErrNoNode is returned by Start when `node` is not in PATH.
var ErrNoNode = errors.New("tsnode: node is not installed (not in PATH)")

// RuntimeBundle returns the TypeScript runtime (ts/src/index.ts, without
// generated types) bundled for browsers as one minified ES module, as a
// web game ships it, its internal property names shortened: the committed
// runtime.min.js that go generate (./bundle) builds from ts/src.
func RuntimeBundle() []byte { return runtimeBundle }

// DriverBundle returns the driver and the runtime bundled for Node as an
// ES module: the committed driver.mjs that go generate (./bundle) builds.
func DriverBundle() []byte { return driverBundle }

// A Proc is a Node process running the driver: one TypeScript replica.
type Proc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	dir string
	buf []byte
}

// Start bundles the driver and starts Node on it. It returns ErrNoNode
// when node is not installed.
func Start() (*Proc, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, ErrNoNode
	}
	js := DriverBundle()
	dir, err := os.MkdirTemp("", "tsnode")
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "driver.mjs")
	if err := os.WriteFile(file, js, 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(node, file)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Proc{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<16), dir: dir}, nil
}

// Close stops the process.
func (p *Proc) Close() error {
	p.send([]byte{'Q'})
	p.in.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		err = <-done
	}
	os.RemoveAll(p.dir)
	return err
}

func (p *Proc) send(payload []byte) error {
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(payload)))
	if _, err := p.in.Write(n[:]); err != nil {
		return fmt.Errorf("tsnode: writing to node: %w", err)
	}
	if _, err := p.in.Write(payload); err != nil {
		return fmt.Errorf("tsnode: writing to node: %w", err)
	}
	return nil
}

// call sends payload and reads the answer.
func (p *Proc) call(payload []byte) ([]byte, error) {
	if err := p.send(payload); err != nil {
		return nil, err
	}
	var n [4]byte
	if _, err := io.ReadFull(p.out, n[:]); err != nil {
		return nil, fmt.Errorf("tsnode: reading from node: %w", err)
	}
	body := make([]byte, binary.LittleEndian.Uint32(n[:]))
	if _, err := io.ReadFull(p.out, body); err != nil {
		return nil, fmt.Errorf("tsnode: reading from node: %w", err)
	}
	if len(body) == 0 || body[0] != 'O' {
		return nil, fmt.Errorf("tsnode: node: %s", body[min(1, len(body)):])
	}
	return body[1:], nil
}

// Init makes a new replica with the local descriptor and, when remote is
// not nil, the sender's.
func (p *Proc) Init(local, remote []byte) error {
	b := append([]byte{'I'}, binary.LittleEndian.AppendUint32(nil, uint32(len(local)))...)
	b = append(b, local...)
	b = append(b, remote...)
	_, err := p.call(b)
	return err
}

// A Level is an entity's new level of detail in a tick.
type Level struct {
	ID    uint32
	Level uint8
}

// Tick applies one tick: ownership and level changes, then the segments.
// It returns how long the replica's applyTick took in Node.
func (p *Proc) Tick(gained, lost []uint32, levels []Level, segs ...[]byte) (time.Duration, error) {
	b := append(p.buf[:0], 'T')
	for _, ids := range [][]uint32{gained, lost} {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(ids)))
		for _, id := range ids {
			b = binary.LittleEndian.AppendUint32(b, id)
		}
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(levels)))
	for _, l := range levels {
		b = binary.LittleEndian.AppendUint32(b, l.ID)
		b = append(b, l.Level)
	}
	b = binary.LittleEndian.AppendUint16(b, uint16(len(segs)))
	for _, s := range segs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	p.buf = b
	out, err := p.call(b)
	if err != nil {
		return 0, err
	}
	if len(out) != 8 {
		return 0, fmt.Errorf("tsnode: tick answer of %d bytes", len(out))
	}
	return time.Duration(math.Float64frombits(binary.LittleEndian.Uint64(out))), nil
}

// Dump returns the canonical dump of the TypeScript replica (see Canonical).
func (p *Proc) Dump() (string, error) {
	out, err := p.call([]byte{'D'})
	return string(out), err
}

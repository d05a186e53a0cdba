package replay_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/replicago/replica/replay"
	"github.com/replicago/replica/session"
)

// typed reports whether err is one of the errors bad recordings give.
func typed(err error) bool {
	for _, s := range []error{replay.ErrMagic, replay.ErrVersion, replay.ErrTruncated, replay.ErrCorrupt, replay.ErrNoTick} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// errDisagree reports a keyframe whose state is not what the ticks
// before it make: damage a checksum catches, which a fuzzer that fixes the
// checksums can make.
var errDisagree = errors.New("seek disagrees with playing")

// playAll opens file and plays it from start to end, then seeks to each
// keyframe and the tick after it, and returns the player's replica
// digest at each tick it reached, or the first error.
func playAll(file []byte) (map[uint64]uint64, error) {
	rd, err := replay.Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		return nil, err
	}
	p, err := replay.NewPlayer(rd, replay.PlayerConfig{})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	got := map[uint64]uint64{p.Tick(): digest(p.Replica())}
	for {
		err := p.Step()
		if err == io.EOF {
			break
		}
		if err != nil {
			return got, err
		}
		got[p.Tick()] = digest(p.Replica())
	}
	for _, k := range rd.Keyframes() {
		for _, t := range []uint64{k, k + 1} {
			if t > rd.LastTick() {
				continue
			}
			if err := p.Seek(t); err != nil {
				return got, err
			}
			if d := digest(p.Replica()); got[p.Tick()] != d {
				return got, errDisagree
			}
		}
	}
	return got, nil
}

// TestBadRecordings cuts and corrupts a recording: every damage gives a
// typed error, or, where the damage does not matter (a cut at a record
// boundary, a flip in the trailer's magic), the same playback as the
// intact recording.
func TestBadRecordings(t *testing.T) {
	l := recordW1(t, 40, 30, 5)
	want, err := playAll(l.file)
	if err != nil {
		t.Fatal(err)
	}
	for tick, d := range want {
		if l.digest[0][tick] != d {
			t.Fatalf("tick %d: player %#x, live %#x", tick, d, l.digest[0][tick])
		}
	}
	same := func(got map[uint64]uint64) bool {
		for tick, d := range got {
			if want[tick] != d {
				return false
			}
		}
		return true
	}
	cuts, intact := 0, 0
	for n := range len(l.file) {
		got, err := playAll(l.file[:n])
		switch {
		case err != nil && !typed(err):
			t.Fatalf("cut at %d: untyped error %v", n, err)
		case err == nil && !same(got):
			t.Fatalf("cut at %d: plays differently", n)
		case err == nil:
			intact++
		default:
			cuts++
		}
	}
	if cuts == 0 || intact == 0 {
		t.Fatalf("cuts: %d errors, %d shorter recordings", cuts, intact)
	}
	flips := 0
	for i := range l.file {
		bad := bytes.Clone(l.file)
		bad[i] ^= 0x10
		got, err := playAll(bad)
		switch {
		case err != nil && !typed(err):
			t.Fatalf("flip at %d: untyped error %v", i, err)
		case err == nil && !same(got):
			t.Fatalf("flip at %d: plays differently", i)
		case err != nil:
			flips++
		}
	}
	if flips < len(l.file)-16 {
		t.Fatalf("only %d of %d flips detected", flips, len(l.file))
	}

	for _, tc := range []struct {
		name string
		file []byte
		want error
	}{
		{"empty", nil, replay.ErrTruncated}, // a recorder killed before its first flush
		{"start of the magic", []byte("RPLR"), replay.ErrTruncated},
		{"short", []byte("RIFF"), replay.ErrMagic},
		{"magic", []byte("RIFF0000WAVEfmt "), replay.ErrMagic},
		{"format", append([]byte("RPLREC\r\n\x02"), l.file[9:]...), replay.ErrVersion},
		{"protocol", append([]byte("RPLREC\r\n\x01\x7f"), l.file[10:]...), replay.ErrVersion},
		{"protocol before the tick format", append([]byte("RPLREC\r\n\x01\x05"), l.file[10:]...), replay.ErrVersion},
	} {
		_, err := replay.Open(bytes.NewReader(tc.file), int64(len(tc.file)))
		var fe *replay.FormatError
		if !errors.Is(err, tc.want) || !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a FormatError wrapping %v", tc.name, err, tc.want)
		}
	}
	// Protocol 7 changed the WELCOME alone: a recording of a version 6
	// session plays as it is.
	v6 := bytes.Clone(l.file)
	v6[9] = 6 // the protocol version, after the magic and the format version
	at, desc := len("RPLREC\r\n"), uint64(0)
	for range 5 { // the header's fields; the descriptor's length last
		x, k := binary.Uvarint(v6[at:])
		at, desc = at+k, x
	}
	end := at + int(desc)
	binary.LittleEndian.PutUint32(v6[end:], crc32.ChecksumIEEE(v6[:end]))
	if got, err := playAll(v6); err != nil || !same(got) {
		t.Errorf("a recording of protocol 6: %v", err)
	}
}

// TestWriterOrder checks what the Writer refuses.
func TestWriterOrder(t *testing.T) {
	tick := func(n uint64) [][]byte { return [][]byte{session.AppendTick(nil, &session.Tick{Tick: n})} }
	var b bytes.Buffer
	w, err := replay.NewWriter(&b, replay.Header{Protocol: session.ProtocolVersion, TickRate: 10, Keyframe: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Tick(1, tick(1)); err == nil {
		t.Error("a recording that starts with a tick was written")
	}
	for _, step := range []struct {
		key bool
		n   uint64
		ok  bool
	}{{true, 5, true}, {false, 5, false}, {false, 6, true}, {false, 6, false}, {true, 6, true}, {true, 6, false}, {false, 4, false}, {false, 9, true}} {
		var err error
		if step.key {
			err = w.Keyframe(step.n, tick(step.n))
		} else {
			err = w.Tick(step.n, tick(step.n))
		}
		if (err == nil) != step.ok {
			t.Errorf("key %v tick %d: %v", step.key, step.n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := replay.Open(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if rd.FirstTick() != 5 || rd.LastTick() != 9 || len(rd.Keyframes()) != 2 {
		t.Fatalf("ticks %d..%d, keyframes %v", rd.FirstTick(), rd.LastTick(), rd.Keyframes())
	}
}

// FuzzOpen opens and plays arbitrary bytes as a recording: typed errors,
// never a panic.
func FuzzOpen(f *testing.F) {
	l := recordW1(f, 20, 12, 4)
	f.Add(l.file)
	f.Add(l.file[:len(l.file)-16])
	f.Fuzz(func(t *testing.T, file []byte) {
		if _, err := playAll(file); err != nil && !typed(err) {
			t.Fatalf("untyped error: %v", err)
		}
	})
}

// FuzzRecords plays arbitrary records after a valid header, with their
// checksums made to match, so that the fuzzer reaches the frames and the
// segments behind the checksums: typed errors, never a panic.
func FuzzRecords(f *testing.F) {
	l := recordW1(f, 20, 12, 4)
	hdr := headerLen(l.file)
	f.Add(l.file[hdr : len(l.file)-16])
	f.Fuzz(func(t *testing.T, records []byte) {
		file := append(bytes.Clone(l.file[:hdr]), fixChecksums(records)...)
		if _, err := playAll(file); err != nil && !typed(err) && err != errDisagree {
			t.Fatalf("untyped error: %v", err)
		}
	})
}

// headerLen returns the length of a recording's header (docs/replay.md).
func headerLen(file []byte) int {
	p := file[8:]
	var desc uint64
	for i := range 5 {
		v, k := binary.Uvarint(p)
		p = p[k:]
		if i == 4 {
			desc = v
		}
	}
	return len(file) - len(p) + int(desc) + 4
}

// fixChecksums rewrites the CRC-32 of each whole record of b.
func fixChecksums(b []byte) []byte {
	b = bytes.Clone(b)
	for off := 0; off < len(b); {
		p := b[off+1:]
		_, k1 := binary.Uvarint(p)
		if k1 <= 0 {
			break
		}
		n, k2 := binary.Uvarint(p[k1:])
		end := off + 1 + k1 + k2 + int(n)
		if k2 <= 0 || n > uint64(len(b)) || end+4 > len(b) {
			break
		}
		binary.LittleEndian.PutUint32(b[end:], crc32.ChecksumIEEE(b[off:end]))
		off = end + 4
	}
	return b
}

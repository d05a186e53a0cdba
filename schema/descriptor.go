package schema

import (
	"bytes"
	"errors"
	"fmt"
	"math"

	"github.com/replicago/replica/wire"
)

// DescriptorVersion is the version of the descriptor encoding.
const DescriptorVersion = 2

// ErrDescriptor wraps every error of DecodeDescriptor.
var ErrDescriptor = errors.New("schema: bad descriptor")

// Descriptor limits: a descriptor is read from the network before anything
// else, so it is bounded independently of any configuration.
const (
	maxDescStructs = 4096
	maxDescFields  = 65536 // fields of all structs together
	maxDescRPCs    = 4096  // RPCs of all classes together
	maxDescName    = 256
	maxDescLeaves  = 1 << 20 // leaves of all classes and RPC arguments, nesting flattened

	// The fewest bits an item can take, so a count is checked against
	// what the rest of the input can hold before anything is allocated.
	minStructBits = 5 + 3 + 1     // name, field count, RPC count
	minFieldBits  = 3 + 5 + 5 + 6 // ID gap, name, kind, flags
	minRPCBits    = 3 + 5 + 1 + 3 // ID gap, name, direction, struct index
)

// AppendDescriptor appends the compact descriptor of s to b: every class
// and every struct type it reaches, with field IDs, names, types and
// flags. docs/protocol.md specifies the format.
func (s *Schema) AppendDescriptor(b []byte) []byte {
	var structs []*Struct
	index := make(map[*Struct]int)
	var visit func(st *Struct)
	var visitType func(t *Type)
	visit = func(st *Struct) {
		if _, ok := index[st]; ok {
			return
		}
		index[st] = len(structs)
		structs = append(structs, st)
		for _, f := range st.Fields {
			visitType(&f.Type)
		}
		for _, r := range st.RPCs {
			visit(r.Args)
		}
	}
	visitType = func(t *Type) {
		if t.Struct != nil {
			visit(t.Struct)
		}
		if t.Elem != nil {
			visitType(t.Elem)
		}
	}
	for _, c := range s.Classes {
		visit(c)
	}
	var w wire.Writer
	w.Reset(b[len(b):])
	w.U(DescriptorVersion, 0)
	w.U(uint64(len(structs)), 2)
	for _, st := range structs {
		w.String(st.Name)
		w.U(uint64(len(st.Fields)), 2)
		prev := uint32(0)
		for _, f := range st.Fields {
			w.U(uint64(f.ID-prev-1), 2)
			prev = f.ID
			w.String(f.Name)
			writeType(&w, &f.Type, index)
			w.Bits(uint64(f.Vis), 2)
			w.Bits(uint64(f.Life), 2)
			w.Bits(uint64(f.Chan), 1)
			w.Bool(f.Deprecated)
			band := uint8(0)
			if st.Class {
				band = st.Band(f.LOD)
			}
			w.U(uint64(band), 0)
		}
		w.U(uint64(len(st.RPCs)), 0)
		prev = 0
		for _, r := range st.RPCs {
			w.U(uint64(r.ID-prev-1), 2)
			prev = r.ID
			w.String(r.Name)
			w.Bits(uint64(r.Dir), 1)
			w.U(uint64(index[r.Args]), 2)
		}
	}
	w.U(uint64(len(s.Classes)), 2)
	for _, c := range s.Classes {
		w.U(uint64(index[c]), 2)
		w.U(uint64(c.ID), 4)
		w.U(uint64(len(c.bands)), 0)
		for _, d := range c.bands {
			w.Bits(math.Float64bits(d), 64)
		}
	}
	return append(b, w.Finish()...)
}

func writeType(w *wire.Writer, t *Type, index map[*Struct]int) {
	w.Bits(uint64(t.Kind), 5)
	switch t.Kind {
	case Float32, Float64:
		switch q := t.Quant; {
		case !q.Enabled():
			w.Bits(0, 2)
		case !q.Bounded:
			w.Bits(1, 2)
			w.Bits(math.Float64bits(q.Step), 64)
		default:
			w.Bits(2, 2)
			w.Bits(math.Float64bits(q.Step), 64)
			w.Bits(math.Float64bits(q.Min), 64)
			w.Bits(uint64(q.Bits), 6)
		}
	case Nested:
		w.U(uint64(index[t.Struct]), 2)
	case List:
		writeType(w, t.Elem, index)
	case Map:
		w.Bits(uint64(t.Key), 5)
		writeType(w, t.Elem, index)
	case Bag:
		w.Bits(uint64(t.Key), 5)
		w.U(uint64(index[t.Struct]), 2)
	}
}

// DecodeDescriptor decodes a descriptor produced by AppendDescriptor and
// returns the schema it describes, laid out and validated. Every failure
// wraps ErrDescriptor.
//
// Only the canonical encoding is accepted: the one AppendDescriptor
// produces for the decoded schema. That rules out unreachable structs,
// reordered classes and any other second spelling of one schema, so a
// descriptor can be compared or hashed byte for byte.
func DecodeDescriptor(b []byte) (*Schema, error) {
	s, err := decodeDescriptor(b)
	if err == nil && !bytes.Equal(s.AppendDescriptor(nil), b) {
		err = errors.New("not in canonical form (unreachable structs, or classes or structs out of order)")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDescriptor, err)
	}
	return s, nil
}

func decodeDescriptor(b []byte) (*Schema, error) {
	r := wire.NewReader(b)
	if v := r.U(0); r.Err() == nil && v != DescriptorVersion {
		return nil, fmt.Errorf("version %d, want %d", v, DescriptorVersion)
	}
	n := r.Count(2, maxDescStructs, minStructBits, "structs")
	structs := make([]*Struct, n)
	for i := range structs {
		structs[i] = new(Struct)
	}
	fields, rpcs := 0, 0
	type banded struct {
		st   *Struct
		f    *Field
		band uint64
	}
	var bandFields []banded
	for _, st := range structs {
		st.Name = r.String(maxDescName)
		nf := r.Count(2, maxDescFields-fields, minFieldBits, "fields")
		fields += nf
		prev := uint64(0)
		for j := 0; j < nf && r.Err() == nil; j++ {
			id := prev + 1 + r.U(2)
			if id > math.MaxUint32 {
				return nil, errors.New("field ID out of range")
			}
			prev = id
			f := &Field{ID: uint32(id), Name: r.String(maxDescName)}
			if err := readType(r, &f.Type, structs, 0); err != nil {
				return nil, err
			}
			f.Vis = Visibility(r.Bits(2))
			f.Life = Lifetime(r.Bits(2))
			f.Chan = Channel(r.Bits(1))
			f.Deprecated = r.Bool()
			if band := r.U(0); band != 0 && r.Err() == nil {
				bandFields = append(bandFields, banded{st, f, band})
			}
			st.Fields = append(st.Fields, f)
		}
		nr := r.Count(0, maxDescRPCs-rpcs, minRPCBits, "RPCs")
		rpcs += nr
		prev = 0
		for j := 0; j < nr && r.Err() == nil; j++ {
			id := prev + 1 + r.U(2)
			if id > math.MaxUint32 {
				return nil, errors.New("RPC ID out of range")
			}
			prev = id
			rpc := &RPC{ID: uint32(id), Name: r.String(maxDescName), Dir: Direction(r.Bits(1))}
			idx := r.U(2)
			if r.Err() == nil && idx >= uint64(n) {
				return nil, fmt.Errorf("RPC %s: struct index %d out of range", rpc.Name, idx)
			}
			if r.Err() == nil {
				rpc.Args = structs[idx]
			}
			st.RPCs = append(st.RPCs, rpc)
		}
	}
	nc := r.Count(2, n, 2, "classes")
	classes := make([]*Struct, 0, nc)
	for i := 0; i < nc && r.Err() == nil; i++ {
		idx := r.U(2)
		id := r.U(4)
		if r.Err() != nil {
			break
		}
		if idx >= uint64(n) || id > math.MaxUint32 {
			return nil, errors.New("class entry out of range")
		}
		c := structs[idx]
		if c.Class {
			return nil, fmt.Errorf("struct %s listed as a class twice", c.Name)
		}
		c.Class, c.ID = true, uint32(id)
		nb := r.U(0)
		if r.Err() == nil && nb > MaxBands {
			return nil, fmt.Errorf("class %s: %d level-of-detail bands, at most %d", c.Name, nb, MaxBands)
		}
		for j := 0; j < int(nb) && r.Err() == nil; j++ {
			d := math.Float64frombits(r.Bits(64))
			if r.Err() == nil && (!(d > 0) || math.IsInf(d, 0) || j > 0 && !(d < c.bands[j-1])) {
				return nil, fmt.Errorf("class %s: level-of-detail distance %v: want finite, > 0, and below the band before", c.Name, d)
			}
			c.bands = append(c.bands, d)
		}
		classes = append(classes, c)
	}
	for _, bf := range bandFields {
		if !bf.st.Class || bf.band > uint64(len(bf.st.bands)) {
			return nil, fmt.Errorf("%s.%s: level-of-detail band %d out of range", bf.st.Name, bf.f.Name, bf.band)
		}
		bf.f.LOD = bf.st.bands[bf.band-1]
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	if rem := r.Remaining(); rem >= 8 || r.Bits(uint(rem)) != 0 {
		return nil, errors.New("trailing data")
	}
	// Nested structs multiply: a few hundred bytes of descriptor can name
	// billions of flattened fields. Count them before laying anything out.
	if err := leafBudget(structs); err != nil {
		return nil, err
	}
	return New(classes...)
}

// leafBudget counts the leaves every struct would flatten to once laid
// out (each struct is laid out once, nested structs inline), without
// laying anything out, and refuses more than maxDescLeaves in all (or
// inline recursion, which has no finite count).
func leafBudget(structs []*Struct) error {
	memo := map[*Struct]int{}
	const visiting = -1
	var count func(s *Struct) (int, error)
	count = func(s *Struct) (int, error) {
		switch n, ok := memo[s]; {
		case ok && n == visiting:
			return 0, fmt.Errorf("struct %s contains itself", s.Name)
		case ok:
			return n, nil
		}
		memo[s] = visiting
		total := 0
		for _, f := range s.Fields {
			n := 1
			if f.Type.Kind == Nested && f.Type.Struct != nil {
				var err error
				if n, err = count(f.Type.Struct); err != nil {
					return 0, err
				}
			}
			if total += n; total > maxDescLeaves {
				return 0, fmt.Errorf("more than %d fields once nested structs are flattened", maxDescLeaves)
			}
		}
		memo[s] = total
		return total, nil
	}
	total := 0
	for _, s := range structs {
		n, err := count(s)
		if err != nil {
			return err
		}
		if total += n; total > maxDescLeaves {
			return fmt.Errorf("more than %d fields once nested structs are flattened", maxDescLeaves)
		}
	}
	return nil
}

func readType(r *wire.Reader, t *Type, structs []*Struct, depth int) error {
	if depth > 4 {
		return errors.New("type nested too deeply")
	}
	t.Kind = Kind(r.Bits(5))
	if r.Err() != nil {
		return r.Err()
	}
	structAt := func() (*Struct, error) {
		i := r.U(2)
		if r.Err() != nil {
			return nil, r.Err()
		}
		if i >= uint64(len(structs)) {
			return nil, fmt.Errorf("struct index %d out of range", i)
		}
		return structs[i], nil
	}
	var err error
	switch t.Kind {
	case Bool, Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, String, Bytes, Ref:
	case Float32, Float64:
		switch mode := r.Bits(2); mode {
		case 0:
		case 1, 2:
			t.Quant.Step = math.Float64frombits(r.Bits(64))
			if mode == 2 {
				t.Quant.Bounded = true
				t.Quant.Min = math.Float64frombits(r.Bits(64))
				t.Quant.Bits = uint8(r.Bits(6))
				if math.IsNaN(t.Quant.Min) || math.IsInf(t.Quant.Min, 0) {
					return errors.New("invalid quantization minimum")
				}
			}
			if !(t.Quant.Step > 0) || math.IsInf(t.Quant.Step, 0) {
				return errors.New("invalid quantization step")
			}
		default:
			return fmt.Errorf("quantization mode %d", mode)
		}
	case Nested:
		t.Struct, err = structAt()
	case List:
		t.Elem = new(Type)
		err = readType(r, t.Elem, structs, depth+1)
	case Map:
		t.Key = Kind(r.Bits(5))
		t.Elem = new(Type)
		err = readType(r, t.Elem, structs, depth+1)
	case Bag:
		t.Key = Kind(r.Bits(5))
		t.Struct, err = structAt()
	default:
		return fmt.Errorf("kind %d", t.Kind)
	}
	if err != nil {
		return err
	}
	return r.Err()
}

// Compatible reports whether data encoded with schema remote can be decoded
// into schema local: every field both versions have (matched by class ID
// and field ID path) must have the same type, including quantization.
// Fields only one side has are fine: the decoder skips or defaults them.
// Its error says "here" of local and "on the other side" of remote.
func Compatible(local, remote *Schema) error {
	return CompatibleAs(local, remote, "here", "on the other side")
}

// CompatibleAs is Compatible naming the two sides in its error as the
// caller knows them: a server checking a client's schema says "in the
// client" and "in the server", where "here" would read as the server in
// its log and as the client in the refusal the client gets.
func CompatibleAs(local, remote *Schema, localSide, remoteSide string) error {
	if local == remote {
		return nil
	}
	c := compat{seen: make(map[[2]*Struct]bool), local: localSide, remote: remoteSide}
	for _, rc := range remote.Classes {
		lc := local.Class(rc.ID)
		if lc == nil {
			continue
		}
		if err := c.structs(lc, rc); err != nil {
			return fmt.Errorf("class %s: %w", lc.Name, err)
		}
	}
	return nil
}

// compat walks two schemas' structs side by side (CompatibleAs).
type compat struct {
	seen          map[[2]*Struct]bool
	local, remote string // how the error names each side
}

func (c *compat) structs(l, r *Struct) error {
	key := [2]*Struct{l, r}
	if c.seen[key] {
		return nil
	}
	c.seen[key] = true
	for _, rr := range r.RPCs {
		lr := l.RPC(rr.ID)
		if lr == nil {
			continue
		}
		if lr.Dir != rr.Dir {
			return fmt.Errorf("RPC %s (ID %d): called by the %s %s, by the %s %s", lr.Name, lr.ID, lr.Dir, c.local, rr.Dir, c.remote)
		}
		if err := c.structs(lr.Args, rr.Args); err != nil {
			return fmt.Errorf("RPC %s (ID %d): %w", lr.Name, lr.ID, err)
		}
	}
	for _, rf := range r.Fields {
		lf := l.Field(rf.ID)
		if lf == nil || lf.Deprecated || rf.Deprecated {
			continue
		}
		if err := c.types(&lf.Type, &rf.Type); err != nil {
			return fmt.Errorf("field %s (ID %d): %w", lf.Name, lf.ID, err)
		}
	}
	return nil
}

func (c *compat) types(l, r *Type) error {
	if l.Kind != r.Kind || l.Key != r.Key || l.Quant != r.Quant {
		return fmt.Errorf("type %s %s, %s %s", l, c.local, r, c.remote)
	}
	if l.Struct != nil {
		if err := c.structs(l.Struct, r.Struct); err != nil {
			return err
		}
	}
	if l.Elem != nil {
		return c.types(l.Elem, r.Elem)
	}
	return nil
}

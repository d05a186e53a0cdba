// Package schema is replica's model of declared entity classes: value kinds,
// per-field flags, quantization, stable field IDs and the slot layout that
// the runtime stores values in. It also encodes the compact schema
// descriptor exchanged at connect time and decides whether two versions of
// a schema are compatible.
//
// Schemas are normally built by code that replicagen generates; building
// them by hand is supported for tests and tools.
package schema

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"strings"
)

// Kind is the kind of a value.
type Kind uint8

// Value kinds. The numeric value of each is part of the wire format.
const (
	Invalid Kind = iota
	Bool
	Int8
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float32
	Float64
	String
	Bytes
	Ref    // reference to another entity, by network ID
	Nested // nested struct, stored inline
	List   // ordered list of Elem
	Map    // map from an int or string Key to Elem
	Bag    // id-keyed container of struct items with per-item field updates
	numKinds
)

var kindNames = [...]string{"invalid", "bool", "int8", "int16", "int32", "int64",
	"uint8", "uint16", "uint32", "uint64", "float32", "float64", "string", "bytes",
	"ref", "nested", "list", "map", "bag"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Numeric reports whether values of kind k live in a numeric slot.
func (k Kind) Numeric() bool { return k >= Bool && k <= Float64 || k == Ref }

// Signed reports whether k is a signed integer kind.
func (k Kind) Signed() bool { return k >= Int8 && k <= Int64 }

// Width returns the bit width of an integer, float or bool kind (Ref is 32).
func (k Kind) Width() uint {
	switch k {
	case Bool:
		return 1
	case Int8, Uint8:
		return 8
	case Int16, Uint16:
		return 16
	case Int32, Uint32, Float32, Ref:
		return 32
	case Int64, Uint64, Float64:
		return 64
	}
	return 0
}

// Container reports whether k is List, Map or Bag.
func (k Kind) Container() bool { return k == List || k == Map || k == Bag }

// ValidKey reports whether k may key a Map or Bag.
func (k Kind) ValidKey() bool { return k >= Int8 && k <= Uint64 || k == String }

// Visibility says which clients may see a field. It is a bit set: a field is
// sent to an entity's owner when VisOwner is set and to every other client
// that sees the entity when VisOthers is set.
type Visibility uint8

// Visibilities.
const (
	VisServer Visibility = 0                    // never leaves the server
	VisOwner  Visibility = 1                    // only the owning client
	VisOthers Visibility = 2                    // every client except the owner
	VisAll    Visibility = VisOwner | VisOthers // every client
)

func (v Visibility) String() string {
	switch v {
	case VisServer:
		return "server"
	case VisOwner:
		return "owner"
	case VisOthers:
		return "others"
	case VisAll:
		return "all"
	}
	return fmt.Sprintf("visibility(%d)", uint8(v))
}

// Lifetime says when a field's value is reset or kept.
type Lifetime uint8

// Lifetimes.
const (
	LifeSession Lifetime = iota // the default: kept for the entity's life, reset at re-login
	LifeScene                   // reset when the entity changes scene or space
	LifeProcess                 // dropped when the entity migrates to another process
	LifePersist                 // saved to the database
)

func (l Lifetime) String() string {
	switch l {
	case LifeScene:
		return "scene"
	case LifeProcess:
		return "process"
	case LifeSession:
		return "session"
	case LifePersist:
		return "persist"
	}
	return fmt.Sprintf("lifetime(%d)", uint8(l))
}

// Channel says how changes to a field travel.
type Channel uint8

// Channels.
const (
	Reliable   Channel = iota // ordered, latest value wins, intermediate values may be skipped
	Unreliable                // datagrams, delta against the last acknowledged baseline
)

func (c Channel) String() string {
	if c == Unreliable {
		return "unreliable"
	}
	return "reliable"
}

// Quant describes the quantization of a float field. A bounded quantization
// maps [Min, Min+Step·(2^Bits−1)] onto Bits-bit integers; an unbounded one
// maps v to round(v/Step) as a signed integer.
type Quant struct {
	Step    float64
	Min     float64 // bounded only
	Bits    uint8   // bounded only, 1..32
	Bounded bool
}

// NewQuant builds a quantization from the tag parameters quant (step), min,
// max and bits; zero means absent. Valid combinations: step alone
// (unbounded); step with min and max (bits derived); bits with min and max
// (step derived).
func NewQuant(step, min, max float64, bits int, hasMin, hasMax bool) (Quant, error) {
	switch {
	case bits != 0 && step != 0:
		return Quant{}, errors.New("give either quant= or bits=, not both")
	case bits != 0:
		if !hasMin || !hasMax {
			return Quant{}, errors.New("bits= needs both min= and max=")
		}
		if bits < 1 || bits > 32 {
			return Quant{}, fmt.Errorf("bits=%d out of range 1..32", bits)
		}
		if !(max > min) {
			return Quant{}, fmt.Errorf("max=%v must be greater than min=%v", max, min)
		}
		return Quant{Step: (max - min) / float64(uint64(1)<<bits-1), Min: min, Bits: uint8(bits), Bounded: true}, nil
	case step != 0:
		if !(step > 0) || math.IsInf(step, 0) {
			return Quant{}, fmt.Errorf("quant=%v must be a positive step", step)
		}
		if hasMin != hasMax {
			return Quant{}, errors.New("min= and max= go together")
		}
		if !hasMin {
			return Quant{Step: step}, nil
		}
		if !(max > min) {
			return Quant{}, fmt.Errorf("max=%v must be greater than min=%v", max, min)
		}
		n := math.Ceil((max-min)/step - 1e-9)
		b := 1
		for b < 32 && float64(uint64(1)<<b-1) < n {
			b++
		}
		if float64(uint64(1)<<b-1) < n {
			return Quant{}, fmt.Errorf("range %v..%v at step %v needs more than 32 bits", min, max, step)
		}
		return Quant{Step: step, Min: min, Bits: uint8(b), Bounded: true}, nil
	case hasMin || hasMax:
		return Quant{}, errors.New("min= and max= need quant= or bits=")
	}
	return Quant{}, nil
}

// Enabled reports whether q quantizes at all.
func (q Quant) Enabled() bool { return q.Step != 0 }

// Max returns the largest representable value of a bounded quantization.
func (q Quant) Max() float64 { return q.Min + q.Step*float64(uint64(1)<<q.Bits-1) }

// Quantize maps v to its integer code (clamped for bounded quantizations).
// NaN maps to 0.
func (q Quant) Quantize(v float64) int64 {
	if v != v {
		return 0
	}
	if q.Bounded {
		x := math.Round((v - q.Min) / q.Step)
		if !(x > 0) {
			return 0
		}
		top := float64(uint64(1)<<q.Bits - 1)
		if x > top {
			return int64(top)
		}
		return int64(x)
	}
	x := math.Round(v / q.Step)
	if x >= 1<<62 {
		return 1 << 62
	}
	if x <= -(1 << 62) {
		return -(1 << 62)
	}
	return int64(x)
}

// Dequantize maps an integer code back to a value.
func (q Quant) Dequantize(c int64) float64 {
	// The explicit conversion rounds the product, so no platform fuses the
	// multiply-add: every client, in any language, gets the same float.
	if q.Bounded {
		return q.Min + float64(float64(c)*q.Step)
	}
	return float64(c) * q.Step
}

// Type is a value type: a kind plus what the kind needs.
type Type struct {
	Kind   Kind
	Quant  Quant   // Float32, Float64
	Struct *Struct // Nested, and the item type of a Bag
	Elem   *Type   // List, Map: element type
	Key    Kind    // Map, Bag: key kind
}

// String renders t the way the schema lock file records it, for example
// "list<float32 q(0.015625)>" or "bag<uint32,Item>".
func (t *Type) String() string {
	switch t.Kind {
	case Float32, Float64:
		if t.Quant.Enabled() {
			if t.Quant.Bounded {
				return fmt.Sprintf("%s q(%g,%g,%d)", t.Kind, t.Quant.Step, t.Quant.Min, t.Quant.Bits)
			}
			return fmt.Sprintf("%s q(%g)", t.Kind, t.Quant.Step)
		}
	case Nested:
		return t.Struct.Name
	case List:
		return "list<" + t.Elem.String() + ">"
	case Map:
		return "map<" + t.Key.String() + "," + t.Elem.String() + ">"
	case Bag:
		return "bag<" + t.Key.String() + "," + t.Struct.Name + ">"
	}
	return t.Kind.String()
}

// Field is one declared field of a struct.
type Field struct {
	ID         uint32
	Name       string
	Type       Type
	Vis        Visibility
	Life       Lifetime
	Chan       Channel
	Deprecated bool // kept for its ID; never stored or sent
	Pos        Axis // a coordinate of the entity's position, for interest management
	// LOD, if not 0, puts the field in a level-of-detail band: it is sent
	// only to clients within LOD of the entity (fields of entity classes
	// only; docs/protocol.md §3.6). The class's bands are its fields'
	// distinct LOD distances, farthest first.
	LOD float64

	// Layout, set by Struct.Layout. Offsets are relative to the start of
	// the enclosing struct's slots.
	Num  int // numeric slot (see [NumSlot]); for a nested struct, the slot of its first byte
	Obj  int // string slot (string, bytes), container slot (containers), or first string slot (nested)
	Leaf int // first leaf index; a nested struct spans Leaf..Leaf+Type.Struct.Leaves-1
}

// MaxLeaves bounds the number of leaves a struct flattens to: its scalar
// and container fields, counting those of nested structs.
const MaxLeaves = 1 << 16

// Struct is an entity class or a nested struct type.
type Struct struct {
	Name   string
	Class  bool   // entity class (top level) rather than a nested type
	ID     uint32 // class ID when Class
	Fields []*Field
	// RPCs are the remote procedure calls declared on an entity class,
	// sorted by ID after Layout.
	RPCs []*RPC

	// Layout, set by Layout: totals over nested structs, which are stored
	// inline in their parent's slots.
	NumSlots  int // numeric slots
	NumBytes  int // bytes of numeric storage, a multiple of 8
	StrSlots  int // string and bytes slots
	ContSlots int // container slots
	Leaves    int // leaves: scalar and container fields, nested ones flattened
	laidOut   bool
	laying    bool
	byID      map[uint32]*Field
	rpcByID   map[uint32]*RPC
	leaves    []LeafInfo
	bands     []float64
}

// MaxBands bounds the level-of-detail bands of a class.
const MaxBands = 4

// Bands returns the distances of the class's level-of-detail bands,
// farthest first: band b (1-based) is bands[b−1]. A client within
// bands[b−1] of an entity holds it at level ≥ b. The slice must not be
// modified.
func (s *Struct) Bands() []float64 { return s.bands }

// Band returns the band of a distance of s.Bands (1-based), or 0.
func (s *Struct) Band(lod float64) uint8 {
	for i, d := range s.bands {
		if d == lod {
			return uint8(i + 1)
		}
	}
	return 0
}

// Direction says which side calls an RPC.
type Direction uint8

// Directions.
const (
	// ClientToServer RPCs are called by the client that owns the entity
	// and handled by the server.
	ClientToServer Direction = iota
	// ServerToClient RPCs are sent by the server to clients that see the
	// entity.
	ServerToClient
)

func (d Direction) String() string {
	if d == ServerToClient {
		return "server"
	}
	return "client"
}

// An RPC is a remote procedure call on an entity of a class. Its arguments
// are the fields of Args, a struct type encoded like a container element.
type RPC struct {
	ID   uint32
	Name string
	Dir  Direction
	Args *Struct
}

// LeafInfo locates one leaf of a struct's flattened layout.
type LeafInfo struct {
	Field *Field
	Num   int        // absolute numeric slot (see [NumSlot]), or −1
	Obj   int        // absolute string slot or container slot, by kind, or −1
	Vis   Visibility // effective visibility: the parent fields' visibilities intersected
	Path  []uint32   // field IDs from the struct down to the leaf
	Band  uint8      // level-of-detail band of the class field it belongs to (see Struct.Bands), or 0
}

// Field returns the field with the given ID, or nil.
func (s *Struct) Field(id uint32) *Field { return s.byID[id] }

// FieldPath returns the fields along a dotted path of names ("hp",
// "body.pos.x"): the field of s with the first name, then the field of
// the struct it nests with the next, and so on. It returns nil when a
// name is missing or deprecated, or names a field inside one that nests
// no struct.
func (s *Struct) FieldPath(path string) []*Field {
	var out []*Field
	st := s
	for name := range strings.SplitSeq(path, ".") {
		if st == nil {
			return nil
		}
		var f *Field
		for _, g := range st.Fields {
			if g.Name == name && !g.Deprecated {
				f = g
				break
			}
		}
		if f == nil {
			return nil
		}
		out = append(out, f)
		st = nil
		if f.Type.Kind == Nested {
			st = f.Type.Struct
		}
	}
	return out
}

// RPC returns the RPC with the given ID, or nil.
func (s *Struct) RPC(id uint32) *RPC { return s.rpcByID[id] }

// Leaf returns information about leaf i of the flattened layout.
func (s *Struct) Leaf(i int) *LeafInfo { return &s.leaves[i] }

// Layout validates s and every struct it reaches and assigns slots. It is
// idempotent and must be called before s is used by the runtime.
func (s *Struct) Layout() error {
	// Element types of containers are laid out after the struct that holds
	// them: a struct may hold a list of a type that embeds it inline, and
	// that type needs the holder's finished layout.
	pending := []*Struct{s}
	for len(pending) > 0 {
		st := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		if err := st.layout(nil, &pending); err != nil {
			return err
		}
	}
	return nil
}

func (s *Struct) layout(stack []*Struct, pending *[]*Struct) error {
	if s.laidOut {
		return nil
	}
	for _, t := range stack {
		if t == s {
			return fmt.Errorf("schema: struct %s contains itself; use a list, map or bag for recursion", s.Name)
		}
	}
	if s.laying {
		return nil // reached again through a container while being laid out
	}
	s.laying = true
	defer func() { s.laying = false }()
	stack = append(stack, s)
	sort.Slice(s.Fields, func(i, j int) bool { return s.Fields[i].ID < s.Fields[j].ID })
	s.byID = make(map[uint32]*Field, len(s.Fields))
	s.NumSlots, s.NumBytes, s.StrSlots, s.ContSlots, s.Leaves = 0, 0, 0, 0, 0
	s.leaves = s.leaves[:0]
	for _, f := range s.Fields {
		if f.ID == 0 {
			return fmt.Errorf("schema: %s.%s: field ID 0 is reserved", s.Name, f.Name)
		}
		if _, dup := s.byID[f.ID]; dup {
			return fmt.Errorf("schema: %s.%s: duplicate field ID %d", s.Name, f.Name, f.ID)
		}
		s.byID[f.ID] = f
		if f.Life != LifeSession && !s.Class {
			// A class field's lifetime covers everything in it: a
			// nested struct, container element or RPC argument has none.
			return fmt.Errorf("schema: %s.%s: lifetime %s: a lifetime is for fields of entity classes only (it covers what the class field holds)", s.Name, f.Name, f.Life)
		}
		if err := f.Type.validate(stack, pending); err != nil {
			return fmt.Errorf("schema: %s.%s: %w", s.Name, f.Name, err)
		}
		f.Num, f.Obj, f.Leaf = -1, -1, s.Leaves
		if f.Deprecated {
			continue
		}
		switch k := f.Type.Kind; {
		case k.Numeric():
			size, signed := f.Type.stored()
			s.NumBytes = align(s.NumBytes, size)
			f.Num = NumSlot(s.NumBytes, size, signed)
			s.leaves = append(s.leaves, LeafInfo{Field: f, Num: f.Num, Obj: -1, Vis: f.Vis, Path: []uint32{f.ID}})
			s.NumBytes += size
			s.NumSlots++
			s.Leaves++
		case k == Nested:
			sub := f.Type.Struct
			s.NumBytes = align(s.NumBytes, 8)
			f.Num, f.Obj = NumSlot(s.NumBytes, 1, false), s.StrSlots
			for _, l := range sub.leaves {
				switch lk := l.Field.Type.Kind; {
				case lk.Numeric():
					l.Num += s.NumBytes << 3
				case lk.Container():
					l.Obj += s.ContSlots
				default:
					l.Obj += s.StrSlots
				}
				l.Vis &= f.Vis
				l.Path = append([]uint32{f.ID}, l.Path...)
				s.leaves = append(s.leaves, l)
			}
			s.NumBytes += sub.NumBytes
			s.NumSlots += sub.NumSlots
			s.StrSlots += sub.StrSlots
			s.ContSlots += sub.ContSlots
			s.Leaves += sub.Leaves
			if s.Leaves > MaxLeaves {
				return fmt.Errorf("schema: %s flattens to more than %d fields", s.Name, MaxLeaves)
			}
		case k.Container():
			f.Obj = s.ContSlots
			s.leaves = append(s.leaves, LeafInfo{Field: f, Num: -1, Obj: f.Obj, Vis: f.Vis, Path: []uint32{f.ID}})
			s.ContSlots++
			s.Leaves++
		default:
			f.Obj = s.StrSlots
			s.leaves = append(s.leaves, LeafInfo{Field: f, Num: -1, Obj: f.Obj, Vis: f.Vis, Path: []uint32{f.ID}})
			s.StrSlots++
			s.Leaves++
		}
	}
	s.NumBytes = align(s.NumBytes, 8)
	if s.Leaves > MaxLeaves {
		return fmt.Errorf("schema: %s flattens to more than %d fields", s.Name, MaxLeaves)
	}
	if len(s.RPCs) > 0 && !s.Class {
		return fmt.Errorf("schema: %s declares RPCs but is not an entity class", s.Name)
	}
	if err := s.layoutBands(); err != nil {
		return err
	}
	sort.Slice(s.RPCs, func(i, j int) bool { return s.RPCs[i].ID < s.RPCs[j].ID })
	s.rpcByID = make(map[uint32]*RPC, len(s.RPCs))
	for _, r := range s.RPCs {
		switch {
		case r.ID == 0:
			return fmt.Errorf("schema: %s.%s: RPC ID 0 is reserved", s.Name, r.Name)
		case s.rpcByID[r.ID] != nil:
			return fmt.Errorf("schema: %s.%s: duplicate RPC ID %d", s.Name, r.Name, r.ID)
		case r.Args == nil || r.Args.Class:
			return fmt.Errorf("schema: %s.%s: RPC arguments must be a struct type", s.Name, r.Name)
		case r.Dir > ServerToClient:
			return fmt.Errorf("schema: %s.%s: invalid direction %d", s.Name, r.Name, r.Dir)
		}
		s.rpcByID[r.ID] = r
		*pending = append(*pending, r.Args)
	}
	s.laidOut = true
	return nil
}

// layoutBands works out a class's level-of-detail bands from its fields'
// LOD distances and gives each leaf its band.
func (s *Struct) layoutBands() error {
	s.bands = s.bands[:0]
	for _, f := range s.Fields {
		switch {
		case f.LOD == 0 || f.Deprecated:
			continue // a deprecated field has no leaf
		case !s.Class:
			return fmt.Errorf("schema: %s.%s: a level-of-detail distance is for fields of entity classes only", s.Name, f.Name)
		case !(f.LOD > 0) || math.IsInf(f.LOD, 0):
			return fmt.Errorf("schema: %s.%s: level-of-detail distance %v must be finite and > 0", s.Name, f.Name, f.LOD)
		case f.Vis == VisServer:
			return fmt.Errorf("schema: %s.%s: a server-only field has no level of detail: it is never sent", s.Name, f.Name)
		}
		if !slices.Contains(s.bands, f.LOD) {
			s.bands = append(s.bands, f.LOD)
		}
	}
	if len(s.bands) > MaxBands {
		return fmt.Errorf("schema: %s: %d level-of-detail distances, at most %d", s.Name, len(s.bands), MaxBands)
	}
	slices.SortFunc(s.bands, func(a, b float64) int { return cmp.Compare(b, a) })
	sent := make([]bool, len(s.bands))
	for i := range s.leaves {
		l := &s.leaves[i]
		l.Band = 0
		if len(s.bands) > 0 {
			l.Band = s.Band(s.byID[l.Path[0]].LOD)
		}
		if l.Band > 0 && l.Vis != VisServer {
			sent[l.Band-1] = true
		}
	}
	for b, ok := range sent {
		if !ok {
			return fmt.Errorf("schema: %s: no field of level-of-detail distance %v reaches a client", s.Name, s.bands[b])
		}
	}
	return nil
}

// A numeric slot names where a numeric value is stored in a record: its
// byte offset, its size in bytes (1, 2, 4 or 8) and whether narrower values
// are sign-extended when read, packed as offset<<3 | signed<<2 | log2(size).
// Slots of a nested struct are relative to its first byte; adding the
// nested struct's slot, whose low bits are zero, makes them absolute.
func NumSlot(off, size int, signed bool) int {
	s := off<<3 | bits.TrailingZeros(uint(size))
	if signed {
		s |= 4
	}
	return s
}

// stored returns the size in bytes of a numeric type's stored value and
// whether it is sign-extended: integers keep their width; floats keep
// theirs unquantized, 4 bytes for a bounded quantized code (at most 32
// bits) and 8 for an unbounded one (an int64).
func (t *Type) stored() (size int, signed bool) {
	switch k := t.Kind; {
	case k == Float32 || k == Float64:
		switch {
		case t.Quant.Bounded:
			return 4, false
		case t.Quant.Enabled():
			return 8, true
		case k == Float32:
			return 4, false
		}
		return 8, false
	case k == Bool:
		return 1, false
	default:
		return int(k.Width() / 8), k.Signed()
	}
}

func align(n, a int) int { return (n + a - 1) &^ (a - 1) }

func (t *Type) validate(stack []*Struct, pending *[]*Struct) error {
	switch k := t.Kind; {
	case k == Invalid || k >= numKinds:
		return fmt.Errorf("invalid kind %d", k)
	case k == Float32 || k == Float64:
		if q := t.Quant; q.Enabled() && (!(q.Step > 0) || q.Bounded && (q.Bits < 1 || q.Bits > 32)) {
			return fmt.Errorf("invalid quantization %+v", q)
		}
	case k == Nested:
		if t.Struct == nil {
			return errors.New("struct kind without a struct")
		}
		if t.Struct.Class {
			return fmt.Errorf("entity class %s cannot be nested; use a ref", t.Struct.Name)
		}
		return t.Struct.layout(stack, pending)
	case k == List || k == Map:
		if t.Elem == nil {
			return fmt.Errorf("%s without an element type", k)
		}
		if k == Map && !t.Key.ValidKey() {
			return fmt.Errorf("map key kind %s: want an integer or string", t.Key)
		}
		if t.Elem.Kind.Container() {
			return fmt.Errorf("%s of %s: wrap the inner container in a struct", k, t.Elem.Kind)
		}
		if t.Elem.Kind == Nested {
			// Elements are separate records, so recursion through a
			// container is allowed: lay the element out later, on its own.
			*pending = append(*pending, t.Elem.Struct)
			return nil
		}
		return t.Elem.validate(stack, pending)
	case k == Bag:
		if t.Struct == nil || t.Struct.Class {
			return errors.New("bag items must be a nested struct type")
		}
		if !t.Key.ValidKey() || t.Key == String {
			return fmt.Errorf("bag key kind %s: want an integer", t.Key)
		}
		*pending = append(*pending, t.Struct)
		return nil
	}
	return nil
}

// Schema is a set of entity classes.
type Schema struct {
	Classes []*Struct // sorted by ID after Layout
	byID    map[uint32]*Struct
	whole   map[*Struct]bool // structs sent with every field (see ServerOnly)
}

// New lays out the given classes and returns a schema.
func New(classes ...*Struct) (*Schema, error) {
	s := &Schema{Classes: classes, byID: make(map[uint32]*Struct, len(classes))}
	sort.Slice(s.Classes, func(i, j int) bool { return s.Classes[i].ID < s.Classes[j].ID })
	for _, c := range classes {
		if !c.Class {
			return nil, fmt.Errorf("schema: %s is not an entity class", c.Name)
		}
		if _, dup := s.byID[c.ID]; dup {
			return nil, fmt.Errorf("schema: duplicate class ID %d (%s)", c.ID, c.Name)
		}
		if err := c.Layout(); err != nil {
			return nil, err
		}
		s.byID[c.ID] = c
	}
	s.whole = sentWhole(s.Classes)
	return s, nil
}

// Class returns the class with the given ID, or nil.
func (s *Schema) Class(id uint32) *Struct { return s.byID[id] }

// An Axis marks a numeric field as one coordinate of its entity's
// position, which the server's interest management reads (the generator's
// pos=x and pos=y tags). It is known to the server only: the schema
// descriptor does not carry it.
type Axis uint8

// Axes.
const (
	AxisNone Axis = iota
	AxisX
	AxisY
)

func (a Axis) String() string {
	switch a {
	case AxisNone:
		return "none"
	case AxisX:
		return "x"
	case AxisY:
		return "y"
	}
	return fmt.Sprintf("axis(%d)", uint8(a))
}

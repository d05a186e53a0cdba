// Package gen is the front end of replicagen: it loads a Go package,
// recognises its spec structs, turns their fields and tags into the schema
// model of package schema, assigns stable IDs through the committed lock
// file replica.lock.json and reports user errors with positions.
//
// # Spec structs
//
// An entity class is an unexported struct type whose doc comment holds the
// directive line
//
//	//replica:class
//
// or "//replica:class id=N" to fix its class ID. replicagen generates an
// exported type named after the spec (player → Player; see Names). Every unexported struct type of the same package that a
// class field uses, directly, as list or map element or as bag item, is a
// nested spec, transitively; nested specs carry no directive.
//
// Every field of a spec struct is replicated unless tagged replica:"-";
// embedded fields are errors. The accessor base name of a field is its Go
// name (hp → Hp, base_info → BaseInfo; see Names). The tag grammar is
// replica:"key=value,flag,...":
//
//	id=N              stable field ID, 1..4294967295 (default: from the lock file)
//	was=OLD           the field was renamed from OLD: it keeps OLD's ID (see Stable IDs)
//	vis=V             server, owner, others or all (default all)
//	life=L            scene, process, session or persist (default session); class fields only: it covers the whole value
//	chan=C            reliable or unreliable (default reliable)
//	pos=A             x or y: the coordinate of the entity's position interest management reads (a number; one of each per class)
//	lod=D             a distance: the field reaches only the clients within D of the entity, and its owner (class fields of a class with a position)
//	quant=STEP        quantization step, a decimal (0.25) or a fraction (1/64)
//	min=F, max=F      bounds of a bounded quantization: max sizes the field
//	                  (its bits), and values clamp to what the bits hold,
//	                  which can pass max; below min stores min (a NaN set
//	                  on an entity is refused: state.ErrNaN)
//	bits=N            bits of a bounded quantization (step derived from min and max)
//	bag               on a map of structs: an ID-keyed bag of items
//	deprecated        keep the field's ID but stop storing and sending it
//
// quant, min, max and bits apply to float32 and float64 fields and to the
// elements of lists and maps of them.
//
// # Names
//
// The Go name of a spec type or field is its name split at underscores,
// each word with its first letter upper-cased and the rest kept as
// written, joined: hp → Hp, baseInfo → BaseInfo, base_info → BaseInfo,
// expire_ts → ExpireTs, player_state → PlayerState. Initialisms are not
// recognised: user_id → UserId, while userID and user_ID → UserID. Only
// generated Go identifiers use these names; the schema, its descriptor, the
// lock file and every message keep the names as declared, so snake_case
// specs ported from C++ or Lua keep their wire names.
//
// Load refuses, at the position of the field or type, names that collide
// once converted: two fields with the same Go name (base_info and
// baseInfo), a getter or setter that is also another field's (field set_x
// and the setter SetX of field x), a field whose getter or setter is a
// method every generated type has (Valid; ID, Entity and the view's IsOwned
// on a class, Clone on other structs), and two specs with the same Go type
// name. Generate refuses generated types and functions whose names collide
// (views included: spec playerView and the view of class player are both
// PlayerView), and accessors that collide with methods declared in the
// package, on the generated types or their views.
//
// # Invalid values
//
// A generated value may refer to nothing: the zero value, a bag item that
// was removed from its bag or replaced, an entity destroyed on its tracker.
// Valid reports false for each. Getters never fault: the zero value reads
// like a new value, a stale one the values it had last. Setters, and the
// changing methods of its lists, maps and bags, panic with an error
// wrapping state.ErrInvalidHandle (see docs/decisions.md).
//
// # Client views
//
// Clients do not write: the server's updates change their replicas. For
// each class and each struct that a client reaches from a class, replicagen
// also generates a read-only view, PlayerView for Player, ItemView for
// Item: getters for the fields that reach clients, none for deprecated and
// server-only fields (see schema.Schema.ServerOnly: a struct that is a
// container element, a bag item or RPC arguments is sent whole and its
// view keeps every field), no setters, nested structs as views and lists,
// maps and bags as read-only container views (PlayerInvBagView: Len, Get,
// All). A class view also has Entity, ID, Valid, IsOwned and the methods
// that call the class's client RPCs; PlayerViewOf makes one of an entity.
// Typed callbacks and the client's side of RPCs pass views. PlayerOf
// refuses an entity of a client replica (state.Entity.ReadOnly), and the
// state package's setters panic there with an error wrapping
// state.ErrReadOnly.
//
// # TypeScript
//
// replicagen -ts also writes <package>_replica.ts (Package.GenerateTS,
// Package.WriteTS; with -tsout, into a client's npm project, see
// TSOptions.Dir) for clients that use the TypeScript runtime in ts/
// (@replicago/replica): the schema's descriptor embedded, and per class
// and struct a typed read-only class with the view's getters (named after
// the fields with a lower-case first letter: hp, baseInfo), nested
// structs as views, typed lists, maps and bags, a class's owned getter
// (the view's IsOwned), onCreate, onDestroy, onOwnership, onLevel, an
// on<Path>Change per callback of the Go client, the client RPCs as
// methods and the server RPCs as on<Rpc> registrations.
// GenerateTS refuses names the TypeScript classes cannot hold (a getter
// named like a member every class has, such as toString, or two members
// with one name), at the field. The output is deterministic; commit it.
//
// # Types
//
// bool, int8…int64, uint8…uint64, float32, float64 and string map to the
// kinds of the same name, []byte to Bytes, replica.Ref to Ref, a named type
// of the package with one of those as underlying type to that kind (a named
// type declared as replica.Ref is a Ref), []T to List, map[K]V to Map (K an
// integer or string type), map[K]V tagged bag to Bag (K an integer type, V a
// nested spec) and a nested spec to Nested.
//
// [][]byte is a list of bytes values; other lists and maps of lists or maps are errors.
//
// # Stable IDs
//
// Field IDs (per struct) and class IDs (per package) are recorded in
// replica.lock.json in the package directory, which users commit. An
// explicit id wins, then the ID the lock records for the name (a removed
// field or class that comes back with the same kind gets its old ID back),
// then one above every ID the struct (or package) ever used, retired ones
// included, in declaration order.
//
// The lock file is JSON with sorted keys, 2-space indentation and one line
// per field:
//
//	{
//	  "version": 1,
//	  "classes": {
//	    "player": 1
//	  },
//	  "retiredClasses": [
//	    {"name": "npc", "id": 2}
//	  ],
//	  "structs": {
//	    "player": {
//	      "fields": [
//	        {"name": "hp", "id": 1, "type": "int16", "deprecated": true},
//	        {"name": "pos", "id": 3, "type": "Vec"}
//	      ],
//	      "retired": [
//	        {"name": "mana", "id": 2, "type": "int32"}
//	      ]
//	    }
//	  }
//	}
//
// Types are written by (*schema.Type).String. Structs that disappear keep
// their entry with every field retired. Appending fields, deprecating them,
// removing them (they are retired) and renaming them with was= are
// compatible.
//
// IDs follow names, so a field renamed without a tag is a removed field
// plus a new one with a new ID: clients built with the old schema stop
// receiving it. To rename hp to health, declare
//
//	health int16 `replica:"was=hp"`
//
// and health takes the ID the lock records for hp (live or retired), with
// the type check of any field: the rename must not change the type. The
// lock then records health, so the tag may stay or go. was= that names a
// field the lock does not record, or a field that still exists, is an
// error. When a field disappears and a new field of the same type
// appears without was=, Load adds a note (Package.Notes, printed by
// replicagen) suggesting the tag.
//
// Load refuses, like the server would at run time, a class that
// flattens to more than schema.MaxLeaves (65,536) fields, at the struct,
// and a field that clients see nested deeper than the default client
// limit (16 levels, codec.Limits.MaxDepth; state.Limits.CheckSchema,
// called by replica.NewServer), at the field. Load refuses, unless
// Config.Force is set, a field whose type changed (a changed quantization
// included: clients apply deltas to the quantized codes they store), an
// explicit id that the lock records for another name (live or retired), and
// an explicit id that differs from the one the lock records for the same
// name; for classes and RPCs likewise. Duplicate explicit IDs are always
// errors.
//
// # RPCs
//
// An unexported struct type whose doc comment holds the directive line
//
//	//replica:rpc CLASS DIRECTION
//
// or "//replica:rpc CLASS DIRECTION id=N" declares a remote procedure call on
// the entity class whose spec name is CLASS. DIRECTION is client (the
// client that owns the entity calls it and the server handles it) or server
// (the server sends it to clients that see the entity). The RPC is named
// after the struct (fire; exported form Fire) and the struct's fields are
// its arguments, with the field rules, tags and types of a nested spec
// except that vis=, life= and chan= mean nothing on an argument and are
// errors. The argument struct is an RPC's own: it cannot also be an entity
// class, a field type or the arguments of another RPC. The generated type
// of the argument struct (Fire) is like that of a nested spec; besides it,
// for an RPC fire called by the client on class player, replicagen
// generates
//
//	func (p PlayerView) Fire(c *client.Conn, x, y float32, weapon uint8) error
//	func HandlePlayerFire(s *replica.Server, fn func(c *replica.Conn, p Player, x, y float32, weapon uint8) error)
//
// and for an RPC hit sent by the server
//
//	func SendPlayerHit(s *replica.Server, to replica.RPCTarget, p Player, damage int16) error
//	func OnPlayerHit(c *client.Conn, fn func(p PlayerView, damage int16)) (cancel func())
//
// The client's side takes and passes the class's view, the server's side
// the class itself.
//
// The arguments are positional parameters, in declaration order, when every
// one is a number, bool, string, []byte or replica.Ref (deprecated ones are
// left out); otherwise the functions take and pass the argument struct
// (args Fire), and handlers get a copy that they may keep. A parameter
// named like an identifier of the generated code (p, c, s, to, state, ...)
// gets the suffix Arg. Handlers with positional parameters read them from
// the runtime's argument record and allocate nothing, except for []byte.
//
// RPC IDs are per class and stable like field IDs: an explicit id wins,
// then the lock's, then one above every ID the class's RPCs ever used. The
// lock records them in the class's struct entry with their direction and
// argument signature, the arguments in field ID order:
//
//	"player": {
//	  "fields": [...],
//	  "rpcs": [
//	    {"name": "fire", "id": 1, "dir": "client", "args": "(x float32, y float32, weapon uint8)"}
//	  ],
//	  "retiredRpcs": [
//	    {"name": "taunt", "id": 2, "dir": "server", "args": "()"}
//	  ]
//	}
//
// and the argument struct has a struct entry of its own, so argument IDs are
// stable too. Adding and removing RPCs is compatible; Load refuses, unless
// Config.Force is set, an RPC whose direction or argument signature
// (arguments added, removed, deprecated, renamed or retyped) changed, and
// explicit ids that disagree with the lock, as for fields.
package gen

import (
	"go/token"
	"go/types"

	"github.com/replicago/replica/schema"
)

// LockFile is the name of the lock file in the package directory.
const LockFile = "replica.lock.json"

// GeneratedMarker is the first line of every file replicagen writes. Load
// treats a file starting with it, or named <package>_replica.go, as a stale
// generated file and ignores its contents.
const GeneratedMarker = "// Code generated by replicagen. DO NOT EDIT."

// Config says what to load.
type Config struct {
	// Dir is the package directory; "" means the working directory.
	Dir string

	// Force accepts changes that break clients built against the schema
	// recorded in the lock file: a field whose type changed (quantization included), an explicit
	// field or class id that belongs to another name, a field or class
	// whose recorded ID changed. The lock is then rewritten to the new state.
	Force bool

	// Check makes Load fail when the lock file is missing or would change,
	// for CI. Load never writes; see Package.WriteLock.
	Check bool

	// lockFile, when set, replaces the lock file path. The file need not
	// exist. For tests.
	lockFile string
}

// Package is a loaded package with its spec structs resolved, IDs assigned
// and schema laid out.
type Package struct {
	Name       string // package name
	ImportPath string // package import path
	Dir        string // absolute package directory

	// Classes are the entity classes, sorted by class ID.
	Classes []*Struct
	// Structs are all spec structs, classes, nested ones and RPC argument
	// structs, sorted by spec name.
	Structs []*Struct
	// Schema holds the classes, laid out (schema.New has run).
	Schema *schema.Schema

	// OutFile is the path of the file the emitter should write:
	// Dir/<Name>_replica.go.
	OutFile string
	// GeneratedFiles are the absolute paths of existing files that Load
	// recognised as generated by replicagen (including OutFile if it
	// exists), sorted. Their contents were ignored.
	GeneratedFiles []string

	// LockPath is the absolute path of the lock file.
	LockPath string
	// LockChanged reports whether WriteLock would change the lock file
	// (it is missing or its content differs from the new state).
	LockChanged bool
	// LockChanges describes each change to the lock file, for example
	// "player: new field mana (id 4)", sorted. Empty when !LockChanged
	// or when the lock file is created.
	LockChanges []string

	// Notes are remarks about the package that are not errors, with
	// positions, sorted: a new field that may be a rename of a field that
	// disappeared (see Stable IDs). replicagen prints them.
	Notes ErrorList

	// Types and Fset are the type-checked package, for checks the model
	// does not cover. Generated files were replaced by their package
	// clause, so Types may be incomplete and may have type errors.
	Types *types.Package
	Fset  *token.FileSet

	lockData []byte // new lock file content

	views map[*Struct]bool // the structs that have a client view; see hasView
}

// Struct is a spec struct: an entity class or a nested struct type.
type Struct struct {
	Spec string // spec type name, "player"
	Name string // generated type name, "Player"
	// Doc is the text of the spec type's doc comment as returned by
	// (*ast.CommentGroup).Text, without the //replica: directive lines:
	// lines end in '\n'; "" when there is none.
	Doc string
	Pos token.Position // position of the spec type name

	// Schema is the schema struct: Name is the generated name (Player),
	// Class and ID say whether and which entity class it is, and Fields,
	// after layout, are sorted by ID and carry slots.
	Schema *schema.Struct

	// Fields are the replicated fields in declaration order, deprecated
	// ones included. Fields tagged replica:"-" are left out (see Type).
	Fields []*Field

	// RPCs are the RPCs declared on an entity class, in declaration order;
	// nil for nested structs.
	RPCs []*RPC
	// RPC is the RPC whose argument struct this is, or nil.
	RPC *RPC

	// UserMethods are the methods that non-generated files of the package
	// declare on the generated type (Name), with their positions, so the
	// emitter can report a clash with a method it generates.
	UserMethods map[string]token.Position
	// ViewMethods are the methods that non-generated files declare on
	// the generated view type (Name + "View"), likewise.
	ViewMethods map[string]token.Position

	// Type is the spec type itself.
	Type *types.Named
}

// Class reports whether s is an entity class.
func (s *Struct) Class() bool { return s.Schema.Class }

// RPC is a remote procedure call declared on an entity class by a
// //replica:rpc directive.
type RPC struct {
	Name   string // spec name of the argument struct, "fire"; also schema.RPC.Name
	Method string // exported form, "Fire": the name of the argument type and of the client call
	Dir    schema.Direction
	Pos    token.Position // position of the directive

	Class *Struct // the class the RPC is declared on
	Args  *Struct // the argument struct, a non-class spec struct whose RPC is this one

	// Schema is the schema RPC, with its ID, on Class.Schema.RPCs.
	Schema *schema.RPC
}

// Positional reports whether the generated functions take the arguments
// one by one (see Params) rather than as the argument struct: whether every
// argument that is sent is a number, bool, string, bytes or ref.
func (r *RPC) Positional() bool {
	for _, f := range r.Args.Fields {
		if k := f.Schema.Type.Kind; !f.Schema.Deprecated && !k.Numeric() && k != schema.String && k != schema.Bytes {
			return false
		}
	}
	return true
}

// Params are the arguments as the generated functions of a positional RPC
// take them: the non-deprecated fields of the argument struct in
// declaration order. Params is nil when the RPC is not positional.
func (r *RPC) Params() []*Field {
	if !r.Positional() {
		return nil
	}
	var out []*Field
	for _, f := range r.Args.Fields {
		if !f.Schema.Deprecated {
			out = append(out, f)
		}
	}
	return out
}

// Field is one replicated field of a spec struct.
type Field struct {
	Name   string // spec field name, "hp"; also schema.Field.Name
	Method string // Name with its first letter upper-cased: the accessor base name, "Hp"
	// Doc is the field's doc comment followed by its line comment, as
	// returned by (*ast.CommentGroup).Text; "" when there is none.
	Doc    string
	Pos    token.Position // position of the field name
	Schema *schema.Field  // ID, type, flags and, after layout, slots

	// GoType is the Go type of the accessor value of a scalar field, or of
	// an element of a list or map of scalars, as it is written in the
	// package: "float32", "Team", "[]byte", "replica.Ref" (the emitter
	// imports github.com/replicago/replica as replica). Named types of the
	// package appear unqualified; byte, rune and aliases keep the name the
	// spec used. GoType is "" for nested structs, lists and maps of
	// structs, and bags.
	GoType string
	// KeyGoType is the Go type of a map or bag key, else "".
	KeyGoType string
	// Struct is the nested spec of a Nested field, the element struct of a
	// list or map of structs, or the item struct of a bag; else nil.
	Struct *Struct
}

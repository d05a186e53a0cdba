package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Errors of stores and of the document codec.
var (
	// ErrNotFound is returned by Store.Load for a key that holds no
	// document.
	ErrNotFound = errors.New("store: not found")
	// ErrClosed is returned by every method of a closed Store or Writer.
	ErrClosed = errors.New("store: closed")
	// ErrInvalid is returned by Store.Write for a batch that breaks the
	// rules of Batch (an empty or oversized key, say); nothing of the
	// batch is written.
	ErrInvalid = errors.New("store: invalid batch")
	// ErrMalformed wraps every error of decoding stored bytes that are not
	// a well-formed document.
	ErrMalformed = errors.New("store: malformed document")
	// ErrIncompatible wraps the error of decoding a well-formed document
	// whose field changed kind incompatibly since it was written (an
	// integer that became a string, or a value that no longer fits).
	ErrIncompatible = errors.New("store: document incompatible with the schema")
	// ErrUnknownClass is returned when decoding a document of a class the
	// codec's schema does not have.
	ErrUnknownClass = errors.New("store: unknown class")
	// ErrBacklog is returned by Writer.End when the write-behind backlog
	// is over Config.MaxBacklog: the database is slow or down. Nothing is
	// dropped; the writer keeps retrying.
	ErrBacklog = errors.New("store: write-behind backlog over its bound")
)

// MaxKeyLen bounds the length of a document key in bytes.
const MaxKeyLen = 512

// A SchemaHash identifies a schema: the first 16 bytes of the SHA-256 of
// its descriptor (schema.Schema.AppendDescriptor).
type SchemaHash [16]byte

// HashDescriptor returns the hash of a schema descriptor.
func HashDescriptor(desc []byte) SchemaHash {
	sum := sha256.Sum256(desc)
	return SchemaHash(sum[:16])
}

func (h SchemaHash) String() string { return hex.EncodeToString(h[:]) }

// ParseSchemaHash parses the hexadecimal form String returns.
func ParseSchemaHash(s string) (SchemaHash, error) {
	var h SchemaHash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("store: bad schema hash %q", s)
	}
	copy(h[:], b)
	return h, nil
}

// A Document is the stored state of one entity: its persist fields,
// encoded by a [Codec], under a game key such as a player ID.
type Document struct {
	Key    string     // the game key; see Batch for the rules
	Class  uint32     // the entity's class ID
	Tick   uint64     // the server tick the state was taken at
	Schema SchemaHash // the schema the document was written with
	Data   []byte     // the persist fields (docs/persistence.md)
}

// A SchemaRecord is a schema descriptor stored next to the documents
// written with it, so that tools can name their fields without the game's
// code (see [AppendJSON]).
type SchemaRecord struct {
	Hash       SchemaHash
	Descriptor []byte
}

// A Batch is what one Store.Write stores atomically, in one transaction:
// schema descriptors (stored if absent), then deletions, then documents
// (each replacing any document under its key).
//
// Keys are valid UTF-8, non-empty, at most [MaxKeyLen] bytes, and hold
// no NUL byte. A key appears at most once among Puts.
type Batch struct {
	Schemas []SchemaRecord
	Deletes []string
	Puts    []Document
}

// Len returns the number of deletions and documents in b.
func (b *Batch) Len() int { return len(b.Deletes) + len(b.Puts) }

// CheckKey reports whether key is a valid document key.
func CheckKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes, at most %d", ErrInvalid, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrInvalid, key)
	}
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return fmt.Errorf("%w: key %q holds a NUL byte", ErrInvalid, key)
		}
	}
	return nil
}

// Check reports whether b follows the rules of Batch. Stores call it
// before writing anything.
func (b *Batch) Check() error {
	for _, k := range b.Deletes {
		if err := CheckKey(k); err != nil {
			return err
		}
	}
	seen := make(map[string]bool, len(b.Puts))
	for i := range b.Puts {
		k := b.Puts[i].Key
		if err := CheckKey(k); err != nil {
			return err
		}
		if seen[k] {
			return fmt.Errorf("%w: key %q put twice", ErrInvalid, k)
		}
		seen[k] = true
	}
	for _, s := range b.Schemas {
		if HashDescriptor(s.Descriptor) != s.Hash {
			return fmt.Errorf("%w: schema %s does not match its descriptor", ErrInvalid, s.Hash)
		}
	}
	return nil
}

// A Store keeps documents by key. Its methods may be called concurrently.
//
// Implementations live in adapter packages (sqlitestore, pgstore,
// redisstore) and pass the conformance suite of package storetest.
type Store interface {
	// Load returns the document stored under key, or an error wrapping
	// ErrNotFound. The document's Data is the caller's.
	Load(ctx context.Context, key string) (Document, error)
	// Write stores b in one transaction: after it returns nil every
	// change of b is durable; after an error none of them is visible
	// (an error wraps ErrInvalid if b breaks the rules of Batch). Write
	// does not keep b or its documents' Data after it returns: the
	// caller reuses them.
	Write(ctx context.Context, b *Batch) error
	// Scan calls fn for every document in ascending key order (byte-wise),
	// stopping at fn's first error, which it returns. Documents written
	// during a scan may or may not be seen; each key is seen at most once.
	Scan(ctx context.Context, fn func(Document) error) error
	// Schema returns the descriptor stored with the given hash, or an
	// error wrapping ErrNotFound.
	Schema(ctx context.Context, h SchemaHash) ([]byte, error)
	// Close releases the store. Methods called after Close return an
	// error wrapping ErrClosed; Close itself may be called again.
	Close() error
}

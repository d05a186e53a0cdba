package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
	"unicode/utf8"
)

// Offsets and sizes of the fixed parts of a token; see the package doc.
const (
	lenSize    = 2                                                      // each length prefix
	expirySize = 8                                                      // expiry seconds
	overhead   = 1 + lenSize + expirySize + NonceLen + lenSize + MACLen // 61: all but user ID and data
)

// HMAC issues and verifies tokens in the format of the package doc, signed
// with HMAC-SHA256. Its methods are safe for concurrent use as long as the
// fields are not modified; to change keys on a running server, build a new
// HMAC and swap it in.
type HMAC struct {
	// Keys are the shared secrets, each at least MinKeyLen bytes. Keys[0]
	// signs; every key verifies, so that keys can be rotated (see the
	// package doc).
	Keys [][]byte
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// MaxSkew is how long after its expiry a token is still accepted, to
	// absorb clock differences between the backend and the server.
	// Negative means zero.
	MaxSkew time.Duration
	// MaxLifetime bounds how far in the future a token's expiry may lie:
	// a token that expires more than MaxLifetime+MaxSkew after Now is
	// refused with ErrInvalidToken, so that a leaked key or a backend bug
	// cannot mint credentials valid for years. Zero means
	// DefaultMaxLifetime; negative means no bound. Issue does not check it:
	// the backend may issue with another HMAC value than the server checks
	// with.
	MaxLifetime time.Duration
}

// DefaultMaxLifetime is the MaxLifetime of an HMAC that leaves it zero.
const DefaultMaxLifetime = 24 * time.Hour

func (h *HMAC) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Check implements Checker: it fails with ErrKey if h has no key or a key
// shorter than MinKeyLen.
func (h *HMAC) Check() error { return h.checkKeys() }

func (h *HMAC) checkKeys() error {
	if len(h.Keys) == 0 {
		return fmt.Errorf("%w: no key", ErrKey)
	}
	for i, k := range h.Keys {
		if len(k) < MinKeyLen {
			return fmt.Errorf("%w: key %d is %d bytes, under %d", ErrKey, i, len(k), MinKeyLen)
		}
	}
	return nil
}

// Issue returns a new token for id, signed with Keys[0], with a fresh
// random nonce. id.Expires is truncated to whole seconds. It fails with
// ErrInvalidIdentity if the user ID is empty, longer than MaxUserIDLen or
// not valid UTF-8, if the data is longer than MaxDataLen, or if Expires,
// in Unix seconds, is not in 1..MaxExpiry (the zero time is not); with
// ErrKey if the keys are missing or short.
func (h *HMAC) Issue(id Identity) ([]byte, error) {
	var nonce [NonceLen]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("auth: reading a nonce: %w", err)
	}
	return h.issue(id, nonce)
}

func (h *HMAC) issue(id Identity, nonce [NonceLen]byte) ([]byte, error) {
	if err := h.checkKeys(); err != nil {
		return nil, err
	}
	switch {
	case id.UserID == "":
		return nil, fmt.Errorf("%w: empty user ID", ErrInvalidIdentity)
	case len(id.UserID) > MaxUserIDLen:
		return nil, fmt.Errorf("%w: user ID is %d bytes, over %d", ErrInvalidIdentity, len(id.UserID), MaxUserIDLen)
	case !utf8.ValidString(id.UserID):
		return nil, fmt.Errorf("%w: user ID is not valid UTF-8", ErrInvalidIdentity)
	case len(id.Data) > MaxDataLen:
		return nil, fmt.Errorf("%w: data is %d bytes, over %d", ErrInvalidIdentity, len(id.Data), MaxDataLen)
	case id.Expires.Unix() < 1 || id.Expires.Unix() > MaxExpiry:
		return nil, fmt.Errorf("%w: expiry %v not in 1970-01-01T00:00:01Z..9999-12-31T23:59:59Z", ErrInvalidIdentity, id.Expires)
	}
	tok := make([]byte, 0, overhead+len(id.UserID)+len(id.Data))
	tok = append(tok, TokenVersion)
	tok = binary.BigEndian.AppendUint16(tok, uint16(len(id.UserID)))
	tok = append(tok, id.UserID...)
	tok = binary.BigEndian.AppendUint64(tok, uint64(id.Expires.Unix()))
	tok = append(tok, nonce[:]...)
	tok = binary.BigEndian.AppendUint16(tok, uint16(len(id.Data)))
	tok = append(tok, id.Data...)
	m := hmac.New(sha256.New, h.Keys[0])
	m.Write(tok)
	return m.Sum(tok), nil
}

// Authenticate implements Authenticator: it checks the token's structure,
// then its MAC against every key, then its expiry against Now, MaxSkew and
// MaxLifetime. It fails with ErrInvalidToken (malformed, bad MAC, unknown
// key, expiry beyond the maximum lifetime), ErrExpired
// (validly signed but expired) or ErrKey (the keys are misconfigured). It
// never panics, whatever the input. ctx is not used.
func (h *HMAC) Authenticate(_ context.Context, token []byte) (Identity, error) {
	if err := h.checkKeys(); err != nil {
		return Identity{}, err
	}
	if len(token) > MaxTokenLen {
		return Identity{}, fmt.Errorf("%w: %d bytes, over %d", ErrInvalidToken, len(token), MaxTokenLen)
	}
	// Structure: walk the fields, checking every length against what is
	// left before reading.
	rest := token
	if len(rest) < 1+lenSize {
		return Identity{}, fmt.Errorf("%w: truncated header (%d bytes)", ErrInvalidToken, len(token))
	}
	if rest[0] != TokenVersion {
		hint := ""
		if rest[0] >= ' ' && rest[0] <= '~' {
			// A token as text: its hex or base64 sent as bytes.
			hint = " (it starts with a printable character: send the token's bytes, not a text encoding of them)"
		}
		return Identity{}, fmt.Errorf("%w: unsupported version %d%s", ErrInvalidToken, rest[0], hint)
	}
	u := int(binary.BigEndian.Uint16(rest[1:]))
	rest = rest[1+lenSize:]
	if u == 0 || u > MaxUserIDLen {
		return Identity{}, fmt.Errorf("%w: user ID length %d not in 1..%d", ErrInvalidToken, u, MaxUserIDLen)
	}
	if len(rest) < u+expirySize+NonceLen+lenSize {
		return Identity{}, fmt.Errorf("%w: truncated (%d bytes)", ErrInvalidToken, len(token))
	}
	user := rest[:u]
	rest = rest[u:]
	expiry := int64(binary.BigEndian.Uint64(rest))
	rest = rest[expirySize+NonceLen:]
	d := int(binary.BigEndian.Uint16(rest))
	rest = rest[lenSize:]
	if d > MaxDataLen {
		return Identity{}, fmt.Errorf("%w: data length %d over %d", ErrInvalidToken, d, MaxDataLen)
	}
	if len(rest) != d+MACLen {
		return Identity{}, fmt.Errorf("%w: %d bytes, but its lengths make %d", ErrInvalidToken, len(token), overhead+u+d)
	}
	data := rest[:d]
	signed, mac := token[:len(token)-MACLen], token[len(token)-MACLen:]

	// Signature.
	var sum [MACLen]byte
	ok := false
	for _, k := range h.Keys {
		m := hmac.New(sha256.New, k)
		m.Write(signed)
		if hmac.Equal(m.Sum(sum[:0]), mac) {
			ok = true
			break
		}
	}
	if !ok {
		return Identity{}, fmt.Errorf("%w: signature mismatch", ErrInvalidToken)
	}

	// Contents, trusted from here on but still checked.
	if !utf8.Valid(user) {
		return Identity{}, fmt.Errorf("%w: user ID is not valid UTF-8", ErrInvalidToken)
	}
	if expiry < 1 || expiry > MaxExpiry {
		return Identity{}, fmt.Errorf("%w: expiry %d not in 1..%d", ErrInvalidToken, expiry, int64(MaxExpiry))
	}
	exp := time.Unix(expiry, 0)
	skew := max(h.MaxSkew, 0)
	now := h.now()
	if !now.Before(exp.Add(skew)) {
		return Identity{}, fmt.Errorf("%w: at %s (now %s)", ErrExpired,
			exp.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	life := h.MaxLifetime
	if life == 0 {
		life = DefaultMaxLifetime
	}
	if life > 0 && exp.After(now.Add(life+skew)) {
		return Identity{}, fmt.Errorf("%w: expires at %s, more than the maximum lifetime %s (plus skew %s) after now %s",
			ErrInvalidToken, exp.UTC().Format(time.RFC3339), life, skew, now.UTC().Format(time.RFC3339))
	}
	id := Identity{UserID: string(user), Expires: exp}
	if d > 0 {
		id.Data = append([]byte(nil), data...)
	}
	return id, nil
}

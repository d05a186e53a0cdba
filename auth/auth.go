// Package auth authenticates clients during the session handshake.
//
// The client's HELLO carries an opaque connect token. The server hands it to
// an Authenticator, which either returns the Identity the connection acts as
// or an error; on an error the server refuses the connection with
// transport.CloseAuthFailed.
//
// Two Authenticators ship with the package:
//
//   - HMAC verifies tokens signed with a secret shared with the game's
//     backend (HMAC-SHA256), which expire. It is the one for production.
//   - Anonymous accepts any token, for development.
//
// There is no default: replica.NewServer fails unless Config.Auth names
// one, so that a server never admits anonymous clients by omission, and a
// server that runs with Anonymous on an address other than loopback logs
// a warning when it starts serving.
//
// The error an Authenticator returns is logged by the server, in full; the
// client is told only a generic reason ("invalid token", "token expired",
// "authentication failed"), so that errors may name server-side detail
// such as the server's clock.
//
// Any other scheme (a call to an identity service, a JWT library) plugs in
// by implementing Authenticator.
//
// # Token format (version 1)
//
// The game's backend issues tokens, usually in another language, so the
// format is fixed here byte for byte. All integers are unsigned and
// big-endian unless said otherwise; U is the user ID length and D the data
// length.
//
//	offset   size  field
//	0        1     version: 0x01
//	1        2     U: user ID length, 1..256
//	3        U     user ID: UTF-8, no other restriction
//	3+U      8     expiry: Unix time in whole seconds, 1..253402300799
//	               (up to 9999-12-31T23:59:59Z)
//	11+U     16    nonce: random bytes (crypto/rand)
//	27+U     2     D: data length, 0..1024
//	29+U     D     data: opaque bytes for the game
//	29+U+D   32    MAC: HMAC-SHA256, keyed with the raw key bytes, over
//	               bytes 0 .. 29+U+D (everything before the MAC)
//
// A token is therefore exactly 61+U+D bytes long, between 62 and 1341;
// anything longer than MaxTokenLen (2048) is refused before it is parsed.
// A token is valid when its length matches the lengths it declares exactly
// (no trailing bytes), its version is 1, its fields are within the bounds
// above and its MAC matches under one of the verifier's keys (compared in
// constant time). It is accepted while now < expiry + MaxSkew, and only if
// expiry <= now + MaxLifetime + MaxSkew (MaxLifetime is 24 hours by
// default): a token signed to expire years from now is refused.
//
// The nonce makes every token unique even for the same user and expiry; the
// verifier does not keep a record of nonces, so a token is a bearer
// credential until it expires: keep lifetimes short (minutes), well under
// MaxLifetime.
//
// Test vector: key = the 32 bytes 0x00, 0x01, ..., 0x1f; user ID "alice";
// expiry 1700000000 (2023-11-14T22:13:20Z); nonce = the 16 bytes 0xa0,
// 0xa1, ..., 0xaf; data "team=red". The token is, field by field, in hex:
//
//	01                                                                version
//	0005                                                              U = 5
//	616c696365                                                        "alice"
//	000000006553f100                                                  expiry
//	a0a1a2a3a4a5a6a7a8a9aaabacadaeaf                                  nonce
//	0008                                                              D = 8
//	7465616d3d726564                                                  "team=red"
//	42aaf9863a142e3641591a2d93c1fdf292067327cb6ccdb815de46c55ebd082c  MAC
//
// # Keys and rotation
//
// HMAC.Keys lists the secrets: the first signs, all verify. To rotate, put
// the new key first and keep the old one second until every token it signed
// has expired, then remove it. Keys must be at least MinKeyLen (16) bytes;
// 32 random bytes are recommended.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// Errors. Authenticators wrap them with detail; test with errors.Is.
var (
	// ErrInvalidToken: the token is malformed, its signature does not
	// match, or it was signed by a key no longer listed.
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrExpired: the token is validly signed but has expired.
	ErrExpired = errors.New("auth: token expired")
	// ErrInvalidIdentity: Issue was given an identity that cannot be put
	// in a token (empty or oversized user ID, oversized data, no expiry).
	ErrInvalidIdentity = errors.New("auth: invalid identity")
	// ErrKey: the HMAC has no key, or a key shorter than MinKeyLen. It is
	// a configuration error, not the client's fault.
	ErrKey = errors.New("auth: missing or short HMAC key")
)

// Bounds of the token format.
const (
	TokenVersion = 1    // the version byte Issue writes and Authenticate accepts
	MaxUserIDLen = 256  // bytes of Identity.UserID
	MaxDataLen   = 1024 // bytes of Identity.Data
	MaxTokenLen  = 2048 // bytes of a whole token; longer input is refused unparsed
	NonceLen     = 16   // bytes of random nonce in every token
	MACLen       = 32   // bytes of HMAC-SHA256
	MinKeyLen    = 16   // bytes of the shortest key HMAC accepts

	MaxExpiry = 253402300799 // expiry in Unix seconds: 9999-12-31T23:59:59Z
)

// Identity is who a connection acts as.
type Identity struct {
	// UserID names the user: non-empty, valid UTF-8, at most MaxUserIDLen
	// bytes.
	UserID string
	// Expires is when the token stops being accepted, in whole seconds.
	// The zero time means never (Anonymous).
	Expires time.Time
	// Data is opaque to replica: whatever the backend put in the token for
	// the game (a team, a match ID, ...), at most MaxDataLen bytes; nil
	// when empty. It never aliases the token.
	Data []byte
}

// Authenticator checks a connect token. The server calls Authenticate once
// per connection, during the handshake, with the token bytes from the
// client's HELLO; it must be safe for concurrent use. The token must not be
// retained after Authenticate returns. On an error the Identity is the zero
// value and the server closes the connection with CloseAuthFailed.
type Authenticator interface {
	Authenticate(ctx context.Context, token []byte) (Identity, error)
}

// A Checker is an Authenticator whose configuration can be checked before
// its first token: replica.NewServer calls Check and fails on its error,
// so that a server that would refuse every client (an HMAC without a key,
// or with a short one) does not start.
type Checker interface {
	Check() error
}

// Refusal returns what a client that an Authenticator refused with err
// is told: a generic reason by the package's error kinds ("token
// expired", "invalid token", else "authentication failed"), since err
// itself may name server-side detail such as the server's clock or a key.
func Refusal(err error) string {
	switch {
	case errors.Is(err, ErrExpired):
		return "token expired"
	case errors.Is(err, ErrInvalidToken):
		return "invalid token"
	}
	return "authentication failed"
}

// IsAnonymous reports whether a is Anonymous, which admits every client:
// a server warns when it serves so on an address others can reach.
func IsAnonymous(a Authenticator) bool {
	switch a.(type) {
	case Anonymous, *Anonymous:
		return true
	}
	return false
}

// Anonymous accepts every token, for development only. The user ID is:
//
//   - for an empty token, "anon-<n>", where n counts anonymous identities
//     handed out by the process, from 1;
//   - for a token of at most MaxUserIDLen bytes of valid, printable UTF-8
//     (unicode.IsPrint), the token itself, so that a developer can choose a
//     name ("alice") and keep it across reconnections;
//   - for any other token, "anon-" followed by the first 16 hex digits of
//     the token's SHA-256, which is also stable across reconnections.
//
// The identity never expires and carries no Data. Nothing stops two
// clients from claiming the same user ID.
type Anonymous struct{}

var anonymousSeq atomic.Uint64

// Authenticate implements Authenticator. It never fails.
func (Anonymous) Authenticate(_ context.Context, token []byte) (Identity, error) {
	switch {
	case len(token) == 0:
		return Identity{UserID: "anon-" + strconv.FormatUint(anonymousSeq.Add(1), 10)}, nil
	case len(token) <= MaxUserIDLen && printable(token):
		return Identity{UserID: string(token)}, nil
	default:
		sum := sha256.Sum256(token)
		return Identity{UserID: "anon-" + hex.EncodeToString(sum[:8])}, nil
	}
}

func printable(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 || !unicode.IsPrint(r) {
			return false
		}
		b = b[n:]
	}
	return true
}

var (
	_ Authenticator = Anonymous{}
	_ Authenticator = (*HMAC)(nil)
)

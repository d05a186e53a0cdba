package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var (
	key1 = []byte("key-one-0123456789abcdef01234567")
	key2 = []byte("key-two-0123456789abcdef01234567")
	t0   = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
)

func clock(t *time.Time) func() time.Time { return func() time.Time { return *t } }

func issueT(t testing.TB, h *HMAC, id Identity) []byte {
	t.Helper()
	tok, err := h.Issue(id)
	if err != nil {
		t.Fatalf("Issue(%+v): %v", id, err)
	}
	return tok
}

func authT(h *HMAC, tok []byte) (Identity, error) {
	return h.Authenticate(context.Background(), tok)
}

func sameIdentity(a, b Identity) bool {
	return a.UserID == b.UserID && a.Expires.Equal(b.Expires) && bytes.Equal(a.Data, b.Data) && (a.Data == nil) == (b.Data == nil)
}

// TestVector pins the format to the test vector of the package doc, which
// was computed independently (Python's hmac module).
func TestVector(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	var nonce [NonceLen]byte
	for i := range nonce {
		nonce[i] = 0xa0 + byte(i)
	}
	h := &HMAC{Keys: [][]byte{key}, Now: func() time.Time { return time.Unix(1700000000-1, 0) }}
	want := "01" + "0005" + "616c696365" + "000000006553f100" + "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf" +
		"0008" + "7465616d3d726564" + "42aaf9863a142e3641591a2d93c1fdf292067327cb6ccdb815de46c55ebd082c"
	id := Identity{UserID: "alice", Expires: time.Unix(1700000000, 0), Data: []byte("team=red")}
	tok, err := h.issue(id, nonce)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(tok); got != want {
		t.Fatalf("token\n got %s\nwant %s", got, want)
	}
	got, err := authT(h, tok)
	if err != nil || !sameIdentity(got, id) {
		t.Fatalf("Authenticate = %+v, %v; want %+v", got, err, id)
	}
}

func TestRoundTrip(t *testing.T) {
	now := t0
	// No lifetime bound: the last identity expires in 9999.
	h := &HMAC{Keys: [][]byte{key1}, Now: clock(&now), MaxLifetime: -1}
	for _, id := range []Identity{
		{UserID: "alice", Expires: t0.Add(time.Minute)},
		{UserID: "bob", Expires: t0.Add(time.Hour), Data: []byte{0, 1, 2, 0xff}},
		{UserID: "jörg 🎮", Expires: t0.Add(time.Second), Data: []byte("team=red")},
		{UserID: strings.Repeat("u", MaxUserIDLen), Expires: time.Unix(MaxExpiry, 0), Data: bytes.Repeat([]byte{7}, MaxDataLen)},
	} {
		tok := issueT(t, h, id)
		if want := overhead + len(id.UserID) + len(id.Data); len(tok) != want || len(tok) > MaxTokenLen {
			t.Errorf("%q: token is %d bytes, want %d", id.UserID, len(tok), want)
		}
		got, err := authT(h, tok)
		if err != nil {
			t.Fatalf("%q: %v", id.UserID, err)
		}
		if !sameIdentity(got, id) {
			t.Errorf("got %+v, want %+v", got, id)
		}
	}
}

func TestExpiresTruncatedToSeconds(t *testing.T) {
	now := t0
	h := &HMAC{Keys: [][]byte{key1}, Now: clock(&now)}
	tok := issueT(t, h, Identity{UserID: "a", Expires: t0.Add(1500 * time.Millisecond)})
	id, err := authT(h, tok)
	if err != nil || !id.Expires.Equal(t0.Add(time.Second)) {
		t.Fatalf("got %v, %v; want expiry %v", id.Expires, err, t0.Add(time.Second))
	}
}

func TestNonceUnique(t *testing.T) {
	h := &HMAC{Keys: [][]byte{key1}}
	id := Identity{UserID: "alice", Expires: t0}
	a, b := issueT(t, h, id), issueT(t, h, id)
	if bytes.Equal(a, b) {
		t.Fatal("two tokens for the same identity are identical")
	}
	off := 1 + lenSize + len(id.UserID) + expirySize
	if bytes.Equal(a[off:off+NonceLen], b[off:off+NonceLen]) {
		t.Fatal("nonces repeat")
	}
}

func TestExpired(t *testing.T) {
	now := t0
	h := &HMAC{Keys: [][]byte{key1}, Now: clock(&now)}
	exp := t0.Add(time.Minute)
	tok := issueT(t, h, Identity{UserID: "alice", Expires: exp})
	for _, c := range []struct {
		skew time.Duration
		now  time.Time
		ok   bool
	}{
		{0, t0, true},
		{0, exp.Add(-time.Nanosecond), true},
		{0, exp, false},
		{0, exp.Add(time.Hour), false},
		{30 * time.Second, exp, true},
		{30 * time.Second, exp.Add(30*time.Second - time.Nanosecond), true},
		{30 * time.Second, exp.Add(30 * time.Second), false},
		{-time.Hour, exp.Add(-time.Nanosecond), true}, // negative skew is zero
		{-time.Hour, exp, false},
	} {
		now, h.MaxSkew = c.now, c.skew
		id, err := authT(h, tok)
		if c.ok != (err == nil) {
			t.Errorf("skew %v, now exp%+v: err = %v, want ok=%v", c.skew, c.now.Sub(exp), err, c.ok)
		}
		if err != nil {
			if !errors.Is(err, ErrExpired) || errors.Is(err, ErrInvalidToken) {
				t.Errorf("err = %v, want ErrExpired only", err)
			}
			if !sameIdentity(id, Identity{}) {
				t.Errorf("identity %+v returned with an error", id)
			}
		}
	}
}

// TestMaxLifetime checks that a validly signed token expiring further in
// the future than MaxLifetime+MaxSkew is refused, by default after 24
// hours, and that a negative MaxLifetime lifts the bound.
func TestMaxLifetime(t *testing.T) {
	now := t0
	issuer := &HMAC{Keys: [][]byte{key1}}
	for _, c := range []struct {
		life, skew time.Duration
		expires    time.Time
		ok         bool
	}{
		{0, 0, t0.Add(DefaultMaxLifetime), true},
		{0, 0, t0.Add(DefaultMaxLifetime + time.Second), false},
		{0, 0, time.Unix(MaxExpiry, 0), false}, // year 9999
		{0, time.Minute, t0.Add(DefaultMaxLifetime + time.Minute), true},
		{0, time.Minute, t0.Add(DefaultMaxLifetime + time.Minute + time.Second), false},
		{time.Hour, 0, t0.Add(time.Hour), true},
		{time.Hour, 0, t0.Add(time.Hour + time.Second), false},
		{-1, 0, time.Unix(MaxExpiry, 0), true},
	} {
		tok := issueT(t, issuer, Identity{UserID: "alice", Expires: c.expires})
		h := &HMAC{Keys: [][]byte{key1}, Now: clock(&now), MaxLifetime: c.life, MaxSkew: c.skew}
		_, err := authT(h, tok)
		if c.ok != (err == nil) {
			t.Errorf("lifetime %v, skew %v, expiry now+%v: err = %v, want ok=%v", c.life, c.skew, c.expires.Sub(t0), err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrExpired)) {
			t.Errorf("err = %v, want ErrInvalidToken only", err)
		}
	}
}

func TestDefaultNow(t *testing.T) {
	h := &HMAC{Keys: [][]byte{key1}}
	if _, err := authT(h, issueT(t, h, Identity{UserID: "a", Expires: time.Now().Add(time.Minute)})); err != nil {
		t.Errorf("fresh token: %v", err)
	}
	if _, err := authT(h, issueT(t, h, Identity{UserID: "a", Expires: time.Now().Add(-time.Minute)})); !errors.Is(err, ErrExpired) {
		t.Errorf("stale token: %v, want ErrExpired", err)
	}
}

// TestTamperEveryByte flips bits at every position of a valid token, and of
// an expired one: tampering must be reported as ErrInvalidToken, never as
// ErrExpired nor accepted.
func TestTamperEveryByte(t *testing.T) {
	now := t0
	h := &HMAC{Keys: [][]byte{key1, key2}, Now: clock(&now)}
	for _, name := range []string{"valid", "expired"} {
		tok := issueT(t, h, Identity{UserID: "alice", Expires: t0.Add(time.Minute), Data: []byte("team=red")})
		if name == "expired" {
			now = t0.Add(time.Hour)
		}
		for i := range tok {
			for _, mask := range []byte{0x01, 0x02, 0x10, 0x80, 0xff} {
				bad := bytes.Clone(tok)
				bad[i] ^= mask
				id, err := authT(h, bad)
				if !errors.Is(err, ErrInvalidToken) || errors.Is(err, ErrExpired) {
					t.Fatalf("%s token, byte %d ^ %#x: err = %v, want ErrInvalidToken", name, i, mask, err)
				}
				if !sameIdentity(id, Identity{}) {
					t.Fatalf("identity %+v returned with an error", id)
				}
			}
		}
	}
}

func TestWrongKey(t *testing.T) {
	tok := issueT(t, &HMAC{Keys: [][]byte{key1}}, Identity{UserID: "alice", Expires: t0})
	now := t0.Add(-time.Minute)
	if _, err := authT(&HMAC{Keys: [][]byte{key2}, Now: clock(&now)}, tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("err = %v, want ErrInvalidToken", err)
	}
	// A key that is a prefix or extension of the right one is a different
	// key. (Not an extension by zero bytes: HMAC pads short keys with zeros,
	// so those are the same key.)
	for _, k := range [][]byte{key1[:len(key1)-1], append(bytes.Clone(key1), 1)} {
		if _, err := authT(&HMAC{Keys: [][]byte{k}, Now: clock(&now)}, tok); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("key %q: err = %v, want ErrInvalidToken", k, err)
		}
	}
}

func TestKeyRotation(t *testing.T) {
	now := t0
	old := &HMAC{Keys: [][]byte{key1}, Now: clock(&now)}
	rotating := &HMAC{Keys: [][]byte{key2, key1}, Now: clock(&now)}
	rotated := &HMAC{Keys: [][]byte{key2}, Now: clock(&now)}
	id := Identity{UserID: "alice", Expires: t0.Add(time.Minute)}

	oldTok := issueT(t, old, id)
	if _, err := authT(rotating, oldTok); err != nil {
		t.Errorf("old token while the old key is listed second: %v", err)
	}
	if _, err := authT(rotated, oldTok); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("old token after the old key is removed: %v, want ErrInvalidToken", err)
	}

	newTok := issueT(t, rotating, id) // signed with the first key
	for _, h := range []*HMAC{rotating, rotated} {
		if _, err := authT(h, newTok); err != nil {
			t.Errorf("new token, keys %q: %v", h.Keys, err)
		}
	}
	if _, err := authT(old, newTok); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("new token on a server with only the old key: %v, want ErrInvalidToken", err)
	}
}

func TestIssueRefuses(t *testing.T) {
	h := &HMAC{Keys: [][]byte{key1}}
	exp := t0
	for _, c := range []struct {
		name string
		id   Identity
	}{
		{"empty user", Identity{Expires: exp}},
		{"long user", Identity{UserID: strings.Repeat("u", MaxUserIDLen+1), Expires: exp}},
		{"long multibyte user", Identity{UserID: strings.Repeat("é", MaxUserIDLen/2+1), Expires: exp}},
		{"invalid UTF-8", Identity{UserID: "a\xffb", Expires: exp}},
		{"long data", Identity{UserID: "a", Expires: exp, Data: make([]byte, MaxDataLen+1)}},
		{"zero expiry", Identity{UserID: "a"}},
		{"epoch expiry", Identity{UserID: "a", Expires: time.Unix(0, 0)}},
		{"pre-epoch expiry", Identity{UserID: "a", Expires: time.Unix(-5, 0)}},
		{"expiry after 9999", Identity{UserID: "a", Expires: time.Unix(MaxExpiry+1, 0)}},
	} {
		tok, err := h.Issue(c.id)
		if !errors.Is(err, ErrInvalidIdentity) || tok != nil {
			t.Errorf("%s: Issue = %x, %v; want ErrInvalidIdentity", c.name, tok, err)
		}
	}
}

func TestKeys(t *testing.T) {
	good := issueT(t, &HMAC{Keys: [][]byte{key1}}, Identity{UserID: "a", Expires: t0})
	for _, keys := range [][][]byte{nil, {}, {nil}, {make([]byte, MinKeyLen-1)}, {key1, []byte("short")}, {key1, {}}} {
		h := &HMAC{Keys: keys}
		if _, err := h.Issue(Identity{UserID: "a", Expires: t0}); !errors.Is(err, ErrKey) {
			t.Errorf("keys %q: Issue err = %v, want ErrKey", keys, err)
		}
		if _, err := authT(h, good); !errors.Is(err, ErrKey) || errors.Is(err, ErrInvalidToken) {
			t.Errorf("keys %q: Authenticate err = %v, want ErrKey", keys, err)
		}
		if err := h.Check(); !errors.Is(err, ErrKey) {
			t.Errorf("keys %q: Check err = %v, want ErrKey", keys, err)
		}
	}
	if err := (&HMAC{Keys: [][]byte{key1}}).Check(); err != nil {
		t.Errorf("Check of a good key: %v", err)
	}
	// A token sent as its hex text: told so.
	if _, err := authT(&HMAC{Keys: [][]byte{key1}}, []byte(hex.EncodeToString(good))); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "not a text encoding") {
		t.Errorf("a hex token: %v, want ErrInvalidToken saying it looks like text", err)
	}
	if _, err := (&HMAC{Keys: [][]byte{make([]byte, MinKeyLen)}}).Issue(Identity{UserID: "a", Expires: t0}); err != nil {
		t.Errorf("key of MinKeyLen bytes: %v", err)
	}
}

func TestTruncatedAndExtended(t *testing.T) {
	now := t0
	h := &HMAC{Keys: [][]byte{key1}, Now: clock(&now)}
	tok := issueT(t, h, Identity{UserID: "alice", Expires: t0.Add(time.Minute), Data: []byte("xyz")})
	for n := range len(tok) {
		if _, err := authT(h, tok[:n]); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("first %d of %d bytes: err = %v, want ErrInvalidToken", n, len(tok), err)
		}
	}
	for _, extra := range [][]byte{{0}, tok, make([]byte, MaxTokenLen)} {
		if _, err := authT(h, append(bytes.Clone(tok), extra...)); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("%d trailing bytes: err = %v, want ErrInvalidToken", len(extra), err)
		}
	}
}

// signed builds a token around an arbitrary body, signed with key: what a
// buggy backend could send.
func signed(key []byte, version byte, userLen int, user []byte, expiry uint64, dataLen int, data []byte) []byte {
	b := []byte{version}
	b = binary.BigEndian.AppendUint16(b, uint16(userLen))
	b = append(b, user...)
	b = binary.BigEndian.AppendUint64(b, expiry)
	b = append(b, make([]byte, NonceLen)...)
	b = binary.BigEndian.AppendUint16(b, uint16(dataLen))
	b = append(b, data...)
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(b)
}

// TestSignedButMalformed: a validly signed token whose fields break the
// format is refused, with ErrInvalidToken.
func TestSignedButMalformed(t *testing.T) {
	now := t0
	h := &HMAC{Keys: [][]byte{key1}, Now: clock(&now)}
	exp := uint64(t0.Add(time.Hour).Unix())
	long := bytes.Repeat([]byte("u"), MaxUserIDLen+1)
	big := make([]byte, MaxDataLen+1)
	if _, err := authT(h, signed(key1, 1, 1, []byte("a"), exp, 0, nil)); err != nil {
		t.Fatalf("the well-formed control token: %v", err)
	}
	for _, c := range []struct {
		name string
		tok  []byte
	}{
		{"version 0", signed(key1, 0, 1, []byte("a"), exp, 0, nil)},
		{"version 2", signed(key1, 2, 1, []byte("a"), exp, 0, nil)},
		{"empty user", signed(key1, 1, 0, nil, exp, 0, nil)},
		{"long user", signed(key1, 1, len(long), long, exp, 0, nil)},
		{"invalid UTF-8 user", signed(key1, 1, 2, []byte{0xc3, 0x28}, exp, 0, nil)},
		{"long data", signed(key1, 1, 1, []byte("a"), exp, len(big), big)},
		{"data length short", signed(key1, 1, 1, []byte("a"), exp, 2, []byte("abc"))},
		{"data length long", signed(key1, 1, 1, []byte("a"), exp, 4, []byte("abc"))},
		{"user length long", signed(key1, 1, 3, []byte("a"), exp, 0, nil)},
		{"expiry 0", signed(key1, 1, 1, []byte("a"), 0, 0, nil)},
		{"expiry negative", signed(key1, 1, 1, []byte("a"), 1<<63, 0, nil)},
		{"expiry -1", signed(key1, 1, 1, []byte("a"), ^uint64(0), 0, nil)},
		{"expiry after 9999", signed(key1, 1, 1, []byte("a"), MaxExpiry+1, 0, nil)},
	} {
		if _, err := authT(h, c.tok); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: err = %v, want ErrInvalidToken", c.name, err)
		}
	}
}

func TestDataNotAliased(t *testing.T) {
	now := t0
	h := &HMAC{Keys: [][]byte{key1}, Now: clock(&now)}
	tok := issueT(t, h, Identity{UserID: "a", Expires: t0.Add(time.Minute), Data: []byte("team=red")})
	id, err := authT(h, tok)
	if err != nil {
		t.Fatal(err)
	}
	clear(tok)
	if string(id.Data) != "team=red" {
		t.Fatalf("Data changed with the token: %q", id.Data)
	}
}

func TestErrorMessages(t *testing.T) {
	now := t0
	h := &HMAC{Keys: [][]byte{key1}, Now: clock(&now)}
	tok := issueT(t, h, Identity{UserID: "alice", Expires: t0.Add(time.Minute)})
	_, err := authT(h, tok[:10])
	if msg := err.Error(); !strings.HasPrefix(msg, "auth: invalid token: ") {
		t.Errorf("message %q", msg)
	}
	now = t0.Add(time.Hour)
	_, err = authT(h, tok)
	if msg := err.Error(); !strings.HasPrefix(msg, "auth: token expired: ") || strings.Contains(msg, string(key1)) {
		t.Errorf("message %q", msg)
	}
}

func TestAnonymous(t *testing.T) {
	ctx := context.Background()
	var a Authenticator = Anonymous{}
	seen := map[string]bool{}
	for range 3 {
		id, err := a.Authenticate(ctx, nil)
		if err != nil || !strings.HasPrefix(id.UserID, "anon-") || seen[id.UserID] {
			t.Fatalf("empty token: %+v, %v", id, err)
		}
		seen[id.UserID] = true
		if !id.Expires.IsZero() || id.Data != nil {
			t.Errorf("anonymous identity %+v has an expiry or data", id)
		}
	}
	for tok, want := range map[string]string{
		"alice":                  "alice",
		"Jörg the 2nd":           "Jörg the 2nd",
		"bad\xffutf8":            "anon-",
		"tab\there":              "anon-",
		"":                       "anon-",
		strings.Repeat("x", 257): "anon-",
		strings.Repeat("x", 256): strings.Repeat("x", 256),
	} {
		id, err := a.Authenticate(ctx, []byte(tok))
		if err != nil || !strings.HasPrefix(id.UserID, want) {
			t.Errorf("token %q: %+v, %v; want user %q...", tok, id, err, want)
		}
		if want == "anon-" && tok != "" {
			if len(id.UserID) != len("anon-")+16 {
				t.Errorf("token %q: user %q, want anon- and 16 hex digits", tok, id.UserID)
			}
			again, _ := a.Authenticate(ctx, []byte(tok))
			if again.UserID != id.UserID {
				t.Errorf("token %q: user %q then %q, want stable", tok, id.UserID, again.UserID)
			}
		}
	}
}

// FuzzAuthenticate feeds arbitrary bytes to Authenticate. It must never
// panic, must fail with ErrInvalidToken or ErrExpired only, and may succeed
// only for a token that was issued (the fuzzer cannot forge a MAC).
func FuzzAuthenticate(f *testing.F) {
	now := t0
	h := &HMAC{Keys: [][]byte{key1, key2}, Now: clock(&now)}
	var issued [][]byte
	add := func(signer []byte, id Identity, nonce byte) []byte {
		tok, err := (&HMAC{Keys: [][]byte{signer}}).issue(id, [NonceLen]byte{nonce})
		if err != nil {
			f.Fatal(err)
		}
		issued = append(issued, tok)
		return tok
	}
	valid := add(key1, Identity{UserID: "alice", Expires: t0.Add(time.Hour), Data: []byte("team=red")}, 1)
	byOld := add(key2, Identity{UserID: "bob", Expires: t0.Add(time.Hour)}, 2)
	expired := add(key1, Identity{UserID: "carol", Expires: t0.Add(-time.Hour)}, 3)
	big := add(key1, Identity{UserID: strings.Repeat("u", MaxUserIDLen), Expires: t0.Add(time.Hour), Data: make([]byte, MaxDataLen)}, 4)
	foreign := issueT(f, &HMAC{Keys: [][]byte{[]byte("a-key-nobody-lists-0123456789abc")}}, Identity{UserID: "mallory", Expires: t0.Add(time.Hour)})

	for _, tok := range [][]byte{valid, byOld, expired, big, foreign, nil, {1}, {1, 0, 0}, {1, 0xff, 0xff}} {
		f.Add(tok)
	}
	for _, n := range []int{1, 3, 10, len(valid) / 2, len(valid) - MACLen, len(valid) - 1} {
		f.Add(valid[:n])
	}
	flipped := bytes.Clone(valid)
	flipped[len(flipped)-1] ^= 1
	f.Add(flipped)
	f.Add(append(bytes.Clone(valid), 0))

	f.Fuzz(func(t *testing.T, tok []byte) {
		in := bytes.Clone(tok)
		id, err := h.Authenticate(context.Background(), tok)
		if !bytes.Equal(in, tok) {
			t.Fatal("Authenticate modified its input")
		}
		isIssued := false
		for _, x := range issued {
			isIssued = isIssued || bytes.Equal(x, tok)
		}
		switch {
		case err == nil:
			if !isIssued || !referenceValid(tok, h.Keys) {
				t.Fatalf("accepted a token that was never issued: %x -> %+v", tok, id)
			}
			if id.UserID == "" || id.Expires.IsZero() || len(id.Data) > MaxDataLen {
				t.Fatalf("accepted with a malformed identity %+v", id)
			}
		case errors.Is(err, ErrExpired):
			if !isIssued || !referenceValid(tok, h.Keys) {
				t.Fatalf("ErrExpired for a token that was never issued: %x", tok)
			}
		case errors.Is(err, ErrInvalidToken):
			if isIssued && !bytes.Equal(tok, expired) {
				t.Fatalf("refused an issued token: %v", err)
			}
		default:
			t.Fatalf("unexpected error %v", err)
		}
		if err != nil && !sameIdentity(id, Identity{}) {
			t.Fatalf("identity %+v returned with error %v", id, err)
		}
	})
}

// referenceValid is an independent check of the MAC: the last MACLen bytes
// are the HMAC of the rest under one of keys.
func referenceValid(tok []byte, keys [][]byte) bool {
	if len(tok) < MACLen {
		return false
	}
	for _, k := range keys {
		m := hmac.New(sha256.New, k)
		m.Write(tok[:len(tok)-MACLen])
		if hmac.Equal(m.Sum(nil), tok[len(tok)-MACLen:]) {
			return true
		}
	}
	return false
}

// FuzzIssueRoundTrip: whatever Issue accepts, Authenticate gives back;
// whatever it refuses breaks a documented bound.
func FuzzIssueRoundTrip(f *testing.F) {
	f.Add("alice", []byte("team=red"), t0.Unix())
	f.Add("", []byte(nil), int64(0))
	f.Add(strings.Repeat("u", MaxUserIDLen), make([]byte, MaxDataLen), int64(MaxExpiry))
	f.Add("a\xff", []byte{1}, int64(-1))
	f.Fuzz(func(t *testing.T, user string, data []byte, expiry int64) {
		exp := time.Unix(expiry, 0)
		now := exp.Add(-time.Second)
		h := &HMAC{Keys: [][]byte{key1}, Now: clock(&now)}
		id := Identity{UserID: user, Expires: exp, Data: data}
		if len(data) == 0 {
			id.Data = nil
		}
		tok, err := h.Issue(id)
		fits := user != "" && len(user) <= MaxUserIDLen && utf8.ValidString(user) && len(data) <= MaxDataLen && expiry >= 1 && expiry <= MaxExpiry
		if err != nil {
			if fits || !errors.Is(err, ErrInvalidIdentity) {
				t.Fatalf("Issue(%+v): %v", id, err)
			}
			return
		}
		if !fits {
			t.Fatalf("Issue accepted %+v", id)
		}
		got, err := authT(h, tok)
		if err != nil || !sameIdentity(got, id) {
			t.Fatalf("round trip of %+v: %+v, %v", id, got, err)
		}
	})
}

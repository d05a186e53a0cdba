package auth_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replicago/replica/auth"
)

func ExampleHMAC() {
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	h := &auth.HMAC{
		Keys:    [][]byte{[]byte("a secret of at least 16 bytes, 32 is better")},
		Now:     func() time.Time { return now }, // nil in production: time.Now
		MaxSkew: 5 * time.Second,
	}

	// The backend issues a short-lived token and gives it to the client...
	token, err := h.Issue(auth.Identity{
		UserID:  "alice",
		Expires: now.Add(2 * time.Minute),
		Data:    []byte("team=red"),
	})
	if err != nil {
		panic(err)
	}

	// ... which sends it in its HELLO; the server checks it.
	id, err := h.Authenticate(ctx, token)
	fmt.Println(id.UserID, id.Expires.Format(time.RFC3339), string(id.Data), err)

	token[5] ^= 1 // tampered
	_, err = h.Authenticate(ctx, token)
	fmt.Println(errors.Is(err, auth.ErrInvalidToken))
	token[5] ^= 1

	now = now.Add(time.Hour) // too late
	_, err = h.Authenticate(ctx, token)
	fmt.Println(errors.Is(err, auth.ErrExpired))

	// Output:
	// alice 2030-06-01T12:02:00Z team=red <nil>
	// true
	// true
}

func ExampleHMAC_rotation() {
	ctx := context.Background()
	oldKey := []byte("old-key-0123456789abcdef01234567")
	newKey := []byte("new-key-0123456789abcdef01234567")
	token, _ := (&auth.HMAC{Keys: [][]byte{oldKey}}).Issue(auth.Identity{UserID: "bob", Expires: time.Now().Add(time.Minute)})

	// During the rotation the new key signs and both verify.
	_, err := (&auth.HMAC{Keys: [][]byte{newKey, oldKey}}).Authenticate(ctx, token)
	fmt.Println(err)
	// Once tokens signed by the old key have expired, it is removed.
	_, err = (&auth.HMAC{Keys: [][]byte{newKey}}).Authenticate(ctx, token)
	fmt.Println(errors.Is(err, auth.ErrInvalidToken))

	// Output:
	// <nil>
	// true
}

func ExampleAnonymous() {
	ctx := context.Background()
	var a auth.Authenticator = auth.Anonymous{}
	id, _ := a.Authenticate(ctx, []byte("alice"))
	fmt.Println(id.UserID)
	id, _ = a.Authenticate(ctx, []byte{0xde, 0xad, 0xbe, 0xef})
	fmt.Println(id.UserID)

	// Output:
	// alice
	// anon-5f78c33274e43fa9
}

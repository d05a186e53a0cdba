package auth

import (
	"errors"
	"fmt"
	"testing"
)

func TestRefusal(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("key 2: %w", ErrInvalidToken):                  "invalid token",
		fmt.Errorf("at 12:00:05, after 12:00:00: %w", ErrExpired): "token expired",
		errors.New("identity service down"):                       "authentication failed",
	} {
		if got := Refusal(err); got != want {
			t.Errorf("Refusal(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestIsAnonymous(t *testing.T) {
	if !IsAnonymous(Anonymous{}) || !IsAnonymous(&Anonymous{}) {
		t.Error("Anonymous is not anonymous")
	}
	if IsAnonymous(&HMAC{}) || IsAnonymous(nil) {
		t.Error("HMAC or nil is anonymous")
	}
}

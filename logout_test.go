package replica

import (
	"testing"
	"time"
)

// TestLogoutExpiry drives noteLogout and loginLives through a login that
// leaves, resumes (the same login goes on) and leaves again, and a mass
// disconnect: a login lives exactly Config.LoginGrace after its last
// leave, whatever left before or after it.
func TestLogoutExpiry(t *testing.T) {
	const grace = 10 // ticks: 500 ms at 20 Hz
	s := &Server{cfg: Config{TickRate: 20, LoginGrace: 500 * time.Millisecond}}
	leave := func(login uint64) { s.noteLogout(&Conn{login: login}) }
	want := func(login uint64, lives bool) {
		t.Helper()
		if got := s.loginLives("ann", login); got != lives {
			t.Fatalf("tick %d: login %d lives %v, want %v", s.tick, login, got, lives)
		}
	}

	s.tick = 100
	leave(1) // ann's login 1 leaves,
	s.tick = 106
	leave(1) // resumes and leaves again.
	s.tick = 100 + grace + 1
	leave(2) // Another leave sweeps what expired: login 1's first leave.
	want(1, true)
	s.tick = 106 + grace
	want(1, true)
	s.tick = 106 + grace + 1
	want(1, false)

	// A thousand logins leave on one tick and expire together; the
	// entries kept never outgrow those within the grace.
	s.tick = 200
	for l := uint64(1000); l < 2000; l++ {
		leave(l)
	}
	want(1500, true)
	s.tick = 200 + grace + 1
	leave(3)
	want(1500, false)
	if len(s.logouts) != 1 || len(s.logoutOrder) != 1 {
		t.Fatalf("%d logins, %d in order kept after expiry, want 1", len(s.logouts), len(s.logoutOrder))
	}
	want(3, true)
}

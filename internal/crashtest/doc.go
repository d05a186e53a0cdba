// Package crashtest holds the crash tests of the server's write-behind
// persistence: a child process runs a world whose players' persist fields
// are saved to SQLite or PostgreSQL, is killed with SIGKILL at random
// moments, and the store is checked after every kill (see crash_test.go).
// It is a package of its own so that the root package's tests link no
// database driver.
package crashtest

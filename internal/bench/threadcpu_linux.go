package bench

import (
	"syscall"
	"time"
	"unsafe"
)

// ThreadCPU returns the CPU time the calling thread has used, or false
// where that is not known. It measures a goroutine only while the
// goroutine is locked to its thread (runtime.LockOSThread).
func ThreadCPU() (time.Duration, bool) {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

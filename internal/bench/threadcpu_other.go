//go:build !linux

package bench

import "time"

func ThreadCPU() (time.Duration, bool) { return 0, false }

package storetest_test

import (
	"testing"

	"github.com/replicago/replica/store"
	"github.com/replicago/replica/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return storetest.NewMemory() })
}

// TestMemoryZero runs the suite on the zero value, which a test may
// declare instead of calling NewMemory.
func TestMemoryZero(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return &storetest.Memory{} })
}

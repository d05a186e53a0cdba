// Package wire holds the bit-level primitives of the replica wire format:
// a little-endian, least-significant-bit-first bit stream, the variable
// length integer code U(k) used for every count, identifier and delta, and
// zigzag mapping for signed values.
//
// The format is specified in docs/protocol.md; this package is its
// executable form. It imports nothing outside the standard library so that
// every decoder built on it can be fuzzed in isolation.
//
// # The U(k) code
//
// U(k) writes an unsigned 64-bit value n with a tunable split point k
// (0 ≤ k ≤ 63). Let b be the bit length of n (0 for n = 0).
//
//   - b ≤ k: a 0 bit, then n in k bits.
//   - b > k: (b−k) one bits, then a 0 bit unless b = 64, then the low b−1
//     bits of n (its top bit is implied).
//
// Small values cost k+1 bits and every value above costs 2b−k bits, so an
// encoder that picks k near the typical bit length of its data pays about
// one bit more than a fixed-width field, while outliers stay representable.
package wire

import (
	"errors"
	"math/bits"
)

// Errors returned by [Reader]. Decoders built on this package wrap them, so
// callers test with errors.Is.
var (
	// ErrTruncated means a read went past the end of the input.
	ErrTruncated = errors.New("wire: truncated input")
	// ErrMalformed means the input is not a valid encoding.
	ErrMalformed = errors.New("wire: malformed input")
	// ErrLimit means a decoded size exceeds a configured limit.
	ErrLimit = errors.New("wire: limit exceeded")
)

// MaxK is the largest split point of the U(k) code.
const MaxK = 63

// Zigzag maps a signed value to an unsigned one so that values of small
// magnitude get small codes: 0, −1, 1, −2, … map to 0, 1, 2, 3, ….
func Zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// Unzigzag is the inverse of [Zigzag].
func Unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// ULen returns the number of bits U(k) uses for n.
func ULen(n uint64, k uint) int {
	b := uint(bits.Len64(n))
	if b <= k {
		return int(k) + 1
	}
	if b == 64 {
		return int(64-k) + 63
	}
	return int(2*b - k)
}

// BestK returns the split point that minimises the total U(k) size of a set
// of values, given hist[b] = how many values have bit length b.
func BestK(hist *[65]uint32) uint {
	best, bestCost := uint(0), uint64(1<<63)
	for k := uint(0); k <= MaxK; k++ {
		var cost uint64
		for b, c := range hist {
			if c == 0 {
				continue
			}
			var l uint64
			switch {
			case uint(b) <= k:
				l = uint64(k) + 1
			case b == 64:
				l = uint64(64-k) + 63
			default:
				l = uint64(2*uint(b) - k)
			}
			cost += l * uint64(c)
		}
		if cost < bestCost {
			best, bestCost = k, cost
		}
	}
	return best
}

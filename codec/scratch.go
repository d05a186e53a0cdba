package codec

// settle lets the scratch buffers that grow with the number of entities in
// a segment shrink again after a spike, such as the full state of a mass
// join or a mass spawn: an encoder lives as long as its server, and should
// hold what its usual ticks need, not its largest one. n is the number of
// entities the last call wrote. The high-water mark decays by 1/8 a call,
// so buffers are released only after a dozen or more much smaller calls,
// and a server alternating big and small segments keeps its buffers and
// allocates nothing.
func (enc *Encoder) settle(n int) {
	enc.peak = max(n, enc.peak-enc.peak/8)
	if cap(enc.items) <= 4*enc.peak+256 {
		return
	}
	enc.items, enc.sets, enc.order = nil, nil, nil
	enc.codes, enc.codeKs, enc.gapv, enc.gapk = nil, nil, nil, nil
	enc.bitmap, enc.ranks, enc.sorted = nil, nil, nil
}

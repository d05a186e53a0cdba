package codec

// SetRows turns the decoder's row-at-a-time fast paths on or off.
func SetRows(d *Decoder, on bool) { d.noRows = !on }

// SetPlans turns on or off the decoder's reuse of the plans of the field
// trees it has read.
// Off, it also forgets the plans kept so far.
func SetPlans(d *Decoder, on bool) {
	d.noPlans = !on
	if !on {
		d.plans, d.trees = [planCache]plan{}, [planCache]tree{}
		d.head, d.link, d.chain = [planChains + 1]uint8{}, [planCache]uint8{}, [planCache]uint16{}
	}
}

// DecodedValues returns the values the decoder counted against
// Limits.MaxValues in the segment it applied last.
func DecodedValues(d *Decoder) int { return d.values }

// DecodedEntities returns the entities the decoder counted against
// Limits.MaxEntities in the segment it applied last.
func DecodedEntities(d *Decoder) int { return d.entities }

// CheckPlans turns on or off the Assemblers' check of each segment's size
// against its plan, which Mispredicted reports.
func CheckPlans(on bool) { checkPlans = on }

// Mispredicted returns how many segments a's plans sized wrongly: a
// segment's planned size must be its size.
func Mispredicted(a *Assembler) int { return a.mispredicted }

// BatchValues returns the values b's pieces add to a decoder's
// Limits.MaxValues count, in all.
func BatchValues(b *Batch) int {
	n := 0
	for _, p := range b.pieces {
		n += int(p.values)
	}
	return n
}

// NoteHeld records in h a create (created) or destroy of slot, as an
// Assembler does when it writes one.
func NoteHeld(h *Held, slot uint32, created bool) { h.note(slot, created) }

// SetHeldAllBlocks sets the most blocks of a slot range for which a Held
// keeps every block, and returns the value before.
func SetHeldAllBlocks(n int) int {
	old := allBlocks
	allBlocks = n
	return old
}

// HeldRankOf is the rank an Assembler reads for slot (Held.Rank without
// its checks: for a valid h, and whose rank counts only if held).
func HeldRankOf(h *Held, slot uint32) (int, bool) {
	r, ok := h.block(slot).rankOf(slot)
	return int(r), ok
}

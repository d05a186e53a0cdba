package codec

// SetRows turns the decoder's row-at-a-time fast paths on or off.
func SetRows(d *Decoder, on bool) { d.noRows = !on }

// DecodedValues returns the values the decoder counted against
// Limits.MaxValues in the segment it applied last.
func DecodedValues(d *Decoder) int { return d.values }

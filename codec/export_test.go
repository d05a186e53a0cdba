package codec

// SetRows turns the decoder's row-at-a-time fast paths on or off.
func SetRows(d *Decoder, on bool) { d.noRows = !on }

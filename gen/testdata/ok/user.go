package ok

// Heal calls generated methods, which do not exist while the generated file
// is stale: Load must tolerate that.
func (p *Player) Heal(n int16) {
	p.SetHp(p.Hp() + n)
}

func (p *Player) String() string { return p.Name() }

var _ = notSpec{}

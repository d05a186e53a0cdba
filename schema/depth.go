package schema

// ElemStruct returns the struct type of a container's elements: a bag's
// items, or a list's or map's struct elements. It returns nil for any
// other type.
func (t *Type) ElemStruct() *Struct {
	switch {
	case t.Kind == Bag:
		return t.Struct
	case (t.Kind == List || t.Kind == Map) && t.Elem != nil && t.Elem.Kind == Nested:
		return t.Elem.Struct
	}
	return nil
}

// Depth returns the deepest nesting level a decoder counts (protocol.md
// §7.1) in a value of s whose leaves are all set and whose containers all
// hold elements, with s's own fields at level 0: a nested struct adds a
// level, a container one and a struct stored in a container one more. It
// returns −1 when values of s can nest without bound, because s reaches
// itself through a list, map or bag.
func (s *Struct) Depth() int { return s.depth(map[*Struct]int{}) }

// depth is Depth with memo holding the structs seen so far: their depth,
// or −1 while they are being visited, which is what a cycle back to one of
// them makes of every struct on it.
func (s *Struct) depth(memo map[*Struct]int) int {
	if d, ok := memo[s]; ok {
		return d
	}
	memo[s] = -1
	d := 0
	for i := range s.Leaves {
		ld := s.leafDepth(i, memo)
		if ld < 0 {
			return -1
		}
		d = max(d, ld)
	}
	memo[s] = d
	return d
}

// leafDepth is depth for leaf i of s alone: the level of its path and, for
// a container, of its elements.
func (s *Struct) leafDepth(i int, memo map[*Struct]int) int {
	l := s.Leaf(i)
	d := len(l.Path) - 1
	t := &l.Field.Type
	if !t.Kind.Container() {
		return d
	}
	d = max(d, 1)
	if e := t.ElemStruct(); e != nil {
		ed := e.depth(memo)
		if ed < 0 {
			return -1
		}
		d = max(d, 2+ed)
	}
	return d
}

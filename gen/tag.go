package gen

import (
	"fmt"
	"go/token"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/replicago/replica/schema"
)

// tagKeys lists the replica tag keys in the order messages name them.
var tagKeys = []string{"id", "was", "vis", "life", "chan", "pos", "lod", "quant", "min", "max", "bits", "bag", "deprecated"}

// tagAllowed describes the values each key accepts, for messages.
var tagAllowed = map[string]string{
	"id":    "a whole number from 1 to 4294967295",
	"was":   "the field's previous name, such as was=hp",
	"vis":   "server, owner, others or all",
	"life":  "scene, process, session or persist",
	"chan":  "reliable or unreliable",
	"pos":   "x or y (the coordinate of the entity's position it holds)",
	"lod":   "a distance such as 50: the field is sent only to clients that near",
	"quant": "a positive step such as 0.25 or 1/64",
	"min":   "a number such as -100 or 0.5",
	"max":   "a number such as 100 or 0.5",
	"bits":  "a whole number from 1 to 32",
}

// tag is a parsed replica struct tag.
type tag struct {
	skip       bool // replica:"-"
	id         uint32
	was        string // the field's previous name, or ""
	vis        schema.Visibility
	life       schema.Lifetime
	ch         schema.Channel
	pos        schema.Axis
	lod        float64
	bag        bool
	deprecated bool
	given      map[string]bool // the keys given

	// Quantization parameters, as given.
	step, min, max float64
	bits           int
	quantKey       string // the first of quant, min, max and bits given, or ""
	hasMin, hasMax bool
}

// quant builds the quantization the tag asks for.
func (t *tag) quant() (schema.Quant, error) {
	return schema.NewQuant(t.step, t.min, t.max, t.bits, t.hasMin, t.hasMax)
}

// parseTag parses the replica key of a Go struct tag (the raw string
// between the backquotes). It returns the tag and one message per mistake.
func parseTag(structTag string) (*tag, []string) {
	t := &tag{vis: schema.VisAll, life: schema.LifeSession, ch: schema.Reliable}
	v, ok := reflect.StructTag(structTag).Lookup("replica")
	if !ok {
		if strings.Contains(structTag, "replica:") {
			return t, []string{fmt.Sprintf("malformed struct tag %s: write it as replica:\"key=value,...\"", "`"+structTag+"`")}
		}
		// A misspelt key would leave the field with the defaults (a
		// vis=owner field sent to everyone): refuse what looks like one.
		for _, k := range tagKeysOf(structTag) {
			if k != "replica" && typo(strings.ToLower(k), "replica") {
				return t, []string{fmt.Sprintf("struct tag key %q looks like a misspelt replica: write replica:\"key=value,...\"", k)}
			}
		}
		return t, nil
	}
	if v == "-" {
		t.skip = true
		return t, nil
	}
	if strings.TrimSpace(v) == "" {
		return t, nil
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	seen := map[string]bool{}
	t.given = seen
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			bad("replica tag %q has an empty item; separate items with single commas", v)
			continue
		}
		key, val, hasVal := strings.Cut(item, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		allowed, takesValue := tagAllowed[key]
		isFlag := key == "bag" || key == "deprecated"
		switch {
		case !takesValue && !isFlag:
			bad("unknown replica tag key %q; the keys are %s", key, keyList())
			continue
		case seen[key]:
			bad("replica tag key %q is given twice", key)
			continue
		case isFlag && hasVal:
			bad("replica tag flag %q takes no value; write just %s", key, key)
			continue
		case takesValue && (!hasVal || val == ""):
			bad("replica tag key %q needs a value: %s=%s", key, key, allowed)
			continue
		}
		seen[key] = true
		badValue := func() { bad("bad %s=%s in replica tag: want %s", key, val, allowed) }
		switch key {
		case "id":
			n, err := strconv.ParseUint(val, 10, 32)
			if err != nil || n == 0 {
				badValue()
				continue
			}
			t.id = uint32(n)
		case "was":
			if !token.IsIdentifier(val) || val == "_" {
				badValue()
				continue
			}
			t.was = val
		case "vis":
			if !named(&t.vis, val, schema.VisServer, schema.VisOwner, schema.VisOthers, schema.VisAll) {
				badValue()
			}
		case "life":
			if !named(&t.life, val, schema.LifeScene, schema.LifeProcess, schema.LifeSession, schema.LifePersist) {
				badValue()
			}
		case "pos":
			if !named(&t.pos, val, schema.AxisX, schema.AxisY) {
				badValue()
			}
		case "lod":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || !(f > 0) || math.IsInf(f, 0) {
				badValue()
				continue
			}
			t.lod = f
		case "chan":
			if !named(&t.ch, val, schema.Reliable, schema.Unreliable) {
				badValue()
			}
		case "quant":
			step, ok := parseStep(val)
			if !ok {
				badValue()
				continue
			}
			t.step = step
		case "min", "max":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				badValue()
				continue
			}
			if key == "min" {
				t.min, t.hasMin = f, true
			} else {
				t.max, t.hasMax = f, true
			}
		case "bits":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > 32 {
				badValue()
				continue
			}
			t.bits = n
		case "bag":
			t.bag = true
		case "deprecated":
			t.deprecated = true
		}
		if t.quantKey == "" && (key == "quant" || key == "min" || key == "max" || key == "bits") {
			t.quantKey = key
		}
	}
	return t, errs
}

// named sets *dst to the value of all whose name (String) is val, and
// reports whether there was one.
func named[T fmt.Stringer](dst *T, val string, all ...T) bool {
	for _, v := range all {
		if v.String() == val {
			*dst = v
			return true
		}
	}
	return false
}

// parseStep parses a quantization step: a decimal such as 0.25 or a
// fraction such as 1/64. It must be positive and finite.
func parseStep(s string) (float64, bool) {
	var f float64
	if num, den, ok := strings.Cut(s, "/"); ok {
		n, err1 := strconv.ParseFloat(strings.TrimSpace(num), 64)
		d, err2 := strconv.ParseFloat(strings.TrimSpace(den), 64)
		if err1 != nil || err2 != nil || !(d > 0) {
			return 0, false
		}
		f = n / d
	} else {
		var err error
		if f, err = strconv.ParseFloat(s, 64); err != nil {
			return 0, false
		}
	}
	if !(f > 0) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func keyList() string {
	return strings.Join(tagKeys[:len(tagKeys)-1], ", ") + " and " + tagKeys[len(tagKeys)-1]
}

// tagKeysOf returns the keys of a Go struct tag (the raw string between
// the backquotes), as far as it follows the key:"value" convention.
func tagKeysOf(structTag string) []string {
	var keys []string
	for structTag != "" {
		structTag = strings.TrimLeft(structTag, " ")
		i := strings.IndexByte(structTag, ':')
		if i <= 0 || i+1 >= len(structTag) || structTag[i+1] != '"' {
			return keys
		}
		keys = append(keys, structTag[:i])
		v, err := strconv.QuotedPrefix(structTag[i+1:])
		if err != nil {
			return keys
		}
		structTag = structTag[i+1+len(v):]
	}
	return keys
}

// typo reports whether a is b with at most two letters changed, added,
// dropped or swapped with their neighbour (a misspelling of b).
func typo(a, b string) bool {
	// Damerau–Levenshtein (optimal string alignment) distance ≤ 2.
	if d := len(a) - len(b); d > 2 || d < -2 {
		return false
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)] <= 2
}

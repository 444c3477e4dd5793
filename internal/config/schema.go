package config

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/krabka-io/krabka-dispatch/devices/modbus"
	"github.com/krabka-io/krabka-dispatch/devices/mqtt"
)

// position is a place in the file, counted from 1.
type position struct{ line, column int }

var (
	reflectConfig  = reflect.TypeFor[Config]()
	durationType   = reflect.TypeFor[time.Duration]()
	rawMessageType = reflect.TypeFor[yaml.RawMessage]()
)

// sectionTypes are the schemas of the device sections, which Config holds
// as raw YAML: the schema walk checks them too, so their faults carry a line.
var sectionTypes = map[string]reflect.Type{
	DeviceMQTT:   reflect.TypeFor[mqtt.Config](),
	DeviceModbus: reflect.TypeFor[modbus.Config](),
}

// durationHint is the fix of every duration fault.
const durationHint = "a duration such as 15s, 500ms or 1m30s"

// schema walks the YAML tree against the Go types it decodes into. It
// collects every fault of shape (an unknown key, a value of the wrong type)
// instead of stopping at the first, as the decoder does; it removes each
// faulty node, so the rest still decodes; and it records where each field
// is, so that a fault found later, by validation, can name its line.
type schema struct {
	lines    []string
	problems []*FieldError
	faulted  map[string]bool
	at       map[string]position
	// repairs counts the flow items flowScalar repaired; sections holds
	// each device section that has one, whose raw text must then be
	// printed again from the repaired tree.
	repairs  int
	sections map[string]ast.Node
}

func newSchema(data []byte) *schema {
	return &schema{
		lines:    strings.Split(string(data), "\n"),
		faulted:  map[string]bool{},
		at:       map[string]position{},
		sections: map[string]ast.Node{},
	}
}

func tokenPos(tk *token.Token) position {
	if tk == nil || tk.Position == nil {
		return position{}
	}
	return position{tk.Position.Line, tk.Position.Column}
}

func (s *schema) fault(p position, field, value, problem, hint string) {
	s.faulted[field] = true
	s.problems = append(s.problems, &FieldError{Line: p.line, Column: p.column, Field: field, Value: value, Problem: problem, Hint: hint})
}

// locateIn returns the place of field, or of its nearest enclosing field the
// file has.
func locateIn(at map[string]position, field string) position {
	for field != "" {
		if p, ok := at[field]; ok {
			return p
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			break
		}
		field = field[:i]
	}
	return position{}
}

// covered reports whether field or a field enclosing it already has a
// fault of shape, which makes a later fault of its value a repetition.
func (s *schema) covered(field string) bool {
	for field != "" {
		if s.faulted[field] {
			return true
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			return false
		}
		field = field[:i]
	}
	return false
}

// unwrap looks through tags and anchors to the value.
func unwrap(n ast.Node) ast.Node {
	for {
		switch x := n.(type) {
		case *ast.TagNode:
			n = x.Value
		case *ast.AnchorNode:
			n = x.Value
		default:
			return n
		}
	}
}

// scalarText is a scalar node's text as written.
func scalarText(n ast.Node) string {
	if tk := n.GetToken(); tk != nil {
		return tk.Value
	}
	return ""
}

// describe names the kind of a node for a message.
func describe(n ast.Node) string {
	switch n.Type() {
	case ast.MappingType, ast.MappingValueType:
		return "a section (key: value pairs)"
	case ast.SequenceType:
		return "a list"
	case ast.IntegerType, ast.FloatType, ast.InfinityType, ast.NanType:
		return "a number"
	case ast.BoolType:
		return "true/false"
	}
	return "text"
}

// walk checks node n against type t at path. It returns false when the node
// is at fault and must be dropped before decoding.
func (s *schema) walk(n ast.Node, t reflect.Type, path string) bool {
	n = unwrap(n)
	if n == nil || n.Type() == ast.NullType {
		return true
	}
	if _, ok := n.(*ast.AliasNode); ok {
		return true
	}
	p := tokenPos(n.GetToken())
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 && !m.IsFlowStyle {
		// A block mapping's token is its first colon; the first key is
		// where a reader looks.
		p = tokenPos(m.Values[0].Key.GetToken())
	}
	if path != "" {
		s.at[path] = p
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		return s.duration(n, p, path)
	case t == rawMessageType:
		if n.Type() != ast.MappingType {
			s.fault(p, path, scalarText(n), "want a section (key: value pairs), found "+describe(n), "")
			return false
		}
		return true
	}
	switch t.Kind() {
	case reflect.Struct:
		return s.mapping(n, p, path, func(key string) (reflect.Type, []string, bool) {
			f, ok := fieldByKey(t, key)
			if !ok {
				return nil, keysOf(t), false
			}
			if f == rawMessageType {
				if st, ok := sectionTypes[key]; ok {
					return st, nil, true
				}
			}
			return f, nil, true
		})
	case reflect.Map:
		return s.mapping(n, p, path, func(string) (reflect.Type, []string, bool) { return t.Elem(), nil, true })
	case reflect.Slice:
		return s.sequence(n, p, t, path)
	case reflect.String:
		switch n.Type() {
		case ast.MappingType, ast.MappingValueType, ast.SequenceType:
			s.fault(p, path, "", "want text, found "+describe(n), "")
			return false
		}
		return true
	case reflect.Bool:
		if n.Type() != ast.BoolType {
			s.fault(p, path, scalarText(n), "want true or false, found "+describe(n), "")
			return false
		}
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return s.integer(n, p, t, path)
	case reflect.Float32, reflect.Float64:
		switch n.Type() {
		case ast.IntegerType, ast.FloatType:
			return true
		}
		s.fault(p, path, scalarText(n), "want a number, found "+describe(n), "")
		return false
	}
	return true
}

func (s *schema) duration(n ast.Node, p position, path string) bool {
	switch n.Type() {
	case ast.IntegerType, ast.FloatType:
		s.fault(p, path, scalarText(n), "a bare number is not a duration: it has no unit", "write "+durationHint)
		return false
	case ast.StringType:
		if _, err := time.ParseDuration(scalarText(n)); err != nil {
			s.fault(p, path, scalarText(n), "not a duration", "write "+durationHint)
			return false
		}
		return true
	}
	s.fault(p, path, "", "want a duration, found "+describe(n), "write "+durationHint)
	return false
}

func (s *schema) integer(n ast.Node, p position, t reflect.Type, path string) bool {
	in, ok := n.(*ast.IntegerNode)
	if !ok {
		s.fault(p, path, scalarText(n), "want a whole number, found "+describe(n), "")
		return false
	}
	v := reflect.New(t).Elem()
	var overflow bool
	switch x := in.Value.(type) {
	case int64:
		if v.CanInt() {
			overflow = v.OverflowInt(x)
		} else {
			overflow = x < 0 || v.OverflowUint(uint64(x))
		}
	case uint64:
		if v.CanInt() {
			overflow = x > uint64(1<<63-1) || v.OverflowInt(int64(x))
		} else {
			overflow = v.OverflowUint(x)
		}
	}
	if overflow {
		lo, hi := "0", ""
		if v.CanInt() {
			lo = strconv.FormatInt(-1<<(t.Bits()-1), 10)
			hi = strconv.FormatInt(1<<(t.Bits()-1)-1, 10)
		} else {
			hi = strconv.FormatUint(1<<t.Bits()-1, 10)
		}
		s.fault(p, path, scalarText(n), "out of range", fmt.Sprintf("a whole number from %s to %s", lo, hi))
		return false
	}
	return true
}

// mapping checks each key of a section; field says the type of a key's
// value, or that the key is unknown and which keys are known.
func (s *schema) mapping(n ast.Node, p position, path string, field func(key string) (reflect.Type, []string, bool)) bool {
	m, ok := n.(*ast.MappingNode)
	if !ok {
		s.fault(p, path, scalarText(n), "want a section (key: value pairs), found "+describe(n), "")
		return false
	}
	kept := m.Values[:0]
	for _, mv := range m.Values {
		if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
			kept = append(kept, mv)
			continue
		}
		key := scalarText(unwrap(mv.Key))
		sub := key
		if path != "" {
			sub = path + "." + key
		}
		t, known, ok := field(key)
		if !ok {
			hint, meant := suggest(key, known)
			s.fault(tokenPos(mv.Key.GetToken()), sub, "", "unknown key", hint)
			if meant != "" {
				// The key meant is missing for the same reason: one fault.
				s.faulted[strings.TrimSuffix(sub, key)+meant] = true
			}
			continue
		}
		before := s.repairs
		if s.walk(mv.Value, t, sub) {
			kept = append(kept, mv)
		}
		if s.repairs > before && sectionTypes[key] == t {
			s.sections[sub] = unwrap(mv.Value)
		}
	}
	m.Values = kept
	return true
}

func (s *schema) sequence(n ast.Node, p position, t reflect.Type, path string) bool {
	q, ok := n.(*ast.SequenceNode)
	if !ok {
		s.fault(p, path, scalarText(n), "want a list, found "+describe(n), "such as [a, b] or one \"- a\" line per item")
		return false
	}
	for i, e := range q.Values {
		if fixed := s.flowScalar(e); fixed != nil {
			q.Values[i] = fixed
			if i < len(q.Entries) {
				q.Entries[i].Value = fixed
			}
			e = fixed
		}
		if !s.walk(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i)) {
			// Keep the list's indexes: the item decodes as its zero value.
			null := ast.Null(&token.Token{Type: token.NullType, Value: "null", Origin: "null", Position: e.GetToken().Position})
			q.Values[i] = null
			if i < len(q.Entries) {
				q.Entries[i].Value = null
			}
		}
	}
	return true
}

// flowScalar repairs an item of a flow list such as [a:9092] that the YAML
// parser read as the one-key section {a: 9092}. In YAML a colon is a key's
// end only when a blank follows it, so a:9092 is one plain scalar; the
// parser gets that wrong inside a flow section. It returns the item as a
// string node taken from the source text, or nil when e is not such an item.
func (s *schema) flowScalar(e ast.Node) ast.Node {
	m, ok := e.(*ast.MappingNode)
	if !ok || m.IsFlowStyle || len(m.Values) != 1 {
		return nil
	}
	mv := m.Values[0]
	colon, val := mv.Start, mv.Value.GetToken()
	key := mv.Key.GetToken()
	if colon == nil || val == nil || key == nil || colon.Position == nil || val.Position == nil || key.Position == nil {
		return nil
	}
	if val.Position.Line != colon.Position.Line || val.Position.Column != colon.Position.Column+1 {
		return nil
	}
	line := key.Position.Line - 1
	if line < 0 || line >= len(s.lines) {
		return nil
	}
	runes := []rune(s.lines[line])
	start := key.Position.Column - 1
	if start < 0 || start >= len(runes) {
		return nil
	}
	text := string(runes[start:])
	if i := strings.IndexAny(text, ",]}"); i >= 0 {
		text = text[:i]
	}
	text = strings.TrimSpace(text)
	s.repairs++
	return ast.String(&token.Token{
		Type:          token.DoubleQuoteType,
		CharacterType: token.CharacterTypeMiscellaneous,
		Indicator:     token.QuotedScalarIndicator,
		Value:         text,
		Origin:        strconv.Quote(text),
		Position:      key.Position,
	})
}

// fieldByKey returns the type of the struct field that YAML key names.
func fieldByKey(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if yamlName(f) == key {
			return f.Type, true
		}
	}
	return nil, false
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" {
		return strings.ToLower(f.Name)
	}
	return name
}

func keysOf(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && yamlName(f) != "-" {
			keys = append(keys, yamlName(f))
		}
	}
	sort.Strings(keys)
	return keys
}

// suggest names the known key closest to a misspelt one, or lists them all.
// It returns the hint and the key it suggests, if any.
func suggest(key string, known []string) (string, string) {
	best, bestDist := "", -1
	for _, k := range known {
		d := editDistance(strings.ToLower(key), k)
		if bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" && bestDist <= max(2, len(key)/3) {
		return "did you mean `" + best + "`?", best
	}
	return "known keys here: " + strings.Join(known, ", "), ""
}

// editDistance is the Levenshtein distance of two strings, with the swap
// of two neighbours counted as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// decodeSection decodes a device section strictly into v, a pointer to the
// section's configuration type, with the repair of flow lists that the
// file's own walk makes.
func decodeSection(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	file, err := parser.ParseBytes(data, 0)
	if err != nil {
		return &FieldError{Problem: firstLine(err.Error())}
	}
	if len(file.Docs) == 0 || file.Docs[0].Body == nil {
		return nil
	}
	body := file.Docs[0].Body
	s := newSchema(data)
	s.walk(body, reflect.TypeOf(v).Elem(), "")
	if len(s.problems) > 0 {
		p := s.problems[0]
		return &FieldError{Field: p.Field, Value: p.Value, Problem: p.Problem, Hint: p.Hint}
	}
	if err := yaml.NodeToValue(body, v, yaml.Strict()); err != nil {
		return &FieldError{Problem: firstLine(err.Error())}
	}
	return nil
}

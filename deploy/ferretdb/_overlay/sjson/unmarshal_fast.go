// Added to FerretDB's internal/handler/sjson package at build time (see
// deploy/ferretdb/patches.json, "overlays"); the original Unmarshal is renamed
// unmarshalSlow by a patch.

package sjson

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/FerretDB/FerretDB/internal/types"
)

// Unmarshal decodes the top-level document.
//
// Every stored document is decoded on every read and on every update (which
// rewrites it whole), so this is the store's hottest code. The original decodes
// the text several times over: into a map of raw messages, then each value again
// through a new json.Decoder, nested values once more per level, and the schema
// field by reflection. unmarshalFast reads the text once, guided by the schema,
// and parses each distinct schema text only once (cached).
//
// It accepts only the form Marshal writes: "$s" first, then the fields in the
// schema's key order, keys without escapes, compact or not. Anything else (and
// any error) goes to the original decoder, which gives the same document or
// the same error as before.
func Unmarshal(data []byte) (*types.Document, error) {
	if d, ok := unmarshalFast(data); ok {
		return d, nil
	}

	return unmarshalSlow(data)
}

// schemaCacheMax bounds the parsed schemas kept: a collection's documents
// share a few schema texts; documents of arbitrary shapes only refill it.
const schemaCacheMax = 4096

var schemaCache = struct {
	sync.RWMutex
	m map[string]*schema
}{m: make(map[string]*schema)}

func cachedSchema(text []byte) (*schema, bool) {
	schemaCache.RLock()
	s, ok := schemaCache.m[string(text)]
	schemaCache.RUnlock()

	if ok {
		return s, true
	}

	s, ok = parseSchemaText(text)
	if !ok {
		return nil, false
	}

	schemaCache.Lock()
	if len(schemaCache.m) >= schemaCacheMax {
		clear(schemaCache.m)
	}
	schemaCache.m[string(text)] = s
	schemaCache.Unlock()

	return s, true
}

// parseSchemaText parses a schema as the original does (unknown fields refused).
func parseSchemaText(text []byte) (*schema, bool) {
	var s schema

	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()

	if err := dec.Decode(&s); err != nil || dec.InputOffset() != int64(len(text)) || !uniqueKeys(&s) {
		return nil, false
	}

	return &s, true
}

// uniqueKeys reports whether no schema, at any depth, lists a key twice (the
// original refuses such a document by its count of keys; unmarshalFast leaves it to it).
func uniqueKeys(s *schema) bool {
	if s == nil {
		return true
	}

	seen := make(map[string]struct{}, len(s.Keys))

	for _, k := range s.Keys {
		if _, dup := seen[k]; dup {
			return false
		}

		seen[k] = struct{}{}
	}

	for _, e := range s.Properties {
		if !uniqueElemKeys(e) {
			return false
		}
	}

	return true
}

func uniqueElemKeys(e *elem) bool {
	if e == nil {
		return true
	}

	if !uniqueKeys(e.Schema) {
		return false
	}

	for _, it := range e.Items {
		if !uniqueElemKeys(it) {
			return false
		}
	}

	return true
}

type fastReader struct {
	b []byte
	i int
}

func (r *fastReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// consume skips whitespace and then c; false when c is not next.
func (r *fastReader) consume(c byte) bool {
	r.ws()

	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}

	return false
}

func (r *fastReader) peek() byte {
	r.ws()

	if r.i < len(r.b) {
		return r.b[r.i]
	}

	return 0
}

// rawString returns the bytes between the quotes of a string without escapes.
func (r *fastReader) rawString() ([]byte, bool) {
	if !r.consume('"') {
		return nil, false
	}

	start := r.i

	for r.i < len(r.b) {
		c := r.b[r.i]

		switch {
		case c == '"':
			s := r.b[start:r.i]
			r.i++

			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		}

		r.i++
	}

	return nil, false
}

// skipString moves past a JSON string (escapes allowed) and returns its text with the quotes.
func (r *fastReader) skipString() ([]byte, bool) {
	r.ws()

	start := r.i

	end, ok := SkipString(r.b, r.i)
	if end > r.i {
		r.i = end
	}

	if !ok {
		return nil, false
	}

	return r.b[start:end], true
}

// SkipString returns the index just past the JSON string whose opening quote is at b[i] (escapes allowed), and
// false when there is no string there (the index unchanged) or it does not end (the index at the end).
func SkipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}

	start := i
	i++

	// The string ends at the first quote after an even number of backslashes.
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b), false
		}

		q := i + j
		i = q + 1

		n := 0
		for k := q - 1; k > start && b[k] == '\\'; k-- {
			n++
		}

		if n%2 == 0 {
			return i, true
		}
	}
}

// stringValue decodes a JSON string. Strings without escapes are copied;
// strings with the escapes Marshal writes are unescaped here (see
// escapedString); control characters, invalid UTF-8, lone surrogates and
// anything else unusual go through encoding/json for its exact behaviour.
func (r *fastReader) stringValue() (string, bool) {
	save := r.i

	if s, ok := r.rawString(); ok && utf8.Valid(s) {
		return string(s), true
	}

	r.i = save

	if s, ok := r.escapedString(); ok {
		return s, true
	}

	r.i = save

	quoted, ok := r.skipString()
	if !ok {
		return "", false
	}

	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return "", false
	}

	return s, true
}

// escapedString decodes a JSON string with escapes: stored JSON texts (a
// feed entry's payload, a webhook body) are full of \" and \n, and
// encoding/json validates and unquotes such a string in two passes with a
// state machine per byte. It refuses (and encoding/json decides) a control
// character, invalid UTF-8, an unknown escape and a \u escape that is a lone
// or invalid surrogate, the cases where encoding/json substitutes or fails.
func (r *fastReader) escapedString() (string, bool) {
	if !r.consume('"') {
		return "", false
	}

	buf := make([]byte, 0, 64)
	start := r.i

	for r.i < len(r.b) {
		c := r.b[r.i]

		switch {
		case c == '"':
			buf = append(buf, r.b[start:r.i]...)
			r.i++

			if !utf8.Valid(buf) {
				return "", false
			}

			return string(buf), true
		case c == '\\':
			buf = append(buf, r.b[start:r.i]...)

			if r.i+1 >= len(r.b) {
				return "", false
			}

			e := r.b[r.i+1]
			r.i += 2

			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				cp, ok := r.hex4()
				if !ok {
					return "", false
				}

				if utf16.IsSurrogate(cp) {
					if r.i+2 > len(r.b) || r.b[r.i] != '\\' || r.b[r.i+1] != 'u' {
						return "", false
					}

					r.i += 2

					low, ok := r.hex4()
					if !ok {
						return "", false
					}

					cp = utf16.DecodeRune(cp, low)
					if cp == utf8.RuneError {
						return "", false
					}
				}

				buf = utf8.AppendRune(buf, cp)
			default:
				return "", false
			}

			start = r.i
		case c < 0x20:
			return "", false
		default:
			r.i++
		}
	}

	return "", false
}

// hex4 reads the four hex digits of a \u escape.
func (r *fastReader) hex4() (rune, bool) {
	if r.i+4 > len(r.b) {
		return 0, false
	}

	var cp rune

	for _, c := range r.b[r.i : r.i+4] {
		switch {
		case c >= '0' && c <= '9':
			cp = cp<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			cp = cp<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			cp = cp<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}

	r.i += 4

	return cp, true
}

// number returns the text of a JSON number.
func (r *fastReader) number() ([]byte, bool) {
	r.ws()
	start := r.i

	for r.i < len(r.b) {
		c := r.b[r.i]
		if (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			r.i++
			continue
		}

		break
	}

	n := r.b[start:r.i]

	return n, validNumber(n)
}

// validNumber reports whether n is a JSON number (RFC 8259): what strconv also
// accepts but JSON does not ("+1", "01", ".5", "1.") is left to encoding/json.
func validNumber(n []byte) bool {
	i := 0
	if i < len(n) && n[i] == '-' {
		i++
	}

	switch {
	case i < len(n) && n[i] == '0':
		i++
	case i < len(n) && n[i] >= '1' && n[i] <= '9':
		for i < len(n) && n[i] >= '0' && n[i] <= '9' {
			i++
		}
	default:
		return false
	}

	if i < len(n) && n[i] == '.' {
		i++
		if i >= len(n) || n[i] < '0' || n[i] > '9' {
			return false
		}

		for i < len(n) && n[i] >= '0' && n[i] <= '9' {
			i++
		}
	}

	if i < len(n) && (n[i] == 'e' || n[i] == 'E') {
		i++
		if i < len(n) && (n[i] == '+' || n[i] == '-') {
			i++
		}

		if i >= len(n) || n[i] < '0' || n[i] > '9' {
			return false
		}

		for i < len(n) && n[i] >= '0' && n[i] <= '9' {
			i++
		}
	}

	return i == len(n)
}

func (r *fastReader) literal(word string) bool {
	r.ws()

	if bytes.HasPrefix(r.b[r.i:], []byte(word)) {
		r.i += len(word)
		return true
	}

	return false
}

// skipValue moves past any JSON value and returns its text.
func (r *fastReader) skipValue() ([]byte, bool) {
	r.ws()

	start := r.i
	end, ok := SkipValue(r.b, r.i)
	r.i = end

	if !ok {
		return nil, false
	}

	return r.b[start:end], true
}

// SkipValue returns the index just past the JSON value that starts at b[i]: a string, an object or an array with
// all they hold (white space inside them allowed), or any other token up to the next delimiter or white space.
func SkipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}

	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0

		for i < len(b) {
			switch b[i] {
			case '"':
				end, ok := SkipString(b, i)
				if !ok {
					return end, false
				}

				i = end

				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}

		return i, false
	default:
		start := i

		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, i > start
			}
			i++
		}

		return i, i > start
	}
}

func unmarshalFast(data []byte) (*types.Document, bool) {
	r := &fastReader{b: data}

	if !r.consume('{') {
		return nil, false
	}

	key, ok := r.rawString()
	if !ok || string(key) != "$s" || !r.consume(':') {
		return nil, false
	}

	text, ok := r.skipValue()
	if !ok {
		return nil, false
	}

	sch, ok := cachedSchema(text)
	if !ok {
		return nil, false
	}

	// The data's fields follow "$s", each after a comma.
	d, ok := r.fields(sch, true)
	if !ok {
		return nil, false
	}

	// Not even whitespace may follow, as in the original.
	return d, r.i == len(r.b)
}

// fields decodes a document's fields, in the schema's key order, and its
// closing brace; afterComma: the first field too follows a comma.
func (r *fastReader) fields(sch *schema, afterComma bool) (*types.Document, bool) {
	d := types.MakeDocument(len(sch.Keys))

	for i, k := range sch.Keys {
		if (afterComma || i > 0) && !r.consume(',') {
			return nil, false
		}

		key, ok := r.rawString()
		if !ok || string(key) != k || !r.consume(':') {
			return nil, false
		}

		v, ok := r.value(sch.Properties[k])
		if !ok {
			return nil, false
		}

		d.Set(k, v)
	}

	if !r.consume('}') {
		return nil, false
	}

	return d, true
}

// value decodes one value by its schema element, as unmarshalSingleValue does.
func (r *fastReader) value(sch *elem) (any, bool) {
	if r.peek() == 'n' {
		if r.literal("null") {
			return types.Null, true
		}

		return nil, false
	}

	if sch == nil {
		return nil, false
	}

	switch sch.Type {
	case elemTypeObject:
		if sch.Schema == nil {
			return nil, false
		}

		return r.document(sch.Schema)
	case elemTypeArray:
		if sch.Items == nil {
			return nil, false
		}

		return r.array(sch.Items)
	case elemTypeString:
		return r.stringValue()
	case elemTypeDouble:
		n, ok := r.number()
		if !ok {
			return nil, false
		}

		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return nil, false
		}

		return f, true
	case elemTypeBool:
		if r.literal("true") {
			return true, true
		}

		if r.literal("false") {
			return false, true
		}

		return nil, false
	case elemTypeDate:
		n, ok := r.integer(64)
		if !ok {
			return nil, false
		}

		return time.UnixMilli(n), true
	case elemTypeInt:
		n, ok := r.integer(32)
		if !ok {
			return nil, false
		}

		return int32(n), true
	case elemTypeLong:
		n, ok := r.integer(64)
		if !ok {
			return nil, false
		}

		return n, true
	default:
		// binData, objectId, regex, timestamp, null: rare here; decoded by the original code.
		text, ok := r.skipValue()
		if !ok {
			return nil, false
		}

		v, err := unmarshalSingleValue(text, sch)
		if err != nil {
			return nil, false
		}

		return v, true
	}
}

// integer parses a JSON integer as encoding/json does into an int of that size
// (no fraction, no exponent, no leading '+').
func (r *fastReader) integer(bits int) (int64, bool) {
	n, ok := r.number()
	if !ok {
		return 0, false
	}

	v, err := strconv.ParseInt(string(n), 10, bits)
	if err != nil {
		return 0, false
	}

	return v, true
}

func (r *fastReader) document(sch *schema) (*types.Document, bool) {
	if !r.consume('{') {
		return nil, false
	}

	if r.consume('}') {
		// An empty object is an empty document whatever its schema says, as in the original.
		return types.MakeDocument(0), true
	}

	if len(sch.Keys) == 0 {
		return nil, false
	}

	return r.fields(sch, false)
}

func (r *fastReader) array(items []*elem) (*types.Array, bool) {
	if !r.consume('[') {
		return nil, false
	}

	if r.consume(']') {
		if len(items) != 0 {
			return nil, false
		}

		return types.MakeArray(0), true
	}

	a := types.MakeArray(len(items))

	for i, it := range items {
		if i > 0 && !r.consume(',') {
			return nil, false
		}

		v, ok := r.value(it)
		if !ok {
			return nil, false
		}

		a.Append(v)
	}

	if !r.consume(']') {
		return nil, false
	}

	return a, true
}

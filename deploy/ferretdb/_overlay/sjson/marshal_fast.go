// Added to FerretDB's internal/handler/sjson package at build time (see
// deploy/ferretdb/patches.json, "overlays"); the original Marshal is renamed
// marshalSlow by a patch.

package sjson

import (
	"encoding/hex"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/FerretDB/FerretDB/internal/types"
)

// Marshal encodes given document fields and set its schema in the field $s.
//
// Every insert and every update (which rewrites the whole document) encodes
// it; the original builds each field's text through encoding/json by
// reflection, in a new buffer per value and per schema element.
// marshalFast writes the same bytes into one buffer: the same schema, the same
// escapes (strings with anything encoding/json escapes are still handed to it),
// the same number forms. Values of other types than it knows go to the
// original, which then also panics or fails as before.
func Marshal(d *types.Document) ([]byte, error) {
	if d == nil {
		panic("v is nil")
	}

	if b, ok := marshalFast(d); ok {
		return b, nil
	}

	return marshalSlow(d)
}

func marshalFast(d *types.Document) ([]byte, bool) {
	b := make([]byte, 0, 1024)
	b = append(b, `{"$s":`...)

	var ok bool
	if b, ok = appendSchema(b, d); !ok {
		return nil, false
	}

	keys := d.Keys()
	values := d.Values()

	for i, key := range keys {
		b = append(b, ',', '"')
		b = append(b, key...) // unescaped, as the original writes top-level keys
		b = append(b, '"', ':')

		if b, ok = appendValue(b, values[i]); !ok {
			return nil, false
		}
	}

	return append(b, '}'), true
}

// appendJSONString appends s as json.Marshal writes it (encoding/json's
// escapes: HTML-safe, short forms for \b \f \n \r \t, U+2028 and U+2029
// escaped, invalid UTF-8 as U+FFFD); TestMarshalFastMatchesOriginal holds
// it to the original byte for byte.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"

	b = append(b, '"')
	start := 0

	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}

			b = append(b, s[start:i]...)

			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}

			i++
			start = i

			continue
		}

		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i

			continue
		}

		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i

			continue
		}

		i += size
	}

	b = append(b, s[start:]...)

	return append(b, '"')
}

func appendSchema(b []byte, d *types.Document) ([]byte, bool) {
	keys := d.Keys()
	if len(keys) == 0 {
		return append(b, '{', '}'), true
	}

	b = append(b, `{"p":{`...)
	values := d.Values()

	var ok bool

	for i, key := range keys {
		if i > 0 {
			b = append(b, ',')
		}

		b = appendJSONString(b, key)
		b = append(b, ':')

		if b, ok = appendElem(b, values[i]); !ok {
			return nil, false
		}
	}

	b = append(b, `},"$k":[`...)

	for i, key := range keys {
		if i > 0 {
			b = append(b, ',')
		}

		b = appendJSONString(b, key)
	}

	return append(b, ']', '}'), true
}

func appendElem(b []byte, value any) ([]byte, bool) {
	var ok bool

	switch v := value.(type) {
	case *types.Document:
		b = append(b, `{"t":"object","$s":`...)
		if b, ok = appendSchema(b, v); !ok {
			return nil, false
		}

		return append(b, '}'), true
	case *types.Array:
		b = append(b, `{"t":"array","i":`...)
		if b, ok = appendArray(b, v, appendElem); !ok {
			return nil, false
		}

		return append(b, '}'), true
	case float64:
		return append(b, `{"t":"double"}`...), true
	case string:
		return append(b, `{"t":"string"}`...), true
	case types.ObjectID:
		return append(b, `{"t":"objectId"}`...), true
	case bool:
		return append(b, `{"t":"bool"}`...), true
	case time.Time:
		return append(b, `{"t":"date"}`...), true
	case types.NullType:
		return append(b, `{"t":"null"}`...), true
	case int32:
		return append(b, `{"t":"int"}`...), true
	case types.Timestamp:
		return append(b, `{"t":"timestamp"}`...), true
	case int64:
		return append(b, `{"t":"long"}`...), true
	case types.Binary, types.Regex:
		e, err := marshalElemForSingleValue(v)
		if err != nil {
			return nil, false
		}

		return append(b, e...), true
	default:
		return nil, false
	}
}

// appendArray appends a JSON array of what each element gives (its schema
// element or its value).
func appendArray(b []byte, a *types.Array, each func([]byte, any) ([]byte, bool)) ([]byte, bool) {
	b = append(b, '[')

	var ok bool

	for i := 0; i < a.Len(); i++ {
		if i > 0 {
			b = append(b, ',')
		}

		el, err := a.Get(i)
		if err != nil {
			return nil, false
		}

		if b, ok = each(b, el); !ok {
			return nil, false
		}
	}

	return append(b, ']'), true
}

func appendValue(b []byte, value any) ([]byte, bool) {
	var ok bool

	switch v := value.(type) {
	case *types.Document:
		b = append(b, '{')
		keys := v.Keys()
		values := v.Values()

		for i, key := range keys {
			if i > 0 {
				b = append(b, ',')
			}

			b = appendJSONString(b, key)
			b = append(b, ':')

			if b, ok = appendValue(b, values[i]); !ok {
				return nil, false
			}
		}

		return append(b, '}'), true
	case *types.Array:
		return appendArray(b, v, appendValue)
	case string:
		return appendJSONString(b, v), true
	case int32:
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case bool:
		return strconv.AppendBool(b, v), true
	case time.Time:
		return strconv.AppendInt(b, v.UnixMilli(), 10), true
	case types.NullType:
		return append(b, "null"...), true
	case types.ObjectID:
		b = append(b, '"')
		b = hex.AppendEncode(b, v[:])

		return append(b, '"'), true
	case types.Timestamp:
		return strconv.AppendUint(b, uint64(v), 10), true
	case types.Regex:
		return appendJSONString(b, v.Pattern), true
	case float64, types.Binary:
		// Number forms and base64 exactly as the original writes them.
		t, err := MarshalSingleValue(v)
		if err != nil {
			return nil, false
		}

		return append(b, t...), true
	default:
		return nil, false
	}
}

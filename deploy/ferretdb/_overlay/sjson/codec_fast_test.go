// Added to FerretDB's internal/handler/sjson package with unmarshal_fast.go and marshal_fast.go;
// run by deploy/test/integration/ferretdb-patches.test.ts through
// `go test` on the patched module, together with FerretDB's own sjson tests
// (which now go through the fast path).

package sjson

import (
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/internal/types"
)

var fastTestStrings = []string{
	"", "a", "plain text", "quote \" inside", `back\slash`, "tab\tnewline\n", "\x00\x01\x1f control",
	"é ü 日本語 🙂", "\u2028\u2029", "<html>&amp;</html>", "a|1732406400000|evt_1", "{\"json\":[1,2]}",
	"\xff\xfe invalid utf-8", strings.Repeat("x", 3000), "del \x7f", "\b\f form feed", "a&b<c>d", "\u2028 only",
	"😀 astral", "\xed\xa0\x80 surrogate bytes", "ends with \\",
}

func randomFastValue(rnd *rand.Rand, depth int) any {
	n := 12
	if depth > 3 {
		n = 9
	}

	switch rnd.Intn(n) {
	case 0:
		return fastTestStrings[rnd.Intn(len(fastTestStrings))]
	case 1:
		return []float64{0, math.Copysign(0, -1), 1.5, -2.25e-300, 1e300, 42, math.MaxFloat64}[rnd.Intn(7)]
	case 2:
		return []int32{0, -1, 1, math.MaxInt32, math.MinInt32}[rnd.Intn(5)]
	case 3:
		return []int64{0, -1, math.MaxInt64, math.MinInt64, 1732406400000}[rnd.Intn(5)]
	case 4:
		return rnd.Intn(2) == 0
	case 5:
		return time.UnixMilli(rnd.Int63n(4_000_000_000_000) - 1_000_000_000_000)
	case 6:
		return types.Null
	case 7:
		return types.ObjectID{byte(rnd.Intn(256)), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	case 8:
		return types.Binary{Subtype: types.BinaryGeneric, B: []byte{0, 1, 2, byte(rnd.Intn(256))}}
	case 9:
		return randomFastDocument(rnd, depth+1)
	case 10:
		a := types.MakeArray(0)
		for i := rnd.Intn(5); i > 0; i-- {
			a.Append(randomFastValue(rnd, depth+1))
		}

		return a
	default:
		if rnd.Intn(2) == 0 {
			return types.Regex{Pattern: "^a.*b$", Options: "i"}
		}

		return types.Timestamp(rnd.Uint64())
	}
}

func randomFastDocument(rnd *rand.Rand, depth int) *types.Document {
	d := types.MakeDocument(0)
	keys := []string{"_id", "teamId", "outbox", "events", "a", "b.c", "$weird", "é", "x y"}

	for i := rnd.Intn(7); i > 0; i-- {
		d.Set(keys[rnd.Intn(len(keys))]+string(rune('a'+rnd.Intn(3))), randomFastValue(rnd, depth))
	}

	return d
}

// TestUnmarshalFastMatchesOriginal: on everything Marshal writes, the fast path
// decodes (no fallback) to exactly what the original decoder gives.
func TestUnmarshalFastMatchesOriginal(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))

	for i := 0; i < 5000; i++ {
		doc := randomFastDocument(rnd, 0)

		data, err := Marshal(doc)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}

		want, err := unmarshalSlow(data)
		if err != nil {
			t.Fatalf("original decoder: %v\n%s", err, data)
		}

		got, ok := unmarshalFast(data)
		if !ok {
			t.Fatalf("fast path refused what Marshal wrote:\n%s", data)
		}

		if !reflect.DeepEqual(want, got) {
			t.Fatalf("fast path differs:\n%s\nwant %#v\ngot  %#v", data, want, got)
		}
	}
}

// TestUnmarshalFastNeverDisagrees: on altered texts, the fast path either
// refuses (and the original decides) or gives what the original gives.
func TestUnmarshalFastNeverDisagrees(t *testing.T) {
	rnd := rand.New(rand.NewSource(2))
	alphabet := []byte(`{}[],:"\ 0123456789-+.eEntrufals$`)
	accepted := 0

	for i := 0; i < 20000; i++ {
		data, err := Marshal(randomFastDocument(rnd, 0))
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}

		b := []byte(string(data))
		for j := rnd.Intn(3) + 1; j > 0; j-- {
			pos := rnd.Intn(len(b))

			switch rnd.Intn(3) {
			case 0:
				b[pos] = alphabet[rnd.Intn(len(alphabet))]
			case 1:
				b = append(b[:pos], b[pos+1:]...)
			default:
				b = append(b[:pos], append([]byte{alphabet[rnd.Intn(len(alphabet))]}, b[pos:]...)...)
			}

			if len(b) == 0 {
				break
			}
		}

		got, ok := unmarshalFast(b)
		if !ok {
			continue
		}

		accepted++

		want, err := unmarshalSlow(b)
		if err != nil {
			t.Fatalf("fast path accepted what the original refuses (%v):\n%s", err, b)
		}

		if !reflect.DeepEqual(want, got) {
			t.Fatalf("fast path differs:\n%s\nwant %#v\ngot  %#v", b, want, got)
		}
	}

	if accepted == 0 {
		t.Fatal("no altered text was accepted: the comparison never ran")
	}
}

// TestUnmarshalFastRefusesTheUnusual: forms Marshal never writes go to the
// original decoder, whose answer (document or error) stands.
func TestUnmarshalFastRefusesTheUnusual(t *testing.T) {
	for _, text := range []string{
		`{"a":1,"$s":{"p":{"a":{"t":"int"}},"$k":["a"]}}`,  // schema not first
		`{"$s":{"p":{"a":{"t":"int"}},"$k":["a"]},"a":1} `, // trailing space
		`{"$s":{"p":{"a":{"t":"int"}},"$k":["a","a"]},"a":1,"a":2}`,
		`{"$s":{"p":{"a":{"t":"int"}},"$k":["a"]},"a":01}`,
		`{"$s":{"p":{"a":{"t":"int"}},"$k":["a"]},"a":+1}`,
		`{"$s":{"p":{"a":{"t":"double"}},"$k":["a"]},"a":1e400}`,
		`{"$s":{"p":{"a":{"t":"object"}},"$k":["a"]},"a":{}}`, // object without its schema
		`{"$s":{"p":{"a":{"t":"string","x":1}},"$k":["a"]},"a":"s"}`,
		`{"$s":{"p":{"a\"b":{"t":"int"}},"$k":["a\"b"]},"a\"b":1}`,
	} {
		if d, ok := unmarshalFast([]byte(text)); ok {
			t.Errorf("fast path accepted %s as %#v", text, d)
		}
	}
}

// stringDocument is a stored document whose one field holds the JSON string literal lit.
func stringDocument(lit string) []byte {
	return []byte(`{"$s":{"p":{"a":{"t":"string"}},"$k":["a"]},"a":` + lit + `}`)
}

// TestStringEscapesMatchOriginal: a string with escapes decodes on the fast
// path exactly as encoding/json decodes it, or the fast path refuses it and
// the original decides (control characters, invalid UTF-8, lone surrogates).
func TestStringEscapesMatchOriginal(t *testing.T) {
	mustAccept := []string{
		`"a\"b"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9 \u00E9"`, `"\u0000"`, `"\ud83d\ude00 astral"`,
		`"{\"k\":\"v\",\"n\":[1,2],\"s\":\"line\nnext\"}"`, `"a\\\"b"`, `"\u2028\u2029"`, `"é \"日本\""`,
	}
	mayRefuse := []string{
		`"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`, `"\ud83dx"`, `"\u12"`, `"\u12zz"`, `"\x"`, "\"a\x01\\n\"",
		"\"\xff\\n\"", "\"\xc3\\u00a9\"", `"\`, `"\u`, `"a\"`, `"\\\"`, `"\uDBFF\uDFFF"`, `"\uDC00\uD800"`,
	}

	check := func(lit string) bool {
		doc := stringDocument(lit)
		got, ok := unmarshalFast(doc)
		want, err := unmarshalSlow(doc)

		if !ok {
			return false
		}

		if err != nil {
			t.Fatalf("fast path accepted what the original refuses (%v): %s", err, lit)
		}

		if !reflect.DeepEqual(want, got) {
			t.Fatalf("fast path differs on %s:\nwant %#v\ngot  %#v", lit, want, got)
		}

		return true
	}

	for _, lit := range mustAccept {
		if !check(lit) {
			t.Errorf("fast path refused %s", lit)
		}
	}

	for _, lit := range mayRefuse {
		check(lit)
	}

	// Random strings of escapes, hex digits, quotes, multi-byte and invalid bytes.
	rnd := rand.New(rand.NewSource(3))
	pieces := []string{
		`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u`, `\ud83d`, `\ude00`, `\u00e9`, `\uD800`, `\uFFFF`,
		`0`, `9`, `a`, `F`, `g`, `x`, `é`, `😀`, "\xff", "\x01", `\`, `"`, ` `,
	}
	accepted := 0

	for i := 0; i < 50000; i++ {
		var b strings.Builder

		b.WriteByte('"')

		for j := rnd.Intn(8); j > 0; j-- {
			b.WriteString(pieces[rnd.Intn(len(pieces))])
		}

		b.WriteByte('"')

		if check(b.String()) {
			accepted++
		}
	}

	if accepted < 1000 {
		t.Fatalf("the fast path accepted only %d random strings: the comparison hardly ran", accepted)
	}
}

// TestSkipStringFindsTheClosingQuote: skipping a string (a value the schema
// leaves to the original decoder, or the fallback's first pass) ends at the
// first quote after an even number of backslashes.
func TestSkipStringFindsTheClosingQuote(t *testing.T) {
	for lit, want := range map[string]string{
		`"a" rest`:      `"a"`,
		`"a\"b" rest`:   `"a\"b"`,
		`"a\\" rest`:    `"a\\"`,
		`"a\\\"b" rest`: `"a\\\"b"`,
		`"\\\\"x"`:      `"\\\\"`,
		`"" rest`:       `""`,
		`"no end\"`:     "",
		`"no end`:       "",
		`"ends on \`:    "",
	} {
		r := &fastReader{b: []byte(lit)}
		got, ok := r.skipString()

		if ok != (want != "") || string(got) != want {
			t.Errorf("skipString(%s) = %q, %v; want %q", lit, got, ok, want)
		}
	}
}

// A feed entry as analytics stores it: the payload is JSON text, so a string full of escapes.
func benchmarkFeedDocument() []byte {
	data := `{"id":"em_0123456789abcdefghij","status":"DELIVERED","to":["reader@inbox.example"],` +
		`"from":"Bench <bench@example.com>","subject":"bench event 1","occurredAt":"2026-11-25T06:00:00.000Z",` +
		`"domainId":"dom_0123456789","metadata":{"order":"A-1","note":"line one\nline two"}}`

	return orPanic(Marshal(orPanic(types.NewDocument(
		"_id", "team_0123|0001732406400000|evt_0123456789abcdef0123456789abcdef", "teamId", "team_0123",
		"domainId", "dom_0123456789", "status", "DELIVERED", "dataJson", data, "createdAt", time.UnixMilli(1732406400000),
	))))
}

func BenchmarkUnmarshalFeedDocument(b *testing.B) {
	benchmarkUnmarshal(b, benchmarkFeedDocument())
}

// benchmarkUnmarshal times the original decoder and the fast one on one stored document.
func benchmarkUnmarshal(b *testing.B, data []byte) {
	b.Run("original", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			orPanic(unmarshalSlow(data))
		}
	})

	b.Run("fast", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			orPanic(Unmarshal(data))
		}
	})
}

// An email document as the emails service stores it after DELIVERED, roughly.
func benchmarkEmailDocument() []byte {
	events := types.MakeArray(3)
	for _, s := range []string{"QUEUED", "SENT", "DELIVERED"} {
		events.Append(`{"id":"evt_0123456789abcdef","status":"` + s + `","data":{"to":["someone@example.com"]},"at":1732406400000}`)
	}

	outbox := types.MakeArray(1)
	outbox.Append(orPanic(types.NewDocument(
		"id", "evt_0123456789abcdef", "subject", "events.email.delivered", "type", "email.delivered",
		"json", strings.Repeat(`{"k":"v"},`, 60), "createdAt", time.UnixMilli(1732406400000),
	)))

	recipients := orPanic(types.NewDocument(
		"pending", types.MakeArray(0), "accepted", orPanic(types.NewArray("someone@example.com")),
		"bounced", types.MakeArray(0), "suppressed", types.MakeArray(0), "failed", types.MakeArray(0),
	))

	doc := orPanic(types.NewDocument(
		"_id", "em_0123456789abcdefghij", "teamId", "team_0123456789", "domainId", "dom_0123456789",
		"from", "Shop <news@shop.example>", "fromAddress", "news@shop.example",
		"to", orPanic(types.NewArray("someone@example.com")), "toAddresses", orPanic(types.NewArray("someone@example.com")),
		"cc", types.MakeArray(0), "bcc", types.MakeArray(0), "replyTo", types.MakeArray(0),
		"subject", "Our autumn news, é included", "hasAttachments", false, "messageId", "<em_0123@shop.example>",
		"references", types.MakeArray(0), "latestStatus", "DELIVERED", "events", events, "sendState", "DONE",
		"recipients", recipients, "attempts", int32(1), "suppressionCheckedAt", time.UnixMilli(1732406400000),
		"reportKeys", orPanic(types.NewArray("r1")), "trackingEventCount", int32(0), "version", int32(4),
		"createdAt", time.UnixMilli(1732406400000), "updatedAt", time.UnixMilli(1732406400000),
		"outbox", outbox, "campaignId", "cmp_0123", "contactId", "ct_0123",
	))

	return orPanic(Marshal(doc))
}

func orPanic[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}

	return v
}

func BenchmarkUnmarshalEmailDocument(b *testing.B) {
	benchmarkUnmarshal(b, benchmarkEmailDocument())
}

// TestMarshalFastMatchesOriginal: the one-buffer encoder writes exactly the
// original's bytes, escapes and number forms included.
func TestMarshalFastMatchesOriginal(t *testing.T) {
	rnd := rand.New(rand.NewSource(3))

	for i := 0; i < 5000; i++ {
		doc := randomFastDocument(rnd, 0)

		want, err := marshalSlow(doc)
		if err != nil {
			t.Fatalf("original encoder: %v", err)
		}

		got, ok := marshalFast(doc)
		if !ok {
			t.Fatalf("fast encoder refused %#v", doc)
		}

		if string(want) != string(got) {
			t.Fatalf("fast encoder differs:\nwant %s\ngot  %s", want, got)
		}
	}

	email := benchmarkEmailDocument()
	doc, err := Unmarshal(email)
	if err != nil {
		t.Fatal(err)
	}

	if got, ok := marshalFast(doc); !ok || string(got) != string(email) {
		t.Fatalf("an email document does not come back as it was:\nwant %s\ngot  %s", email, got)
	}
}

func BenchmarkMarshalEmailDocument(b *testing.B) {
	doc := orPanic(Unmarshal(benchmarkEmailDocument()))

	b.Run("original", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			orPanic(marshalSlow(doc))
		}
	})

	b.Run("fast", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			orPanic(Marshal(doc))
		}
	})
}

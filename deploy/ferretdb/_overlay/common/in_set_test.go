package common

import (
	"fmt"
	"testing"

	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/must"
)

// inFilter is {f: {$in: values}}.
func inFilter(values ...any) *types.Document {
	return must.NotFail(types.NewDocument("f", must.NotFail(types.NewDocument("$in", must.NotFail(types.NewArray(values...))))))
}

func inTestDocs() []*types.Document {
	return []*types.Document{
		must.NotFail(types.NewDocument("f", "a5")),
		must.NotFail(types.NewDocument("f", "a19")),
		must.NotFail(types.NewDocument("f", "A5")),
		must.NotFail(types.NewDocument("f", "a5 ")),
		must.NotFail(types.NewDocument("f", "zz")),
		must.NotFail(types.NewDocument("f", "é-a7")),
		must.NotFail(types.NewDocument("f", "")),
		must.NotFail(types.NewDocument("f", int32(5))),
		must.NotFail(types.NewDocument("f", types.Null)),
		must.NotFail(types.NewDocument("f", must.NotFail(types.NewArray("x", "a7")))),
		must.NotFail(types.NewDocument("f", must.NotFail(types.NewArray("x", "y")))),
		must.NotFail(types.NewDocument("f", must.NotFail(types.NewDocument("a", "a5")))),
		must.NotFail(types.NewDocument("g", "a5")),
		types.MakeDocument(0),
	}
}

// TestInSetMatchesComparisons holds the set lookup of a long $in list of strings to the comparison value by value:
// the same list with a regular expression that matches nothing added is never looked up through a set.
func TestInSetMatchesComparisons(t *testing.T) {
	var values []any
	for i := 0; i < 40; i++ {
		values = append(values, fmt.Sprintf("a%d", i))
	}
	values = append(values, "é-a7", "")
	byValue := append(append([]any{}, values...), types.Regex{Pattern: "^\x01never$"})

	fast, slow := inFilter(values...), inFilter(byValue...)
	if stringInSet(must.NotFail(must.NotFail(fast.Get("f")).(*types.Document).Get("$in")).(*types.Array)) == nil {
		t.Fatal("a long list of strings is not looked up through a set")
	}
	if stringInSet(must.NotFail(must.NotFail(slow.Get("f")).(*types.Document).Get("$in")).(*types.Array)) != nil {
		t.Fatal("a list with a regular expression is looked up through a set")
	}

	matched := 0
	for _, doc := range inTestDocs() {
		// Twice: the second time the set comes from the cache.
		for round := 0; round < 2; round++ {
			got, err := FilterDocument(doc, fast)
			if err != nil {
				t.Fatal(err)
			}
			want, err := FilterDocument(doc, slow)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%v: set lookup %v, comparisons %v", doc, got, want)
			}
			if got && round == 0 {
				matched++
			}
		}
	}
	// "a5", "a19", "é-a7", "" and the array holding "a7".
	if matched != 5 {
		t.Fatalf("%d documents matched, want 5", matched)
	}
}

// TestInSetKeepsListsApart evaluates more lists than the cache holds, each against the documents of the others.
func TestInSetKeepsListsApart(t *testing.T) {
	const lists = inSetCacheSize*2 + 3
	filters := make([]*types.Document, lists)
	for l := range filters {
		var values []any
		for i := 0; i < inSetMinLen+l; i++ {
			values = append(values, fmt.Sprintf("list%d-%d", l, i))
		}
		filters[l] = inFilter(values...)
	}
	for round := 0; round < 2; round++ {
		for l, filter := range filters {
			for other := 0; other < lists; other++ {
				doc := must.NotFail(types.NewDocument("f", fmt.Sprintf("list%d-%d", other, inSetMinLen-1)))
				got, err := FilterDocument(doc, filter)
				if err != nil {
					t.Fatal(err)
				}
				if got != (other == l) {
					t.Fatalf("list %d, document of list %d: matched %v", l, other, got)
				}
			}
		}
	}
}

// TestInSetLeavesOtherListsToComparisons: a short list, and a long one with a number in it, keep their results.
func TestInSetLeavesOtherListsToComparisons(t *testing.T) {
	short := inFilter("a", "b")
	var values []any
	for i := 0; i < 30; i++ {
		values = append(values, fmt.Sprintf("n%d", i))
	}
	mixed := inFilter(append(values, int32(5))...)

	for _, c := range []struct {
		doc    *types.Document
		filter *types.Document
		want   bool
	}{
		{must.NotFail(types.NewDocument("f", "b")), short, true},
		{must.NotFail(types.NewDocument("f", "c")), short, false},
		{must.NotFail(types.NewDocument("f", "n29")), mixed, true},
		{must.NotFail(types.NewDocument("f", int32(5))), mixed, true},
		{must.NotFail(types.NewDocument("f", float64(5))), mixed, true},
		{must.NotFail(types.NewDocument("f", "5")), mixed, false},
	} {
		got, err := FilterDocument(c.doc, c.filter)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Fatalf("%v in %v: %v, want %v", c.doc, c.filter, got, c.want)
		}
	}
}

// TestInSetDecidesTheFilter shows that the filter consults the set: a set planted for a list decides what matches.
func TestInSetDecidesTheFilter(t *testing.T) {
	var values []any
	for i := 0; i < inSetMinLen; i++ {
		values = append(values, fmt.Sprintf("v%d", i))
	}
	filter := inFilter(values...)
	arr := must.NotFail(must.NotFail(filter.Get("f")).(*types.Document).Get("$in")).(*types.Array)

	inSets.mu.Lock()
	slot := inSets.next
	inSets.entries[slot] = inSetEntry{arr: arr, set: map[string]struct{}{"planted": {}}}
	inSets.next = (slot + 1) % inSetCacheSize
	inSets.mu.Unlock()
	defer func() {
		inSets.mu.Lock()
		inSets.entries[slot] = inSetEntry{}
		inSets.mu.Unlock()
	}()

	for value, want := range map[string]bool{"planted": true, "v0": false} {
		got, err := FilterDocument(must.NotFail(types.NewDocument("f", value)), filter)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%q: matched %v, want %v", value, got, want)
		}
	}
}

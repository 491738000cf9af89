package common

import (
	"sync"

	"github.com/FerretDB/FerretDB/internal/types"
)

// inSetMinLen is the shortest $in list looked up through a set; a shorter one is compared value by value.
const inSetMinLen = 16

// inSetCacheSize is how many recent $in lists keep their set.
const inSetCacheSize = 32

type inSetEntry struct {
	arr *types.Array
	set map[string]struct{} // nil for a list that is not all strings
}

// inSets holds the sets of recent $in lists. An entry holds its list, so a
// list's address is never reused while it is cached.
var inSets struct {
	mu      sync.Mutex
	entries [inSetCacheSize]inSetEntry
	next    int
}

// stringInSet returns the values of an $in list of strings only, as a set,
// and nil for a short list or a list holding anything but strings (documents,
// regular expressions, numbers...), which keep the comparison value by value.
//
// A document's string matches such a list exactly when the set holds it: two
// strings compare equal only when they are the same bytes, and a string never
// equals a value of another type. The filter evaluates one $in list against
// every document of a scan, so the set is built once per list (and kept for
// the next documents), not once per document.
func stringInSet(arr *types.Array) map[string]struct{} {
	if arr.Len() < inSetMinLen {
		return nil
	}

	inSets.mu.Lock()
	for _, e := range inSets.entries {
		if e.arr == arr {
			inSets.mu.Unlock()
			return e.set
		}
	}
	inSets.mu.Unlock()

	set := make(map[string]struct{}, arr.Len())
	for i := 0; i < arr.Len(); i++ {
		v, err := arr.Get(i)
		s, ok := v.(string)
		if err != nil || !ok {
			set = nil
			break
		}
		set[s] = struct{}{}
	}

	inSets.mu.Lock()
	inSets.entries[inSets.next] = inSetEntry{arr: arr, set: set}
	inSets.next = (inSets.next + 1) % inSetCacheSize
	inSets.mu.Unlock()

	return set
}

package main

// Statistics per database, command and collection: how often, how long the
// command ran in FerretDB and how long it waited for its database's write
// lock. Written as JSON to the -stats file every few seconds and at exit, so
// a benchmark can show which queries the storage spends its time on.

import (
	"encoding/json"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/x/bsonx/bsoncore"
)

type commandStat struct {
	Key      string  `json:"key"`
	Count    int64   `json:"count"`
	TotalMs  float64 `json:"totalMs"`
	MaxMs    float64 `json:"maxMs"`
	LockWait float64 `json:"lockWaitMs"`
}

type commandStats struct {
	mu    sync.Mutex
	byKey map[string]*commandStat
	path  string
}

func newCommandStats(path string) *commandStats {
	if path == "" {
		return nil
	}
	return &commandStats{byKey: map[string]*commandStat{}, path: path}
}

func (s *commandStats) record(msg []byte, c command, wait, run time.Duration) {
	if s == nil {
		return
	}
	key := c.db + " " + c.name + " " + c.collection + " " + filterShape(msg, c)
	ms := float64(run.Microseconds()) / 1000
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.byKey[key]
	if !ok {
		st = &commandStat{Key: key}
		s.byKey[key] = st
	}
	st.Count++
	st.TotalMs += ms
	st.LockWait += float64(wait.Microseconds()) / 1000
	if ms > st.MaxMs {
		st.MaxMs = ms
	}
}

// write saves the statistics, the most expensive first.
func (s *commandStats) write() {
	if s == nil {
		return
	}
	s.mu.Lock()
	list := make([]commandStat, 0, len(s.byKey))
	for _, st := range s.byKey {
		list = append(list, *st)
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].TotalMs > list[j].TotalMs })
	data, err := json.MarshalIndent(list, "", " ")
	if err != nil {
		return
	}
	tmp := s.path + ".tmp"
	if os.WriteFile(tmp, data, 0o644) == nil {
		_ = os.Rename(tmp, s.path)
	}
}

func (s *commandStats) run(done <-chan struct{}) {
	if s == nil {
		return
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.write()
		case <-done:
			s.write()
			return
		}
	}
}

// filterShape names the top-level keys of a command's filter (of its first
// statement for update and delete), e.g. "{_id,teamId}": enough to tell a
// primary-key lookup from a scan without logging any value.
func filterShape(msg []byte, c command) string {
	if len(msg) < 21 {
		return ""
	}
	body, sequences := sections(msg)
	if body == nil {
		return ""
	}
	var filter bsoncore.Document
	lookup := func(d bsoncore.Document, key string) bsoncore.Document {
		if v, err := d.LookupErr(key); err == nil {
			if doc, ok := v.DocumentOK(); ok {
				return doc
			}
		}
		return nil
	}
	firstOf := func(key string) bsoncore.Document {
		if doc, ok := sequences[key]; ok {
			return doc
		}
		if v, err := body.LookupErr(key); err == nil {
			if arr, ok := v.ArrayOK(); ok {
				if vals, err := arr.Values(); err == nil && len(vals) > 0 {
					if doc, ok := vals[0].DocumentOK(); ok {
						return doc
					}
				}
			}
		}
		return nil
	}
	switch c.name {
	case "find", "count", "distinct":
		filter = lookup(body, "filter")
		if filter == nil {
			filter = lookup(body, "query")
		}
	case "findAndModify", "findandmodify":
		filter = lookup(body, "query")
	case "update":
		if st := firstOf("updates"); st != nil {
			filter = lookup(st, "q")
		}
	case "delete":
		if st := firstOf("deletes"); st != nil {
			filter = lookup(st, "q")
		}
	case "aggregate":
		if st := firstOf("pipeline"); st != nil {
			filter = lookup(st, "$match")
		}
	default:
		return ""
	}
	if filter == nil {
		return "{}"
	}
	elems, err := filter.Elements()
	if err != nil {
		return ""
	}
	keys := make([]string, 0, len(elems))
	for _, e := range elems {
		keys = append(keys, e.Key())
	}
	return "{" + strings.Join(keys, ",") + "}"
}

package metadata

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unsafe"

	sqlite "modernc.org/sqlite"

	"github.com/FerretDB/FerretDB/internal/handler/sjson"
	"github.com/FerretDB/FerretDB/internal/util/fsql"
	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
)

// idFunction is the SQL function that IDColumn, and the unique index on _id, are built on.
//
// It returns what _ferretdb_sjson->'_id' returns (the _id value's JSON text, or NULL), but it reads the
// stored text only as far as the end of the _id value, which Marshal writes right after the schema: SQLite's
// -> parses the whole document into its binary form first. An update computes the key twice per row (the
// new document's, and the old one's to move the index entry), an insert and a delete once.
const idFunction = "ferretdb_id"

func init() {
	sqlite.MustRegisterDeterministicScalarFunction(idFunction, 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		doc, ok := args[0].(string)
		if !ok {
			if args[0] == nil {
				return nil, nil
			}

			return nil, fmt.Errorf("%s: a document is text, not %T", idFunction, args[0])
		}

		id, found, err := idText(doc)
		if err != nil || !found {
			return nil, err
		}

		return id, nil
	})
}

// errMalformed is what idText returns for a text that is not JSON, as -> fails on it.
var errMalformed = errors.New(idFunction + ": malformed JSON")

// idText returns the JSON text of the document's top-level _id, as SQLite's -> renders it (without
// insignificant white space), and whether the document has one.
func idText(doc string) (string, bool, error) {
	const schema, id = `{"$s":`, `,"_id":`

	// What Marshal writes: the schema, then _id first (FerretDB moves it there before every write).
	if strings.HasPrefix(doc, schema) {
		if end, ok := skipValue(doc, len(schema)); ok && strings.HasPrefix(doc[end:], id) {
			start := end + len(id)
			if end, ok = skipValue(doc, start); ok && end < len(doc) && (doc[end] == ',' || doc[end] == '}') {
				return compact(doc[start:end]), true, nil
			}
		}
	}

	return idTextOfAny(doc)
}

// idTextOfAny looks for _id among all the top-level keys of any JSON text, white space and escaped keys
// included, as -> does: of two _id keys the first, none in a JSON value that is not an object, and an error
// for a text that is not JSON.
func idTextOfAny(doc string) (string, bool, error) {
	if !json.Valid([]byte(doc)) {
		return "", false, errMalformed
	}

	i := skipSpace(doc, 0)
	if doc[i] != '{' {
		return "", false, nil
	}

	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return "", false, nil
	}

	for i < len(doc) {
		keyEnd, ok := skipValue(doc, i)
		if !ok || doc[i] != '"' {
			return "", false, errMalformed
		}

		key := doc[i:keyEnd]

		i = skipSpace(doc, keyEnd)
		if i >= len(doc) || doc[i] != ':' {
			return "", false, errMalformed
		}

		start := skipSpace(doc, i+1)

		end, ok := skipValue(doc, start)
		if !ok {
			return "", false, errMalformed
		}

		if key == `"_id"` || (strings.IndexByte(key, '\\') >= 0 && unquote(key) == "_id") {
			return compact(doc[start:end]), true, nil
		}

		i = skipSpace(doc, end)
		if i >= len(doc) {
			return "", false, errMalformed
		}

		switch doc[i] {
		case ',':
			i = skipSpace(doc, i+1)
		case '}':
			return "", false, nil
		default:
			return "", false, errMalformed
		}
	}

	return "", false, errMalformed
}

// skipValue is sjson.SkipValue on the text's bytes, not copied.
func skipValue(s string, i int) (int, bool) {
	return sjson.SkipValue(unsafe.Slice(unsafe.StringData(s), len(s)), i)
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}

	return i
}

// compact drops the white space between the tokens of an object or array, as -> renders one.
func compact(v string) string {
	if (v[0] != '{' && v[0] != '[') || !strings.ContainsAny(v, " \t\n\r") {
		return v
	}

	var b bytes.Buffer
	if err := json.Compact(&b, []byte(v)); err != nil {
		return v
	}

	return b.String()
}

func unquote(key string) string {
	var s string
	if err := json.Unmarshal([]byte(key), &s); err != nil {
		return ""
	}

	return s
}

// isIDIndex reports whether the index is a unique one on _id alone (the default _id_ index): those are
// built on idFunction.
func isIDIndex(index IndexInfo) bool {
	return index.Unique && len(index.Key) == 1 && index.Key[0].Field == "_id" && !index.Key[0].Descending
}

// migrateIDIndexes rebuilds on idFunction, in one transaction, the _id indexes of the database's
// collections that an earlier build made on _ferretdb_sjson->"_id". Lookups by _id are written on
// idFunction, and SQLite uses an index only for the same expression, so such an index would no longer serve
// them.
func migrateIDIndexes(ctx context.Context, db *fsql.DB, colls map[string]*Collection, l *slog.Logger) error {
	type rebuild struct{ table, index string }

	var stale []rebuild

	for _, c := range colls {
		for _, index := range c.Settings.Indexes {
			if !isIDIndex(index) {
				continue
			}

			name := c.TableName + "_" + index.Name

			var def string
			err := db.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", name).Scan(&def)

			switch {
			case errors.Is(err, sql.ErrNoRows):
			case err != nil:
				return lazyerrors.Error(err)
			case strings.Contains(def, idFunction+"("):
				continue
			}

			stale = append(stale, rebuild{table: c.TableName, index: name})
		}
	}

	if len(stale) == 0 {
		return nil
	}

	err := db.InTransaction(ctx, func(tx *fsql.Tx) error {
		for _, r := range stale {
			if _, err := tx.ExecContext(ctx, fmt.Sprintf("DROP INDEX IF EXISTS %q", r.index)); err != nil {
				return lazyerrors.Error(err)
			}

			q := fmt.Sprintf("CREATE UNIQUE INDEX %q ON %q (%s)", r.index, r.table, IDColumn)
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return lazyerrors.Error(err)
			}
		}

		return nil
	})
	if err != nil {
		return err
	}

	l.InfoContext(ctx, "rebuilt the _id indexes on "+idFunction, slog.Int("indexes", len(stale)))

	return nil
}

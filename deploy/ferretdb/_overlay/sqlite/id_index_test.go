package metadata

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sqlite "modernc.org/sqlite"

	"github.com/FerretDB/FerretDB/internal/backends"
	"github.com/FerretDB/FerretDB/internal/handler/sjson"
	"github.com/FerretDB/FerretDB/internal/types"
	"github.com/FerretDB/FerretDB/internal/util/fsql"
	"github.com/FerretDB/FerretDB/internal/util/must"
	"github.com/FerretDB/FerretDB/internal/util/state"
	"github.com/FerretDB/FerretDB/internal/util/testutil"
)

// ferretdb_id must give what ->'_id' gives for every stored text, or an index built on one would not
// serve lookups written on the other; SQLite itself is the reference here.
func sameAsArrow(t *testing.T, db *sql.DB, doc string) {
	t.Helper()

	var fn, arrow sql.NullString

	errFn := db.QueryRow(`SELECT ferretdb_id(?)`, doc).Scan(&fn)
	errArrow := db.QueryRow(`SELECT ?->'_id'`, doc).Scan(&arrow)

	if errArrow != nil {
		require.Error(t, errFn, "-> refuses %q, ferretdb_id gave %v", doc, fn)
		return
	}

	require.NoError(t, errFn, doc)
	require.Equal(t, arrow, fn, doc)
}

func memoryDB(t *testing.T) *sql.DB {
	t.Helper()

	db, err := sql.Open("sqlite", "file:idfunc?mode=memory")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })

	return db
}

func TestIDFunctionMatchesArrowOnStoredDocuments(t *testing.T) {
	db := memoryDB(t)
	rnd := rand.New(rand.NewSource(7))

	strs := []string{"", "em_0001", `quote " and \ back`, "<html> & co", "é ü 漢字 🙂", "line\nbreak\ttab\x01", "\u2028\u2029", "}{][,:"}
	ids := []any{int32(0), int32(-7), int64(1) << 40, 1.5, -0.25, 1e300, true, false, types.Null,
		types.ObjectID{0x65, 0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x8, 0x9, 0xa, 0xb},
		time.UnixMilli(1795799689130).UTC(),
		must.NotFail(types.NewDocument("a", int32(1), "b", "z")),
		must.NotFail(types.NewDocument("nested", must.NotFail(types.NewDocument("x", "}\"{")), "list", must.NotFail(types.NewArray("a", int32(2))))),
	}
	for _, s := range strs {
		ids = append(ids, s)
	}

	for _, id := range ids {
		for i := 0; i < 20; i++ {
			d := must.NotFail(types.NewDocument("_id", id))

			for k := 0; k < rnd.Intn(6); k++ {
				var v any
				switch rnd.Intn(4) {
				case 0:
					v = strs[rnd.Intn(len(strs))]
				case 1:
					v = int64(rnd.Int63())
				case 2:
					v = must.NotFail(types.NewDocument("_id", strs[rnd.Intn(len(strs))], "n", rnd.Float64()))
				default:
					v = must.NotFail(types.NewArray(strs[rnd.Intn(len(strs))], int32(k)))
				}

				d.Set(fmt.Sprintf("f%d", k), v)
			}

			sameAsArrow(t, db, string(must.NotFail(sjson.Marshal(d))))
		}
	}
}

// A SQL function's text argument is read with the length SQLite reports (patches.json, modernc's functionArgs):
// every byte arrives, multibyte characters and long documents included, and nothing after the text.
func TestIDFunctionTextArgumentArrivesWhole(t *testing.T) {
	sqlite.MustRegisterDeterministicScalarFunction("ferretdb_test_echo", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		s, ok := args[0].(string)
		if !ok {
			return nil, fmt.Errorf("not text: %T", args[0])
		}

		return fmt.Sprintf("%d:%s", len(s), s), nil
	})

	db := memoryDB(t)
	long := strings.Repeat(`{"é ü 漢字 🙂":"\u0000 \" x"},`, 400)

	for _, text := range []string{"", "a", "é", "漢字🙂", long, long[:len(long)-1]} {
		var got string
		require.NoError(t, db.QueryRow(`SELECT ferretdb_test_echo(?)`, text).Scan(&got))
		require.Equal(t, fmt.Sprintf("%d:%s", len(text), text), got)
	}

	// Text SQLite made itself (substr), not bound by the caller.
	var got string
	require.NoError(t, db.QueryRow(`SELECT ferretdb_test_echo(substr(?, 2, 3))`, "x漢字🙂y").Scan(&got))
	require.Equal(t, "10:漢字🙂", got)
}

func TestIDFunctionMatchesArrowOnOtherTexts(t *testing.T) {
	db := memoryDB(t)

	for _, doc := range []string{
		`{"$s": {"p": {"_id": {"t": "int"}}, "$k": ["_id"]}, "_id": 42}`,
		`{ "_id" : { "a" : 1 , "b" : [ 1 , 2 ] } }`,
		`{"a":{"_id":1},"_id":2}`,
		`{"$s":{"p":{"x\"}":1}},"x":1,"_id":"late"}`,
		`{"$s":{},"_id":"a","_id":"b"}`,
		`{"_id":1,"_id":2}`,
		`{"\u005fid":"escaped key"}`,
		`{"$s":{"$k":[]}}`,
		`{}`,
		`{"_id":null}`,
		`{"_id":"unterminated}`,
		`{"$s":{"p":{}},"_id":}`,
		`[1,2]`,
		`not json`,
		`{"_id":-0,"x":1}`,
		`{"_id":1.50e+3}`,
	} {
		sameAsArrow(t, db, doc)
	}
}

func indexDef(t *testing.T, ctx context.Context, db *fsql.DB, name string) string {
	t.Helper()

	var def string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", name).Scan(&def))

	return def
}

func lookupPlan(t *testing.T, ctx context.Context, db *fsql.DB, table string) string {
	t.Helper()

	rows, err := db.QueryContext(ctx, fmt.Sprintf("EXPLAIN QUERY PLAN SELECT %s FROM %q WHERE %s = ?", DefaultColumn, table, IDColumn), `"t_1"`)
	require.NoError(t, err)

	defer rows.Close()

	var plan []string

	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &notUsed, &detail))
		plan = append(plan, detail)
	}

	require.NoError(t, rows.Err())

	return strings.Join(plan, "; ")
}

// A database an earlier build wrote has its _id index on _ferretdb_sjson->"_id"; opening it rebuilds that
// index on ferretdb_id, after which lookups by _id use it again and it still refuses a second document with
// the same _id.
func TestIDIndexRebuiltWhenOpened(t *testing.T) {
	ctx := testutil.Ctx(t)
	uri := testutil.TestSQLiteURI(t, "")

	sp, err := state.NewProvider("")
	require.NoError(t, err)

	r, err := NewRegistry(uri, 100, testutil.Logger(t), sp)
	require.NoError(t, err)

	db, err := r.DatabaseGetOrCreate(ctx, "migrate")
	require.NoError(t, err)

	_, err = r.CollectionCreate(ctx, &CollectionCreateParams{DBName: "migrate", Name: "things"})
	require.NoError(t, err)

	c := r.CollectionGet(ctx, "migrate", "things")
	index := c.TableName + "_" + backends.DefaultIndexName

	require.Contains(t, indexDef(t, ctx, db, index), "(ferretdb_id(_ferretdb_sjson))", "a new collection's _id index")
	require.Contains(t, lookupPlan(t, ctx, db, c.TableName), "USING INDEX")

	const n = 300
	for i := 0; i < n; i++ {
		doc := must.NotFail(types.NewDocument("_id", fmt.Sprintf("t_%d", i), "n", int32(i)))
		_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %q (%s) VALUES (?)", c.TableName, DefaultColumn), string(must.NotFail(sjson.Marshal(doc))))
		require.NoError(t, err)
	}

	// What the earlier build created (CollectionCreate's index on the key _id, quoted as it quotes keys).
	_, err = db.ExecContext(ctx, fmt.Sprintf("DROP INDEX %q", index))
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, fmt.Sprintf(`CREATE UNIQUE INDEX %q ON %q (%s->"_id")`, index, c.TableName, DefaultColumn))
	require.NoError(t, err)
	require.Contains(t, lookupPlan(t, ctx, db, c.TableName), "SCAN", "an index on -> does not serve lookups on ferretdb_id")

	r.Close()

	r, err = NewRegistry(uri, 100, testutil.Logger(t), sp)
	require.NoError(t, err)
	t.Cleanup(r.Close)

	db = r.DatabaseGetExisting(ctx, "migrate")
	require.NotNil(t, db)
	require.Equal(t, fmt.Sprintf(`CREATE UNIQUE INDEX %q ON %q (ferretdb_id(_ferretdb_sjson))`, index, c.TableName), indexDef(t, ctx, db, index))
	require.Contains(t, lookupPlan(t, ctx, db, c.TableName), "USING INDEX")

	for _, i := range []int{0, 1, n / 2, n - 1} {
		var n int
		q := fmt.Sprintf("SELECT %s->>'n' FROM %q WHERE %s = ?", DefaultColumn, c.TableName, IDColumn)
		require.NoError(t, db.QueryRowContext(ctx, q, fmt.Sprintf(`"t_%d"`, i)).Scan(&n))
		require.Equal(t, i, n)
	}

	dup := must.NotFail(types.NewDocument("_id", "t_7", "n", int32(-1)))
	_, err = db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %q (%s) VALUES (?)", c.TableName, DefaultColumn), string(must.NotFail(sjson.Marshal(dup))))
	require.ErrorContains(t, err, "UNIQUE constraint failed")
}

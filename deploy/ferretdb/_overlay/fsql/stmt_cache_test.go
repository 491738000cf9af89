package fsql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	_ "modernc.org/sqlite"
)

// The launcher's modernc.org/sqlite keeps the statements Exec runs prepared per connection
// (deploy/ferretdb/_overlay/modernc/stmt_cache.go); these run them again and again on one connection.
func openOne(t *testing.T) *sql.DB {
	t.Helper()

	db, err := sql.Open("sqlite", "file:stmtcache?mode=memory")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})

	if _, err = db.Exec("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}

	return db
}

func values(t *testing.T, db *sql.DB) map[string]sql.NullString {
	t.Helper()

	rows, err := db.Query("SELECT k, v FROM t")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()

	got := map[string]sql.NullString{}
	for rows.Next() {
		var k string
		var v sql.NullString
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		got[k] = v
	}

	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}

	return got
}

func TestStmtCacheReusesWithFreshBindings(t *testing.T) {
	db := openOne(t)

	for i := 0; i < 200; i++ {
		var v any = fmt.Sprintf("v%d", i)
		if i%3 == 0 {
			v = nil // NULL after a text: nothing of the previous binding may stay
		}
		res, err := db.Exec("INSERT INTO t VALUES (?, ?)", fmt.Sprintf("k%d", i), v)
		if err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("insert %d: %d rows affected", i, n)
		}
	}

	res, err := db.Exec("UPDATE t SET v = ? WHERE k = ?", "changed", "k7")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("update: %d rows affected", n)
	}

	got := values(t, db)
	if len(got) != 200 {
		t.Fatalf("%d rows, want 200", len(got))
	}
	for i := 0; i < 200; i++ {
		v := got[fmt.Sprintf("k%d", i)]
		want := sql.NullString{String: fmt.Sprintf("v%d", i), Valid: true}
		if i%3 == 0 {
			want = sql.NullString{}
		}
		if i == 7 {
			want = sql.NullString{String: "changed", Valid: true}
		}
		if v != want {
			t.Errorf("k%d = %+v, want %+v", i, v, want)
		}
	}
}

func TestStmtCacheAfterAnError(t *testing.T) {
	db := openOne(t)

	if _, err := db.Exec("INSERT INTO t VALUES (?, ?)", "a", "1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES (?, ?)", "a", "2"); err == nil {
		t.Fatal("a duplicate key was inserted")
	}
	if _, err := db.Exec("INSERT INTO t VALUES (?, ?)", "b", "3"); err != nil {
		t.Fatalf("the statement after a failed run: %v", err)
	}

	got := values(t, db)
	if len(got) != 2 || got["a"].String != "1" || got["b"].String != "3" {
		t.Fatalf("got %+v", got)
	}
}

func TestStmtCacheInTransactionsAndSavepoints(t *testing.T) {
	db := openOne(t)

	for i := 0; i < 3; i++ {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"SAVEPOINT sp", "INSERT INTO t VALUES ('kept" + fmt.Sprint(i) + "', 'x')", "RELEASE sp", "SAVEPOINT sp", "INSERT INTO t VALUES ('undone" + fmt.Sprint(i) + "', 'x')", "ROLLBACK TO sp", "RELEASE sp"} {
			if _, err := tx.Exec(q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if i == 1 {
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}

	got := values(t, db)
	if len(got) != 2 || got["kept0"].String != "x" || got["kept2"].String != "x" {
		t.Fatalf("got %+v", got)
	}
}

func TestStmtCacheManyTextsSchemaChangesAndSeveralStatements(t *testing.T) {
	db := openOne(t)

	// More distinct texts than a connection keeps: the rest run uncached.
	for i := 0; i < 150; i++ {
		if _, err := db.Exec(fmt.Sprintf("INSERT INTO t VALUES ('n%d', ?)", i), "x"); err != nil {
			t.Fatalf("text %d: %v", i, err)
		}
	}

	// A cached statement after the table changed, and after it was dropped and made again.
	if _, err := db.Exec("ALTER TABLE t ADD COLUMN w TEXT"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES ('n200', ?, NULL)", "y"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM t WHERE k = ?", "n0"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DROP TABLE t"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO t VALUES ('n1', ?)", "z"); err != nil {
		t.Fatal(err)
	}

	// Two statements in one text run both.
	if _, err := db.Exec("INSERT INTO t VALUES ('p', 'q'); INSERT INTO t VALUES ('r', 's')"); err != nil {
		t.Fatal(err)
	}

	got := values(t, db)
	if len(got) != 3 || got["n1"].String != "z" || got["p"].String != "q" || got["r"].String != "s" {
		t.Fatalf("got %+v", got)
	}
}

// withCancelled holds row a=1 and gives one connection of the database and a context cancelled already.
func withCancelled(t *testing.T) (*sql.DB, *sql.Conn, context.Context) {
	t.Helper()

	db := openOne(t)
	if _, err := db.Exec("INSERT INTO t VALUES (?, ?)", "a", "1"); err != nil {
		t.Fatal(err)
	}

	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	return db, conn, ctx
}

func TestStmtCacheCancelledContext(t *testing.T) {
	db, conn, ctx := withCancelled(t)

	if _, err := conn.ExecContext(ctx, "INSERT INTO t VALUES (?, ?)", "b", "2"); err == nil {
		t.Fatal("ran with a cancelled context")
	}
	if _, err := conn.ExecContext(context.Background(), "INSERT INTO t VALUES (?, ?)", "c", "3"); err != nil {
		t.Fatalf("after a cancelled run: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}

	got := values(t, db)
	if len(got) != 2 || got["c"].String != "3" {
		t.Fatalf("got %+v", got)
	}
}

// Queries run on a prepared statement the connection keeps as well; their rows reset it when they close.
func lookup(t *testing.T, q interface {
	Query(string, ...any) (*sql.Rows, error)
}, key string) (sql.NullString, bool) {
	t.Helper()

	rows, err := q.Query("SELECT v FROM t WHERE k = ?", key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()

	if !rows.Next() {
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return sql.NullString{}, false
	}

	var v sql.NullString
	if err := rows.Scan(&v); err != nil {
		t.Fatal(err)
	}
	if rows.Next() {
		t.Fatalf("%s: more than one row", key)
	}

	return v, true
}

func TestQueryCacheReusesWithFreshBindings(t *testing.T) {
	db := openOne(t)

	for i := 0; i < 50; i++ {
		var v any = fmt.Sprintf("v%d", i)
		if i%5 == 0 {
			v = nil
		}
		if _, err := db.Exec("INSERT INTO t VALUES (?, ?)", fmt.Sprintf("k%d", i), v); err != nil {
			t.Fatal(err)
		}
	}

	// Hits, NULLs and misses in turn on the one statement, twice over.
	for round := 0; round < 2; round++ {
		for i := 0; i < 60; i++ {
			v, found := lookup(t, db, fmt.Sprintf("k%d", i))
			switch {
			case i >= 50:
				if found {
					t.Fatalf("k%d: found %+v, want none", i, v)
				}
			case i%5 == 0:
				if !found || v.Valid {
					t.Fatalf("k%d: %+v (found %v), want NULL", i, v, found)
				}
			default:
				if !found || v.String != fmt.Sprintf("v%d", i) {
					t.Fatalf("k%d: %+v (found %v), want v%d", i, v, found, i)
				}
			}
		}
	}
}

func TestQueryCacheSameTextWhileItsRowsAreOpen(t *testing.T) {
	db := openOne(t)

	for _, k := range []string{"a", "b", "c"} {
		if _, err := db.Exec("INSERT INTO t VALUES (?, ?)", k, k+k); err != nil {
			t.Fatal(err)
		}
	}

	// One connection: the inner query of the same text runs while the outer one's rows hold the cached statement.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	outer, err := tx.Query("SELECT k FROM t ORDER BY k")
	if err != nil {
		t.Fatal(err)
	}

	var pairs []string
	for outer.Next() {
		// A statement reset under the outer rows would start them over, again and again.
		if len(pairs) == 3 {
			t.Fatalf("more than 3 rows: %v", pairs)
		}
		var k string
		if err := outer.Scan(&k); err != nil {
			t.Fatal(err)
		}

		inner, err := tx.Query("SELECT k FROM t ORDER BY k")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for inner.Next() {
			if n++; n > 3 {
				t.Fatalf("the inner query read more than 3 rows")
			}
		}
		if err := inner.Err(); err != nil {
			t.Fatal(err)
		}
		inner.Close()

		v, found := lookup(t, tx, k)
		if !found {
			t.Fatalf("%s: not found", k)
		}
		pairs = append(pairs, fmt.Sprintf("%s=%s/%d", k, v.String, n))
	}
	if err := outer.Err(); err != nil {
		t.Fatal(err)
	}
	outer.Close()

	if got := fmt.Sprint(pairs); got != "[a=aa/3 b=bb/3 c=cc/3]" {
		t.Fatalf("got %s", got)
	}
}

func TestQueryCacheRowsClosedEarlyStartOver(t *testing.T) {
	db := openOne(t)

	for _, k := range []string{"a", "b", "c"} {
		if _, err := db.Exec("INSERT INTO t VALUES (?, ?)", k, k); err != nil {
			t.Fatal(err)
		}
	}

	for i := 0; i < 3; i++ {
		rows, err := db.Query("SELECT k FROM t ORDER BY k")
		if err != nil {
			t.Fatal(err)
		}
		if !rows.Next() {
			t.Fatalf("round %d: no row", i)
		}
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		if k != "a" {
			t.Fatalf("round %d: first row %s, want a", i, k)
		}
		rows.Close()
	}
}

func TestQueryCacheErrorsSchemaChangesAndManyTexts(t *testing.T) {
	db := openOne(t)

	if _, err := db.Query("SELECT x FROM missing WHERE x = ?", 1); err == nil {
		t.Fatal("a query of a missing table ran")
	}
	if _, err := db.Exec("CREATE TABLE missing (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO missing VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	var x int
	if err := db.QueryRow("SELECT x FROM missing WHERE x = ?", 1).Scan(&x); err != nil || x != 1 {
		t.Fatalf("after the table was made: %d, %v", x, err)
	}

	if _, err := db.Exec("INSERT INTO t VALUES ('a', 'b')"); err != nil {
		t.Fatal(err)
	}

	// More distinct texts than a connection keeps, between two uses of one text.
	for i := 0; i < 150; i++ {
		var v string
		if err := db.QueryRow(fmt.Sprintf("SELECT v || '%d' FROM t WHERE k = ?", i), "a").Scan(&v); err != nil || v != fmt.Sprintf("b%d", i) {
			t.Fatalf("text %d: %q, %v", i, v, err)
		}
	}

	// A cached SELECT * after the table gained a column, and after it was dropped and made again.
	columns := func() []string {
		rows, err := db.Query("SELECT * FROM t")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		return cols
	}
	if got := fmt.Sprint(columns()); got != "[k v]" {
		t.Fatalf("columns %s", got)
	}
	if _, err := db.Exec("ALTER TABLE t ADD COLUMN w TEXT"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(columns()); got != "[k v w]" {
		t.Fatalf("columns after ALTER TABLE: %s", got)
	}
	if _, err := db.Exec("DROP TABLE t"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Query("SELECT * FROM t"); err == nil {
		t.Fatal("a query of a dropped table ran")
	}
	if _, err := db.Exec("CREATE TABLE t (k TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(columns()); got != "[k]" {
		t.Fatalf("columns after the table was made again: %s", got)
	}
}

func TestQueryCacheCancelledContext(t *testing.T) {
	_, conn, ctx := withCancelled(t)
	defer conn.Close()

	if _, err := conn.QueryContext(ctx, "SELECT v FROM t WHERE k = ?", "a"); err == nil {
		t.Fatal("ran with a cancelled context")
	}

	var v string
	if err := conn.QueryRowContext(context.Background(), "SELECT v FROM t WHERE k = ?", "a").Scan(&v); err != nil || v != "1" {
		t.Fatalf("after a cancelled run: %q, %v", v, err)
	}
}

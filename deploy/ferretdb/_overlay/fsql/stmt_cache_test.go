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

func TestStmtCacheCancelledContext(t *testing.T) {
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

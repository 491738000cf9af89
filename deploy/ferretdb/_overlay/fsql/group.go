package fsql

import (
	"context"
	"errors"

	"github.com/FerretDB/FerretDB/internal/util/lazyerrors"
)

// Group runs the statements of one write command in one SQLite transaction per database.
//
// FerretDB applies the statements of an update command one at a time, each as a read followed by
// a write in a transaction of its own that is committed (and its WAL frames synced) before the
// next statement starts. Within a group, the first statement that reaches a database after
// ActivateGroup begins a transaction there (BEGIN IMMEDIATE, through the _txlock URI parameter
// the launcher sets, so a read followed by a write never fails on a stale snapshot); every read,
// write and InTransaction of the command on that database goes through it, each InTransaction as a
// savepoint (atomic on its own, as before); and Commit ends them once. The reply is sent after the
// commit, so whatever a client is told was written is on disk, as before. A command that fails part
// way commits the statements before the failure, as the statement-by-statement commits did.
type Group struct {
	active bool
	done   bool
	failed error
	txs    []groupTx
	values map[string]any
}

type groupTx struct {
	db *DB
	tx *Tx
}

type groupKey struct{}

// WithGroup returns a context carrying a new, inactive group.
func WithGroup(ctx context.Context) (context.Context, *Group) {
	g := new(Group)
	return context.WithValue(ctx, groupKey{}, g), g
}

// ActivateGroup makes the statements that follow on ctx join its group (if it carries one);
// what ran before (creating the collection) kept its own transactions.
func ActivateGroup(ctx context.Context) {
	if g := groupOf(ctx); g != nil && !g.done {
		g.active = true
	}
}

// grouped returns the transaction of ctx's active group on db, beginning it on first use;
// nil when ctx carries no active group.
func (db *DB) grouped(ctx context.Context) (*Tx, error) {
	g := activeGroup(ctx)
	if g == nil {
		return nil, nil
	}

	if g.failed != nil {
		return nil, g.failed
	}

	for _, t := range g.txs {
		if t.db == db {
			return t.tx, nil
		}
	}

	// Not bound to ctx: Commit or Rollback ends it, never a cancellation racing with them.
	sqlTx, err := db.sqlDB.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return nil, lazyerrors.Error(err)
	}

	tx := wrapTx(sqlTx, db.l)
	g.txs = append(g.txs, groupTx{db: db, tx: tx})

	return tx, nil
}

// savepoint runs f as InTransaction would, inside the group's transaction: all of f or none of it.
func (tx *Tx) savepoint(ctx context.Context, f func(*Tx) error) error {
	if _, err := tx.sqlTx.ExecContext(ctx, "SAVEPOINT fsql_group"); err != nil {
		return lazyerrors.Error(err)
	}

	if err := f(tx); err != nil {
		bg := context.WithoutCancel(ctx)
		_, rerr := tx.sqlTx.ExecContext(bg, "ROLLBACK TO fsql_group")
		if rerr == nil {
			_, rerr = tx.sqlTx.ExecContext(bg, "RELEASE fsql_group")
		}

		if rerr != nil {
			// The transaction's state is unknown: nothing of the command may be committed.
			groupOf(ctx).failed = lazyerrors.Error(errors.Join(err, rerr))
		}

		return err
	}

	if _, err := tx.sqlTx.ExecContext(ctx, "RELEASE fsql_group"); err != nil {
		groupOf(ctx).failed = lazyerrors.Error(err)
		return lazyerrors.Error(err)
	}

	return nil
}

// GroupValue returns what SetGroupValue kept under key in ctx's active group.
func GroupValue(ctx context.Context, key string) (any, bool) {
	g := activeGroup(ctx)
	if g == nil {
		return nil, false
	}

	v, ok := g.values[key]

	return v, ok
}

// SetGroupValue keeps v under key for the rest of ctx's active group (nothing without one).
func SetGroupValue(ctx context.Context, key string, v any) {
	g := activeGroup(ctx)
	if g == nil {
		return
	}

	if g.values == nil {
		g.values = make(map[string]any)
	}

	g.values[key] = v
}

// activeGroup is ctx's group while its statements join it (activated, not yet ended); nil otherwise.
func activeGroup(ctx context.Context) *Group {
	if g := groupOf(ctx); g != nil && g.active && !g.done {
		return g
	}

	return nil
}

func groupOf(ctx context.Context) *Group {
	g, _ := ctx.Value(groupKey{}).(*Group)
	return g
}

// Commit commits what the group's statements wrote (rolls it back if a savepoint could not be
// undone); later statements on its context run on their own again.
func (g *Group) Commit() error {
	if g.done {
		return nil
	}

	g.done = true

	var errs []error

	for _, t := range g.txs {
		if g.failed != nil {
			_ = t.tx.Rollback()
			continue
		}

		if err := t.tx.Commit(); err != nil {
			errs = append(errs, err)
		}
	}

	if g.failed != nil {
		return g.failed
	}

	if len(errs) > 0 {
		return lazyerrors.Error(errors.Join(errs...))
	}

	return nil
}

// Rollback ends the group's transactions without committing them, unless Commit ended them first: deferred
// by the command, so that a panic part way never leaves a database locked by an open transaction.
func (g *Group) Rollback() {
	if g.done {
		return
	}

	g.done = true

	for _, t := range g.txs {
		_ = t.tx.Rollback()
	}
}

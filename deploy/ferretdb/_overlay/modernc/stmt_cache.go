package sqlite

import (
	"context"
	"database/sql/driver"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// maxCachedStmts bounds the statements one connection keeps prepared for execCached, and again the queries for queryCached.
const maxCachedStmts = 64

// prepareOne prepares query when it is a single statement; pstmt is 0 (and err nil) when it is not.
func (c *conn) prepareOne(query string) (pstmt uintptr, err error) {
	psql, err := libc.CString(query)
	if err != nil {
		return 0, err
	}
	defer c.free(psql)

	tail := psql
	if pstmt, err = c.prepareV2(&tail); err != nil {
		return 0, err
	}

	if pstmt != 0 && *(*byte)(unsafe.Pointer(tail)) != 0 {
		c.finalize(pstmt)
		return 0, nil
	}

	return pstmt, nil
}

// interruptible returns ctx's error when it is done already, else the function that stops interrupting this
// connection's statement when ctx ends (as the driver's own exec and query do while they step).
func (c *conn) interruptible(ctx context.Context, done *int32) (stop func(), err error) {
	if ctx == nil || ctx.Done() == nil {
		return func() {}, nil
	}

	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
	}

	return interruptOnDone(ctx, c, done), nil
}

// execCached runs a statement that returns no rows on a prepared statement this connection keeps
// (keyed by its SQL text) instead of preparing, running and finalizing it every time: with the
// writes of a busy server, preparing was 7 % of the process's CPU. After each use the statement is
// reset and its bindings cleared. ok is false when the SQL is not a single statement or the cache
// is full: the caller then runs it as before.
func (c *conn) execCached(ctx context.Context, query string, args []driver.NamedValue) (r driver.Result, err error, ok bool) {
	pstmt, found := c.stmtCache[query]
	if !found {
		if len(c.stmtCache) >= maxCachedStmts {
			return nil, nil, false
		}

		if pstmt, err = c.prepareOne(query); err != nil || pstmt == 0 {
			return nil, err, err != nil
		}

		if c.stmtCache == nil {
			c.stmtCache = make(map[string]uintptr)
		}
		c.stmtCache[query] = pstmt
	}

	var done int32
	stop, err := c.interruptible(ctx, &done)
	if err != nil {
		return nil, err, true
	}
	defer stop()

	r, err = func() (driver.Result, error) {
		n, err := c.bindParameterCount(pstmt)
		if err != nil {
			return nil, err
		}

		if n != 0 {
			allocs, err := c.bind(pstmt, n, args)
			if len(allocs) != 0 {
				defer func() {
					for _, v := range allocs {
						c.free(v)
					}
				}()
			}
			if err != nil {
				return nil, err
			}
		}

		rc, err := c.step(pstmt)
		if err != nil {
			return nil, err
		}

		switch rc & 0xff {
		case sqlite3.SQLITE_DONE, sqlite3.SQLITE_ROW:
			return newResult(c)
		default:
			return nil, c.errstr(int32(rc))
		}
	}()

	// Ready for the next use; a failed step's error is already in err.
	sqlite3.Xsqlite3_reset(c.tls, pstmt)
	sqlite3.Xsqlite3_clear_bindings(c.tls, pstmt)

	if ctx != nil && atomic.LoadInt32(&done) != 0 {
		return nil, ctx.Err(), true
	}

	return r, err, true
}

// cachedQuery is a prepared SELECT that queryCached keeps; busy while rows read from it.
type cachedQuery struct {
	pstmt uintptr
	busy  bool
}

// queryCached runs a query on a prepared statement this connection keeps (keyed by its SQL text), as
// execCached does for statements without rows: a read of one document by _id prepared its SELECT
// every time, 4 % of the launcher's CPU in a campaign's profile. The rows it returns reset the
// statement when they close instead of finalizing it. ok is false when the statement is being read
// already (a query within the rows of the same text) or the SQL is not a single statement: the
// caller then prepares it afresh. A full cache makes room by finalizing a statement not in use.
func (c *conn) queryCached(ctx context.Context, query string, args []driver.NamedValue) (r driver.Rows, err error, ok bool) {
	q, found := c.queryCache[query]
	if found && q.busy {
		return nil, nil, false
	}

	if !found {
		if len(c.queryCache) >= maxCachedStmts {
			for text, idle := range c.queryCache {
				if !idle.busy {
					c.finalize(idle.pstmt)
					delete(c.queryCache, text)
					break
				}
			}
			if len(c.queryCache) >= maxCachedStmts {
				return nil, nil, false
			}
		}

		pstmt, err := c.prepareOne(query)
		if err != nil || pstmt == 0 {
			return nil, err, err != nil
		}

		if c.queryCache == nil {
			c.queryCache = make(map[string]*cachedQuery)
		}
		q = &cachedQuery{pstmt: pstmt}
		c.queryCache[query] = q
	}

	var done int32
	stop, err := c.interruptible(ctx, &done)
	if err != nil {
		return nil, err, true
	}
	defer stop()

	// From here the rows own the statement: closing them (on any failure below too) makes it ready again.
	q.busy = true
	res := &rows{c: c, pstmt: q.pstmt, cached: q}

	fail := func(err error) (driver.Rows, error, bool) {
		res.Close()
		return nil, err, true
	}

	n, err := c.bindParameterCount(q.pstmt)
	if err != nil {
		return fail(err)
	}

	if n != 0 {
		res.allocs, err = c.bind(q.pstmt, n, args)
		if err != nil {
			return fail(err)
		}
	}

	rc, err := c.step(q.pstmt)
	if err != nil {
		return fail(err)
	}

	switch rc & 0xff {
	case sqlite3.SQLITE_ROW:
	case sqlite3.SQLITE_DONE:
		res.empty = true
	default:
		return fail(c.errstr(int32(rc)))
	}

	if ctx != nil && atomic.LoadInt32(&done) != 0 {
		return fail(ctx.Err())
	}

	cols, err := c.columnCount(q.pstmt)
	if err != nil {
		return fail(err)
	}

	res.columns = make([]string, cols)
	for i := range res.columns {
		if res.columns[i], err = c.columnName(q.pstmt, i); err != nil {
			return fail(err)
		}
	}

	return res, nil, true
}

// closeCached makes a cached query's statement ready for its next use; the rows no longer hold it.
func (r *rows) closeCached() {
	sqlite3.Xsqlite3_reset(r.c.tls, r.pstmt)
	sqlite3.Xsqlite3_clear_bindings(r.c.tls, r.pstmt)

	for _, v := range r.allocs {
		r.c.free(v)
	}

	r.allocs = nil
	r.cached.busy = false
	r.cached = nil
	r.pstmt = 0
}

// finalizeCached finalizes the statements execCached and queryCached kept, before the connection closes.
func (c *conn) finalizeCached() {
	for query, pstmt := range c.stmtCache {
		c.finalize(pstmt)
		delete(c.stmtCache, query)
	}

	for query, q := range c.queryCache {
		c.finalize(q.pstmt)
		delete(c.queryCache, query)
	}
}

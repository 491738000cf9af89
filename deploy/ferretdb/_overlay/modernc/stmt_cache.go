package sqlite

import (
	"context"
	"database/sql/driver"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// maxCachedStmts bounds the statements one connection keeps prepared for execCached.
const maxCachedStmts = 64

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

		psql, err := libc.CString(query)
		if err != nil {
			return nil, err, true
		}
		defer c.free(psql)

		tail := psql
		if pstmt, err = c.prepareV2(&tail); err != nil {
			return nil, err, true
		}

		if pstmt == 0 || *(*byte)(unsafe.Pointer(tail)) != 0 {
			if pstmt != 0 {
				c.finalize(pstmt)
			}

			return nil, nil, false
		}

		if c.stmtCache == nil {
			c.stmtCache = make(map[string]uintptr)
		}
		c.stmtCache[query] = pstmt
	}

	var done int32
	if ctx != nil {
		if ctxDone := ctx.Done(); ctxDone != nil {
			select {
			case <-ctxDone:
				return nil, ctx.Err(), true
			default:
			}
			defer interruptOnDone(ctx, c, &done)()
		}
	}

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

// finalizeCached finalizes the statements execCached kept, before the connection closes.
func (c *conn) finalizeCached() {
	for query, pstmt := range c.stmtCache {
		c.finalize(pstmt)
		delete(c.stmtCache, query)
	}
}

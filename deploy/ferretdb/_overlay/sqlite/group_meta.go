package sqlite

import (
	"context"

	"github.com/FerretDB/FerretDB/internal/backends/sqlite/metadata"
	"github.com/FerretDB/FerretDB/internal/util/fsql"
)

// collectionMeta is the registry's CollectionGet, looked up once per grouped command (fsql.Group).
//
// A grouped command's first lookup happens in its first statement's Query, before the group's
// transaction holds the database; later statements use what it found. The registry's lock is then
// never wanted while the transaction holds the database, so DDL (which holds that lock while it waits
// for the database) cannot deadlock with the command. The table cannot go away meanwhile: dropping it
// waits for the command's commit.
func (c *collection) collectionMeta(ctx context.Context) *metadata.Collection {
	if v, ok := fsql.GroupValue(ctx, c.groupMetaKey()); ok {
		return v.(*metadata.Collection)
	}

	meta := c.r.CollectionGet(ctx, c.dbName, c.name)
	if meta != nil {
		fsql.SetGroupValue(ctx, c.groupMetaKey(), meta)
	}

	return meta
}

// collectionCreate is the registry's CollectionCreate, skipped within a grouped command that has
// seen the collection already (see collectionMeta): CollectionCreate takes the registry's lock.
func (c *collection) collectionCreate(ctx context.Context) (bool, error) {
	if _, ok := fsql.GroupValue(ctx, c.groupMetaKey()); ok {
		return false, nil
	}

	return c.r.CollectionCreate(ctx, &metadata.CollectionCreateParams{DBName: c.dbName, Name: c.name})
}

// groupMetaKey is where collectionMeta keeps the collection's metadata in a group.
func (c *collection) groupMetaKey() string {
	return "collection\x00" + c.dbName + "\x00" + c.name
}

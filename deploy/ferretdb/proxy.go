package main

// FerretDB v1 applies an update as a read, a change in memory and a write
// back, without a lock around the three. Two concurrent writes to one
// document therefore lose one another's changes (measured here: 12 concurrent
// $inc on one counter left 3; a $pull racing a $set+$push dropped the pushed
// element). MongoDB makes every single-document write atomic, and mailfleet
// relies on that (counters, the outbox). This proxy restores the guarantee
// for the embedded server: it sits in front of FerretDB and lets one write
// command per database run at a time. Reads pass through concurrently.
//
// One per database, not one per collection: a database is one SQLite file,
// and SQLite lets one transaction at a time write to a file. A second writer
// let through would only wait inside SQLite, in its busy handler, which polls
// the lock with sleeps of 1, 2, 5, 10, 15, 20 and then 25 ms and so often
// sleeps on well after the lock is free. Queued here, the next write starts
// the moment the one before it ends.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/x/bsonx/bsoncore"
)

const (
	opMsg          = 2013
	maxMessage     = 48 * 1024 * 1024
	flagMoreToCome = 1 << 1
)

// readCommands never change data; everything else is serialised per database.
var readCommands = map[string]bool{
	"find": true, "getMore": true, "aggregate": true, "count": true, "distinct": true,
	"listCollections": true, "listIndexes": true, "listDatabases": true, "hello": true,
	"isMaster": true, "ismaster": true, "ping": true, "buildInfo": true, "buildinfo": true,
	"getParameter": true, "saslStart": true, "saslContinue": true, "endSessions": true,
	"killCursors": true, "dbStats": true, "collStats": true, "serverStatus": true,
	"connectionStatus": true, "getLog": true, "hostInfo": true, "whatsmyuri": true,
	"getCmdLineOpts": true, "explain": true, "dataSize": true, "validate": true,
}

// Document writes are queued on their database's write lock (see above); a
// command that may touch several collections or change the database itself
// (dropDatabase, renameCollection, anything not understood) holds it too.
type writeLocks struct {
	mu    sync.Mutex
	perDB map[string]*sync.Mutex
}

// acquire takes the write lock of command c's database and returns the function that releases it.
func (w *writeLocks) acquire(c command) func() {
	w.mu.Lock()
	l, ok := w.perDB[c.db]
	if !ok {
		l = &sync.Mutex{}
		w.perDB[c.db] = l
	}
	w.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func readMessage(r io.Reader) ([]byte, error) {
	var header [4]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return nil, err
	}
	length := int(binary.LittleEndian.Uint32(header[:]))
	if length < 16 || length > maxMessage {
		return nil, fmt.Errorf("bad message length %d", length)
	}
	msg := make([]byte, length)
	copy(msg, header[:])
	if _, err := io.ReadFull(r, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// command is what the proxy learns of a request: enough to serialise writes
// and to keep statistics per database, command and collection.
type command struct {
	db, name, collection string
	write, moreToCome    bool
}

func describe(msg []byte) (c command) {
	if binary.LittleEndian.Uint32(msg[12:16]) != opMsg || len(msg) < 21 {
		return c
	}
	c.moreToCome = binary.LittleEndian.Uint32(msg[16:20])&flagMoreToCome != 0
	body, _ := sections(msg)
	if body == nil {
		return c
	}
	elems, err := body.Elements()
	if err != nil || len(elems) == 0 {
		return c
	}
	c.name = elems[0].Key()
	if s, ok := elems[0].Value().StringValueOK(); ok {
		c.collection = s
	}
	if v, err := body.LookupErr("$db"); err == nil {
		if s, ok := v.StringValueOK(); ok {
			c.db = s
		}
	}
	c.write = c.db != "" && !readCommands[c.name]
	return c
}

// sections splits an OP_MSG into its body (kind 0) and the first document of
// each document sequence (kind 1: int32 size, identifier, documents), by
// identifier. A malformed message yields what could be read before the fault.
func sections(msg []byte) (body bsoncore.Document, firsts map[string]bsoncore.Document) {
	firsts = map[string]bsoncore.Document{}
	pos := 20
	for pos < len(msg) {
		kind := msg[pos]
		pos++
		if kind == 0 {
			doc, _, ok := bsoncore.ReadDocument(msg[pos:])
			if !ok {
				return body, firsts
			}
			body = doc
			pos += len(doc)
			continue
		}
		if pos+4 > len(msg) {
			return body, firsts
		}
		size := int(binary.LittleEndian.Uint32(msg[pos : pos+4]))
		if size < 5 || pos+size > len(msg) {
			return body, firsts
		}
		section := msg[pos+4 : pos+size]
		if end := bytes.IndexByte(section, 0); end > 0 {
			if first, _, ok := bsoncore.ReadDocument(section[end+1:]); ok {
				firsts[string(section[:end])] = first
			}
		}
		pos += size
	}
	return body, firsts
}

func serveProxy(listen net.Listener, backend string, logger *slog.Logger, stats *commandStats) {
	locks := &writeLocks{perDB: map[string]*sync.Mutex{}}
	for {
		client, err := listen.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			logger.Warn("accept failed", "err", err)
			continue
		}
		go proxyConn(client, backend, locks, logger, stats)
	}
}

func proxyConn(client net.Conn, backend string, locks *writeLocks, logger *slog.Logger, stats *commandStats) {
	defer client.Close()
	server, err := net.Dial("tcp", backend)
	if err != nil {
		logger.Warn("backend dial failed", "err", err)
		return
	}
	defer server.Close()
	for {
		req, err := readMessage(client)
		if err != nil {
			return
		}
		c := describe(req)
		queued := time.Now()
		release := func() {}
		if c.write {
			release = locks.acquire(c)
		}
		started := time.Now()
		err = roundTrip(client, server, req, c.moreToCome)
		release()
		stats.record(req, c, started.Sub(queued), time.Since(started))
		if err != nil {
			return
		}
	}
}

// roundTrip forwards one request and relays its replies (several while the
// server sets moreToCome, none when the client did).
func roundTrip(client, server net.Conn, req []byte, clientMoreToCome bool) error {
	if _, err := server.Write(req); err != nil {
		return err
	}
	if clientMoreToCome {
		return nil
	}
	for {
		reply, err := readMessage(server)
		if err != nil {
			return err
		}
		if _, err := client.Write(reply); err != nil {
			return err
		}
		if binary.LittleEndian.Uint32(reply[12:16]) != opMsg || len(reply) < 20 ||
			binary.LittleEndian.Uint32(reply[16:20])&flagMoreToCome == 0 {
			return nil
		}
	}
}

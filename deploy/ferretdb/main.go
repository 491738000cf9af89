// Command ferretdb-launcher runs FerretDB v1 with SQLite storage through its
// embeddable package. `go install .../cmd/ferretdb` panics at start without the
// release files under build/version, which the embeddable package does not need.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	// FerretDB spends much of its CPU decoding and encoding documents, and the
	// garbage it leaves is collected at Go's default GOGC=100 about every
	// doubling of a small heap. At 400, a mixed insert/update/find load on
	// 2 cores ran about 30 % more operations per second (660 -> 820) for
	// some 15 MB more memory. GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address to listen on")
	dataDir := flag.String("data", ".data/ferretdb", "directory for SQLite files")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error")
	statsPath := flag.String("stats", os.Getenv("MAILFLEET_FERRETDB_STATS"), "file for per-command statistics (JSON, rewritten every 5 s); none when empty")
	cpuProfile := flag.String("cpu-profile", os.Getenv("MAILFLEET_FERRETDB_CPUPROFILE"), "file for a Go CPU profile of the whole run (go tool pprof); none when empty")
	flag.Parse()

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "bad -log-level: %v\n", err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	abs, err := filepath.Abs(*dataDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "data dir: %v\n", err)
		os.Exit(1)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "data dir: %v\n", err)
		os.Exit(1)
	}

	// FerretDB itself listens on a private loopback port; the proxy (see
	// proxy.go) owns the public address and serialises writes per database.
	public, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "listen %s: %v\n", *listen, err)
		os.Exit(1)
	}
	backendAddr, err := freeLoopbackAddr()
	if err != nil {
		fmt.Fprintf(os.Stderr, "backend port: %v\n", err)
		os.Exit(1)
	}

	// BEGIN IMMEDIATE: the statements of an update command read, then write, in one transaction
	// (_overlay/fsql/group.go); a deferred one would fail on a stale snapshot when another collection
	// of the database was written in between, and busy_timeout does not retry that.
	// temp_store=memory: every statement inside those transactions keeps a statement journal (to undo
	// just that statement). With temp files allowed, SQLite gives each journal one 64 KiB first chunk,
	// which modernc's allocator serves with an mmap and a munmap per statement; in memory it grows by
	// 1 KiB chunks from the allocator's pools. Statement journals are never read after a crash (the
	// WAL is the durable log), and temp tables and sorts are small here (FerretDB sorts in Go).
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: backendAddr},
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/?_txlock=immediate&_pragma=temp_store(memory)",
		Logger:    logger,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "ferretdb: %v\n", err)
		os.Exit(1)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx)
	}()
	// Wait until FerretDB accepts connections before announcing readiness.
	for i := 0; ; i++ {
		c, err := net.DialTimeout("tcp", backendAddr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if i > 200 {
			fmt.Fprintf(os.Stderr, "ferretdb did not start listening on %s\n", backendAddr)
			os.Exit(1)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if *cpuProfile != "" {
		out, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(out)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "cpu profile: %v\n", err)
			os.Exit(1)
		}
		// Written when the server stops (SIGTERM or Ctrl-C), after FerretDB returned.
		defer func() {
			pprof.StopCPUProfile()
			_ = out.Close()
		}()
	}
	stats := newCommandStats(*statsPath)
	go stats.run(done)
	go serveProxy(public, backendAddr, logger, stats)
	// Printed once both listeners are bound so a parent process can wait for it.
	fmt.Fprintf(os.Stdout, "ferretdb listening on mongodb://%s/\n", public.Addr().String())
	<-done
	_ = public.Close()
}

// freeLoopbackAddr picks a free loopback port for FerretDB's own listener.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

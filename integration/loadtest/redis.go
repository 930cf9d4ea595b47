package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-proxy/mcp-proxy/internal/testproc"
)

// Bounds of starting the store scenarios' redis-server.
const (
	// redisStartWait bounds how long redis-server may take to answer PING.
	redisStartWait = 20 * time.Second
	// redisPoll is how often a starting redis-server is asked.
	redisPoll = 20 * time.Millisecond
)

// storeKey is the proxy's store.encryption_key in the store scenarios:
// 32 bytes, base64, given through the environment as a deployment would.
const storeKey = "bG9hZHRlc3Qtc3RvcmUta2V5LW9mLTMyLWJ5dGVzISE="

// redisServer is the store scenarios' redis-server: on a free loopback
// port, in its own temp directory, with the durability the docs recommend
// (the append-only file, fsynced on every write).
type redisServer struct {
	proc   *proc
	addr   string
	client *redis.Client
}

// startRedis starts bin (redis-server) under f, in a new directory below
// dir, and waits until it answers.
func startRedis(ctx context.Context, f *fleet, bin, dir string) (*redisServer, error) {
	rdir, err := os.MkdirTemp(dir, "redis-")
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	port, err := testproc.FreePort()
	if err != nil {
		return nil, err
	}
	conf := strings.Join([]string{
		"bind " + loopback,
		"port " + strconv.Itoa(port),
		"dir " + rdir,
		`save ""`,
		"appendonly yes",
		"appendfsync always",
		"protected-mode yes",
		"daemonize no",
		`logfile ""`,
	}, "\n") + "\n"
	confPath := filepath.Join(rdir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	p, err := f.start(procSpec{name: "redis-server", path: bin, args: []string{confPath}})
	if err != nil {
		return nil, err
	}
	r := &redisServer{proc: p, addr: net.JoinHostPort(loopback, strconv.Itoa(port))}
	r.client = redis.NewClient(&redis.Options{Addr: r.addr, MaxRetries: -1})
	wctx, cancel := context.WithTimeout(ctx, redisStartWait)
	defer cancel()
	for {
		if r.client.Ping(wctx).Err() == nil {
			return r, nil
		}
		select {
		case <-p.done:
			return nil, errors.Join(fmt.Errorf("redis-server exited: %v; stderr: %s", p.waitErr, p.stderr.tail()), r.client.Close())
		case <-wctx.Done():
			return nil, errors.Join(fmt.Errorf("redis-server did not answer PING within %s", redisStartWait), r.close())
		case <-time.After(redisPoll):
		}
	}
}

// url is the server's address for the proxy's store.url.
func (r *redisServer) url() string { return "redis://" + r.addr + "/0" }

// close stops the server and its client.
func (r *redisServer) close() error {
	return errors.Join(r.client.Close(), r.proc.stop())
}

// keys lists the keys that start with prefix.
func (r *redisServer) keys(ctx context.Context, prefix string) (map[string]bool, error) {
	out := map[string]bool{}
	iter := r.client.Scan(ctx, 0, prefix+"*", 100).Iterator()
	for iter.Next(ctx) {
		out[iter.Val()] = true
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("redis scan: %w", err)
	}
	return out, nil
}

// memoryUsage is the sum of MEMORY USAGE of keys (every value sampled).
func (r *redisServer) memoryUsage(ctx context.Context, keys []string) (int64, error) {
	var sum int64
	for _, k := range keys {
		n, err := r.client.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			return 0, fmt.Errorf("redis memory usage: %w", err)
		}
		sum += n
	}
	return sum, nil
}

package policy

import (
	"bytes"
	"sync"
)

// ParseCache remembers the parsed form of the policy files a long-lived
// process (the daemon) loads again and again, keyed by the file's path and
// its exact bytes: Load still reads every file on every call (as the
// caller, with the caller's permissions), and parses it only when those
// bytes differ from the ones parsed last time. A changed file therefore
// takes effect on the very next Load, whatever its timestamps say, and no
// lock of a managed file can be served from an older version of it. What
// is cached is the parse (TOML and key positions, two thirds of a file's
// cost, 0.05-0.1 ms each); the schema checks and the merge under the locks
// run on every Load. The zero value is not usable: NewParseCache.
type ParseCache struct {
	mu      sync.Mutex
	entries map[string]parsedFile
}

type parsedFile struct {
	data []byte
	doc  *doc // never written after parseTOML returns it
}

// Bounds on what a ParseCache holds: files larger than parseCacheMaxFile
// are parsed every time, and a cache that reaches parseCacheMaxEntries is
// emptied (a daemon serves a handful of policy files: managed, one per
// user, one per workspace).
const (
	parseCacheMaxFile    = 256 << 10
	parseCacheMaxEntries = 256
)

// NewParseCache returns an empty cache.
func NewParseCache() *ParseCache {
	return &ParseCache{entries: map[string]parsedFile{}}
}

// parse returns the parse of data, read from path; a nil c parses.
func (c *ParseCache) parse(path string, data []byte) (*doc, error) {
	if c == nil || len(data) > parseCacheMaxFile {
		return parseTOML(path, data)
	}
	c.mu.Lock()
	e, ok := c.entries[path]
	c.mu.Unlock()
	if ok && bytes.Equal(e.data, data) {
		return e.doc, nil
	}
	d, err := parseTOML(path, data)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.entries) >= parseCacheMaxEntries {
		clear(c.entries)
	}
	c.entries[path] = parsedFile{data: bytes.Clone(data), doc: d}
	c.mu.Unlock()
	return d, nil
}

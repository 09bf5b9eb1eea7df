package treescan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cacheMagic starts every cache file; its last byte is the format's
// version, changed whenever dirRecord's meaning or encoding changes.
const cacheMagic = "oxsupervise-treescan\x00\x03"

// cacheUsable says why dir cannot hold caches ("" when it can): it must be
// a real directory of the effective uid that nobody else may write.
func cacheUsable(dir, root string) string {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Sprintf("cache directory %s: %v", dir, err)
	}
	if !fi.IsDir() || !ownedByMe(fi) {
		return fmt.Sprintf("cache directory %s is not a directory of uid %d that only it may write", dir, fileUID())
	}
	return ""
}

// cacheFile names the cache of (root, its identity, key) for this euid.
func cacheFile(dir, root string, id dirID, key string) string {
	h := sha256.New()
	for _, s := range []string{root, strconv.FormatUint(id.dev, 10), strconv.FormatUint(id.ino, 10), strconv.Itoa(fileUID()), key} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return filepath.Join(dir, hex.EncodeToString(h.Sum(nil)[:16])+".scan")
}

// loadCache returns the remembered directories, or nil when there is no
// usable cache (missing, another version, key or number of questions, not
// ours, corrupt).
func loadCache(path, key string, questions int) *remembered {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !ownedByMe(fi) {
		return nil
	}
	raw := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, raw); err != nil {
		return nil
	}
	r, err := decodeCache(raw, key, questions)
	if err != nil {
		return nil
	}
	return r
}

// saveCache replaces the cache atomically.
func saveCache(path, key string, questions int, dirs []dirRecord) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".scan-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(encodeCache(key, questions, dirs)); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// The encoding: cacheMagic, then varint-prefixed key, the number of
// questions, of directories and of kept entries in all, and per directory (in lexical order of
// its path) the path, dev, ino, ctime, entry count and kept entries, each
// a name, a type and one verdict byte per question. It is read on every
// start, so it is a flat byte format decoded in one pass with a handful
// of allocations, not gob.

func encodeCache(key string, questions int, dirs []dirRecord) []byte {
	dirs = slices.Clone(dirs)
	slices.SortFunc(dirs, func(a, b dirRecord) int { return strings.Compare(a.Rel, b.Rel) })
	b := []byte(cacheMagic)
	b = appendString(b, key)
	b = binary.AppendUvarint(b, uint64(questions))
	b = binary.AppendUvarint(b, uint64(len(dirs)))
	total := 0
	for _, d := range dirs {
		total += len(d.Entries)
	}
	b = binary.AppendUvarint(b, uint64(total))
	for _, d := range dirs {
		b = appendString(b, d.Rel)
		b = binary.AppendUvarint(b, d.Dev)
		b = binary.AppendUvarint(b, d.Ino)
		b = binary.AppendVarint(b, d.Ctime)
		b = binary.AppendUvarint(b, uint64(d.Count))
		b = binary.AppendUvarint(b, uint64(len(d.Entries)))
		for _, e := range d.Entries {
			b = appendString(b, e.Name)
			b = binary.AppendUvarint(b, uint64(e.Type))
			for _, v := range e.Verdicts {
				b = append(b, byte(v))
			}
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

var errCorrupt = errors.New("treescan: corrupt cache")

// decoder reads the encoding from s (the file as one string, so that the
// names decoded are substrings of it, not allocations); the first error
// sticks.
type decoder struct {
	s   string
	err error
}

func (d *decoder) uvarint() uint64 {
	var v uint64
	for shift := uint(0); d.err == nil; shift += 7 {
		if len(d.s) == 0 || shift > 63 {
			d.err = errCorrupt
			break
		}
		c := d.s[0]
		d.s = d.s[1:]
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	return 0
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// count is a length that must fit in what is left (each counted item
// takes at least min bytes).
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.s)/min) {
		d.err = errCorrupt
		return 0
	}
	return int(n)
}

func (d *decoder) take(n int) string {
	if d.err != nil {
		return ""
	}
	if n > len(d.s) {
		d.err = errCorrupt
		return ""
	}
	out := d.s[:n]
	d.s = d.s[n:]
	return out
}

func (d *decoder) string() string { return d.take(d.count(1)) }

func decodeCache(raw []byte, key string, questions int) (*remembered, error) {
	d := &decoder{s: string(raw)}
	if d.take(len(cacheMagic)) != cacheMagic || d.string() != key || d.uvarint() != uint64(questions) || d.err != nil {
		return nil, errCorrupt
	}
	n := d.count(6)
	total := d.count(2 + questions)
	r := &remembered{dirs: make([]dirRecord, n), now: make([]lookup, n)}
	// One array holds the entries of all directories, one their verdicts.
	entries := make([]recEntry, 0, total)
	verdicts := make([]Verdict, 0, total*questions)
	for i := range r.dirs {
		rec := &r.dirs[i]
		rec.Rel = d.string()
		rec.Dev, rec.Ino, rec.Ctime, rec.Count = d.uvarint(), d.uvarint(), d.varint(), int(d.uvarint())
		m := d.count(2 + questions)
		if m > cap(entries)-len(entries) {
			return nil, errCorrupt
		}
		if m > 0 {
			rec.Entries = entries[len(entries) : len(entries)+m : len(entries)+m]
			entries = entries[:len(entries)+m]
		}
		for j := range rec.Entries {
			e := &rec.Entries[j]
			e.Name, e.Type = d.string(), fs.FileMode(d.uvarint())
			vs := d.take(questions)
			if d.err != nil {
				break
			}
			e.Verdicts = verdicts[len(verdicts) : len(verdicts)+questions : len(verdicts)+questions]
			verdicts = verdicts[:len(verdicts)+questions]
			for k := range questions {
				if e.Verdicts[k] = Verdict(vs[k]); e.Verdicts[k] > Pick {
					d.err = errCorrupt
				}
			}
		}
		if d.err != nil {
			return nil, d.err
		}
		// In strictly increasing order, as encodeCache writes them: no
		// path twice, and find can search them.
		if i > 0 && rec.Rel <= r.dirs[i-1].Rel {
			return nil, errCorrupt
		}
	}
	if d.err != nil || len(d.s) != 0 || len(entries) != total {
		return nil, errCorrupt
	}
	return r, nil
}

package treescan

import (
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// cacheVersion changes whenever dirRecord's meaning changes.
const cacheVersion = 1

type cacheFileData struct {
	Version int
	Key     string
	Dirs    map[string]dirRecord
}

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
// usable cache (missing, another version or key, not ours, corrupt).
func loadCache(path, key string) map[string]dirRecord {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || !ownedByMe(fi) {
		return nil
	}
	var d cacheFileData
	if gob.NewDecoder(f).Decode(&d) != nil || d.Version != cacheVersion || d.Key != key {
		return nil
	}
	return d.Dirs
}

// saveCache replaces the cache atomically.
func saveCache(path, key string, dirs map[string]dirRecord) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".scan-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := gob.NewEncoder(tmp).Encode(cacheFileData{Version: cacheVersion, Key: key, Dirs: dirs}); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

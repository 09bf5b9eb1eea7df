//go:build unix

package policy

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// DefaultScanCacheRoot holds one scan cache directory per uid
// (LoadOptions.ScanCache): regenerable data, so below /var/cache.
const DefaultScanCacheRoot = "/var/cache/oxsupervise/scan"

// ScanCacheDir returns DefaultScanCacheRoot/UID, made when missing: the
// root directory root-owned 0755, the uid's own 0700 and owned by uid, so
// the scan running with that uid's access may write it and nobody else
// may. It is outside every writable root, so a session cannot forge what
// its next start skips. Only root can make it; for anyone else it returns
// "" and no error when it does not exist yet (the scan then reads every
// directory).
func ScanCacheDir(uid int) (string, error) {
	dir := filepath.Join(DefaultScanCacheRoot, strconv.Itoa(uid))
	if fi, err := os.Lstat(dir); err == nil {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || int(st.Uid) != uid || fi.Mode().Perm()&0o077 != 0 {
			return "", fmt.Errorf("scan cache %s is not a 0700 directory of uid %d", dir, uid)
		}
		return dir, nil
	}
	if os.Geteuid() != 0 {
		return "", nil
	}
	if err := os.MkdirAll(DefaultScanCacheRoot, 0o755); err != nil {
		return "", fmt.Errorf("scan cache: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("scan cache: %w", err)
	}
	if err := os.Lchown(dir, uid, -1); err != nil {
		return "", fmt.Errorf("scan cache: %w", err)
	}
	return dir, nil
}

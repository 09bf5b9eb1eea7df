package vmtest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// guestModules are the modules the initramfs loads, in dependency order,
// to mount the host root over virtio-9p and put an overlay on top. A
// kernel that has one built in (modules.builtin: Debian's 6.12 builds
// virtio in) gets it skipped; one of guestModulesOptional may not exist at
// all (fscache was merged into netfs in 6.12).
func guestModules() []string {
	return []string{
		"virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci",
		"netfs", "fscache", "9pnet", "9pnet_virtio", "9p", "overlay",
	}
}

var guestModulesOptional = map[string]bool{"fscache": true}

// builtinModules lists the module names compiled into the kernel whose
// modules are in modulesDir.
func builtinModules(modulesDir string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(modulesDir, "modules.builtin"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutSuffix(filepath.Base(line), ".ko"); ok {
			out[name] = true
		}
	}
	return out, nil
}

// Kernel is a bootable kernel image with its modules.
type Kernel struct {
	Image      string // path of the vmlinuz image
	Version    string // uname -r of that kernel
	ModulesDir string // /lib/modules/<Version>
	ConfigLSM  string // CONFIG_LSM of that kernel, "" when its config is missing
}

// FindKernel picks the newest PREFIX/boot/vmlinuz-* matching glob (for
// example "/boot/vmlinuz-6.1.*"), or the image itself when glob names one
// file; its modules must be in PREFIX/lib/modules.
func FindKernel(glob string) (Kernel, error) {
	images, err := filepath.Glob(glob)
	if err != nil {
		return Kernel{}, fmt.Errorf("kernel glob %q: %w", glob, err)
	}
	if len(images) == 0 {
		return Kernel{}, fmt.Errorf("no kernel image matches %s (install linux-image-amd64)", glob)
	}
	// Newest first by version, not by string: 6.1.0-10 is newer than 6.1.0-9.
	sort.Slice(images, func(i, j int) bool { return naturalLess(images[j], images[i]) })
	var k Kernel
	for _, image := range images {
		version, ok := strings.CutPrefix(filepath.Base(image), "vmlinuz-")
		if !ok {
			continue
		}
		// An image in PREFIX/boot has its modules in PREFIX/lib/modules:
		// the host's own (/boot, /lib/modules) or a kernel package
		// unpacked elsewhere (fetch-kernel.sh).
		modules := filepath.Join(filepath.Dir(filepath.Dir(image)), "lib", "modules", version)
		if _, err := os.Stat(modules); err != nil {
			continue
		}
		k = Kernel{Image: image, Version: version, ModulesDir: modules}
		break
	}
	if k.Image == "" {
		return Kernel{}, fmt.Errorf("no image matching %s has its modules in PREFIX/lib/modules beside PREFIX/boot", glob)
	}
	if config, err := os.ReadFile(filepath.Join(filepath.Dir(k.Image), "config-"+k.Version)); err == nil {
		for _, line := range strings.Split(string(config), "\n") {
			if v, ok := strings.CutPrefix(line, "CONFIG_LSM="); ok {
				k.ConfigLSM = strings.Trim(v, `"`)
			}
		}
	}
	return k, nil
}

// initScript is the initramfs's /init. It loads the modules, mounts the
// host root read-only over 9p with a tmpfs overlay on top, and
// switch_roots into it (never chroot: user namespaces are refused inside a
// chroot, which would make namespace-escape tests pass for the wrong
// reason). The guest program path and its job file come from the kernel
// command line.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
fail() {
	echo "@@oxs-vmtest initramfs failed: $*"
	poweroff -f
}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev || fail "mount devtmpfs"
for m in @MODULES@; do
	insmod /modules/$m.ko || fail "insmod $m"
done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /lower || fail "mount 9p host root"
mount -t tmpfs -o mode=0755 tmpfs /rw || fail "mount tmpfs"
mkdir -p /rw/upper /rw/work
mount -t overlay overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work /newroot || fail "mount overlay"
guest=
jobs=
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	oxs.guest=*) guest="${arg#oxs.guest=}" ;;
	oxs.jobs=*) jobs="${arg#oxs.jobs=}" ;;
	esac
done
[ -x "/newroot$guest" ] || fail "guest program $guest missing"
mount --move /dev /newroot/dev || fail "move /dev"
umount /proc /sys
exec switch_root /newroot "$guest" "$jobs"
`

// BuildInitramfs returns the path of an initramfs for k, building it
// into cacheDir unless an identical one is cached there. The cache key
// covers everything that goes in, so a changed module, busybox or script
// produces a new file.
func BuildInitramfs(k Kernel, busybox, cacheDir string) (string, error) {
	if err := checkStatic(busybox); err != nil {
		return "", err
	}
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return "", fmt.Errorf("read busybox (install busybox-static): %w", err)
	}
	builtin, err := builtinModules(k.ModulesDir)
	if err != nil {
		return "", fmt.Errorf("read built-in module list: %w", err)
	}
	var names []string
	var modules [][]byte
	for _, name := range guestModules() {
		if builtin[name] {
			continue
		}
		m, err := readModule(k.ModulesDir, name)
		if errors.Is(err, errNoModule) && guestModulesOptional[name] {
			continue
		}
		if err != nil {
			return "", err
		}
		names, modules = append(names, name), append(modules, m)
	}
	script := strings.ReplaceAll(initScript, "@MODULES@", strings.Join(names, " "))

	hash := sha256.New()
	io.WriteString(hash, script)
	hash.Write(bb)
	for _, m := range modules {
		hash.Write(m)
	}
	key := hex.EncodeToString(hash.Sum(nil))[:16]
	path := filepath.Join(cacheDir, fmt.Sprintf("initramfs-%s-%s.cpio", k.Version, key))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}

	var buf bytes.Buffer
	c := &cpioWriter{w: &buf}
	for _, dir := range []string{"bin", "dev", "proc", "sys", "lower", "rw", "newroot", "modules"} {
		c.Dir(dir, 0o755)
	}
	c.File("bin/busybox", 0o755, bb)
	c.File("init", 0o755, []byte(script))
	for i, name := range names {
		c.File("modules/"+name+".ko", 0o644, modules[i])
	}
	if err := c.Close(); err != nil {
		return "", fmt.Errorf("write initramfs: %w", err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("create cache dir: %w", err)
	}
	tmp, err := os.CreateTemp(cacheDir, ".initramfs-*")
	if err != nil {
		return "", fmt.Errorf("create initramfs: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write initramfs: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write initramfs: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("install initramfs: %w", err)
	}
	return path, nil
}

// naturalLess orders strings with digit runs compared as numbers.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := leadingDigits(a), leadingDigits(b)
		if da != "" && db != "" {
			na, nb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// checkStatic refuses a dynamically linked busybox: the initramfs has no
// shared libraries, so it would fail at the first command.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("busybox %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("busybox %s is dynamically linked; install busybox-static", path)
		}
	}
	return nil
}

// errNoModule: the kernel has no such module file.
var errNoModule = errors.New("module not found")

// readModule finds name.ko under modulesDir and returns it uncompressed:
// busybox insmod cannot load compressed modules, and distributions ship
// them as .ko, .ko.xz or .ko.zst.
func readModule(modulesDir, name string) ([]byte, error) {
	var found string
	err := filepath.WalkDir(filepath.Join(modulesDir, "kernel"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		base := d.Name()
		for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
			if base == name+ext {
				found = path
				return filepath.SkipAll
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("search module %s: %w", name, err)
	}
	if found == "" {
		return nil, fmt.Errorf("%w: %s under %s", errNoModule, name, modulesDir)
	}
	switch {
	case strings.HasSuffix(found, ".ko"):
		return os.ReadFile(found)
	case strings.HasSuffix(found, ".gz"):
		f, err := os.Open(found)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("decompress %s: %w", found, err)
		}
		return io.ReadAll(zr)
	case strings.HasSuffix(found, ".xz"):
		return decompressWith(found, "xz", "-dc")
	default:
		return decompressWith(found, "zstd", "-dcq")
	}
}

func decompressWith(path, tool string, args ...string) ([]byte, error) {
	out, err := exec.Command(tool, append(args, path)...).Output()
	if err != nil {
		return nil, fmt.Errorf("decompress %s with %s: %w", path, tool, err)
	}
	return out, nil
}

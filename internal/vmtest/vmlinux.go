package vmtest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// BootImage returns the kernel image qemu should boot: an uncompressed
// vmlinux extracted from the bzImage and cached in cacheDir when the
// kernel supports PVH entry, else the bzImage itself. Under TCG the
// kernel's own decompressor is slow (xz: about 6 s); qemu boots a PVH
// vmlinux directly, skipping both it and the BIOS.
func BootImage(k Kernel, cacheDir string) (string, error) {
	bz, err := os.ReadFile(k.Image)
	if err != nil {
		return "", fmt.Errorf("read kernel image: %w", err)
	}
	sum := sha256.Sum256(bz)
	path := filepath.Join(cacheDir, fmt.Sprintf("vmlinux-%s-%s", k.Version, hex.EncodeToString(sum[:8])))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	vmlinux, err := extractVmlinux(bz)
	if err != nil {
		return k.Image, nil // not fatal: the bzImage boots, only slower
	}
	if !hasPVHNote(vmlinux) {
		return k.Image, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("create cache dir: %w", err)
	}
	tmp, err := os.CreateTemp(cacheDir, ".vmlinux-*")
	if err != nil {
		return "", fmt.Errorf("cache vmlinux: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(vmlinux); err != nil {
		tmp.Close()
		return "", fmt.Errorf("cache vmlinux: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("cache vmlinux: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("cache vmlinux: %w", err)
	}
	return path, nil
}

// extractVmlinux finds the compressed payload in a bzImage the way the
// kernel's scripts/extract-vmlinux does: try every compression magic and
// keep the first stream that decompresses to an ELF file.
func extractVmlinux(bz []byte) ([]byte, error) {
	formats := []struct {
		magic      []byte
		decompress func([]byte) ([]byte, error)
	}{
		{[]byte{0xfd, '7', 'z', 'X', 'Z', 0x00}, func(b []byte) ([]byte, error) { return pipeThrough(b, "xz", "-dcq", "--single-stream") }},
		{[]byte{0x28, 0xb5, 0x2f, 0xfd}, func(b []byte) ([]byte, error) { return pipeThrough(b, "zstd", "-dcq") }},
		{[]byte{0x1f, 0x8b, 0x08}, func(b []byte) ([]byte, error) {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			zr.Multistream(false)
			return io.ReadAll(zr)
		}},
	}
	for _, f := range formats {
		for off := 0; ; {
			i := bytes.Index(bz[off:], f.magic)
			if i < 0 {
				break
			}
			out, _ := f.decompress(bz[off+i:])
			if bytes.HasPrefix(out, []byte(elf.ELFMAG)) {
				return out, nil
			}
			off += i + 1
		}
	}
	return nil, fmt.Errorf("no compressed ELF kernel found in the image")
}

// pipeThrough runs a decompressor; trailing data after the stream makes
// some tools exit non-zero although the output is complete, so the output
// is judged by its content, not the exit status.
func pipeThrough(in []byte, tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(tool, args...)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if len(out) > 0 {
		return out, nil
	}
	return nil, err
}

// hasPVHNote reports whether an ELF kernel has the Xen PVH entry note
// (XEN_ELFNOTE_PHYS32_ENTRY) that qemu needs to boot it directly.
func hasPVHNote(vmlinux []byte) bool {
	f, err := elf.NewFile(bytes.NewReader(vmlinux))
	if err != nil {
		return false
	}
	const xenElfnotePhys32Entry = 18
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(p.Open())
		if err != nil {
			continue
		}
		for len(notes) >= 12 {
			namesz := binary.LittleEndian.Uint32(notes[0:])
			descsz := binary.LittleEndian.Uint32(notes[4:])
			typ := binary.LittleEndian.Uint32(notes[8:])
			nameEnd := 12 + int(namesz+3)&^3
			next := nameEnd + int(descsz+3)&^3
			if nameEnd > len(notes) || next > len(notes) {
				break
			}
			name := string(bytes.TrimRight(notes[12:12+int(namesz)], "\x00"))
			if name == "Xen" && typ == xenElfnotePhys32Entry {
				return true
			}
			notes = notes[next:]
		}
	}
	return false
}

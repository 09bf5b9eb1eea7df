//go:build linux

package fsguard

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// Filesystems whose (superblock device, inode) pairs do not name one
// inode are refused by type; the device comparison in AddSession catches
// others at run time.
func TestFSTypeError(t *testing.T) {
	tests := []struct {
		name  string
		magic int64
		want  error
	}{
		{"overlayfs", unix.OVERLAYFS_SUPER_MAGIC, ErrOverlay},
		{"btrfs", btrfsMagic, ErrSubvolumes},
		{"bcachefs", bcachefsMagic, ErrSubvolumes},
		{"ext4", unix.EXT4_SUPER_MAGIC, nil},
		{"tmpfs", unix.TMPFS_MAGIC, nil},
		{"xfs", unix.XFS_SUPER_MAGIC, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := fsTypeError("/x", tt.magic)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("fsTypeError = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("fsTypeError = %v, want %v", err, tt.want)
			}
		})
	}
}

//go:build linux

// Package work holds the measured work that runs both on the host (oxbench
// worker) and inside the kernel-test VM (bench/fsvm), so both figures time
// exactly the same syscalls.
package work

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// FSMetrics are the keys FSMicro returns, in display order.
var FSMetrics = []string{"open+close (read)", "open+close (write)", "create+write 4KiB+unlink", "rename", "stat", "readdir (100 entries)"}

// PerOp times n calls of op and returns nanoseconds per call.
func PerOp(n int, op func(i int) error) (float64, error) {
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := op(i); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n), nil
}

// batch is how many calls BatchedPerOp times together.
const batch = 500

// BatchedPerOp times n calls of op in batches and returns the median
// batch's nanoseconds per call: on a loaded machine a batch that was
// preempted is an outlier, and the median ignores it where a mean would
// not.
func BatchedPerOp(n int, op func(i int) error) (float64, error) {
	var per []float64
	for done := 0; done < n; done += batch {
		k := min(batch, n-done)
		start := time.Now()
		for i := done; i < done+k; i++ {
			if err := op(i); err != nil {
				return 0, err
			}
		}
		per = append(per, float64(time.Since(start).Nanoseconds())/float64(k))
	}
	slices.Sort(per)
	if len(per)%2 == 1 {
		return per[len(per)/2], nil
	}
	return (per[len(per)/2-1] + per[len(per)/2]) / 2, nil
}

// FSMicro runs the filesystem microbenchmarks in dir with raw syscalls, so
// the numbers are the kernel's (and its LSM hooks'), not Go's.
func FSMicro(dir string, n int) (map[string]float64, error) {
	if dir == "" {
		return nil, fmt.Errorf("--dir is required")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "existing")
	if err := os.WriteFile(file, make([]byte, 4096), 0o644); err != nil {
		return nil, fmt.Errorf("prepare %s: %w", file, err)
	}
	listing := filepath.Join(dir, "listing")
	if err := os.MkdirAll(listing, 0o755); err != nil {
		return nil, err
	}
	for i := 0; i < 100; i++ {
		if err := os.WriteFile(filepath.Join(listing, fmt.Sprintf("entry-%03d", i)), nil, 0o644); err != nil {
			return nil, err
		}
	}
	fresh := filepath.Join(dir, "fresh")
	renA, renB := filepath.Join(dir, "ren-a"), filepath.Join(dir, "ren-b")
	if err := os.WriteFile(renA, nil, 0o644); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	dents := make([]byte, 32<<10)
	out := map[string]float64{}
	ops := []struct {
		name string
		op   func(i int) error
	}{
		{"open+close (read)", func(int) error {
			fd, err := unix.Open(file, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", file, err)
			}
			return unix.Close(fd)
		}},
		{"open+close (write)", func(int) error {
			fd, err := unix.Open(file, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("open %s for writing: %w", file, err)
			}
			return unix.Close(fd)
		}},
		{"create+write 4KiB+unlink", func(int) error {
			fd, err := unix.Open(fresh, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
			if err != nil {
				return fmt.Errorf("create %s: %w", fresh, err)
			}
			if _, err := unix.Write(fd, buf); err != nil {
				unix.Close(fd)
				return err
			}
			if err := unix.Close(fd); err != nil {
				return err
			}
			return unix.Unlink(fresh)
		}},
		{"rename", func(i int) error {
			from, to := renA, renB
			if i%2 == 1 {
				from, to = renB, renA
			}
			return unix.Rename(from, to)
		}},
		{"stat", func(int) error {
			var st unix.Stat_t
			return unix.Stat(file, &st)
		}},
		{"readdir (100 entries)", func(int) error {
			fd, err := unix.Open(listing, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			for {
				k, err := unix.Getdents(fd, dents)
				if err != nil {
					unix.Close(fd)
					return err
				}
				if k == 0 {
					break
				}
			}
			return unix.Close(fd)
		}},
	}
	for _, o := range ops {
		// Warm the dentry cache and the hooks' state before timing.
		if _, err := PerOp(min(n, 100), o.op); err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		ns, err := BatchedPerOp(n, o.op)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.name, err)
		}
		out[o.name] = ns
	}
	return out, nil
}

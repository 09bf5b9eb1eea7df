package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// TailOptions configure Tail.
type TailOptions struct {
	// Follow keeps reading appended records, across rotations, until the
	// context ends.
	Follow bool
	// History also reads the rotated files (oldest first) before the live
	// one.
	History bool
	// Poll is how often a follower checks for new data (default 100ms).
	Poll time.Duration
	// OnError receives lines that do not decode and gaps (a rotated file
	// deleted before it was read); Tail goes on after it. Nil ignores them.
	OnError func(error)
}

// ErrGap is reported through OnError when the follower lost track of the
// file it was reading because rotation deleted it before it was drained.
var ErrGap = errors.New("audit log rotated away before it was fully read; records may be missing")

// Tail reads records from the audit log at path and calls fn for each, in
// log order, every record exactly once; line is the record's raw JSON,
// valid only during the call. With Follow it keeps going across
// rotations: when the live name points to a new file it first drains the
// old one, then continues with the file that replaced it (found by inode,
// so a rotation burst that shifts several files is followed correctly).
func Tail(ctx context.Context, path string, opts TailOptions, fn func(r Record, line []byte) error) error {
	if opts.Poll <= 0 {
		opts.Poll = 100 * time.Millisecond
	}
	t := &tailer{path: path, opts: opts, fn: fn}
	files, err := t.openSnapshot()
	if err != nil {
		return err
	}
	for i, f := range files {
		last := i == len(files)-1
		if !last || !opts.Follow {
			err := t.drain(f, !last)
			f.Close()
			if err != nil {
				closeAll(files[i+1:])
				return err
			}
			continue
		}
		return t.follow(ctx, f)
	}
	return nil
}

type tailer struct {
	path    string
	opts    TailOptions
	fn      func(Record, []byte) error
	pending []byte
	chunk   []byte
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// openSnapshot opens the rotated files (if History) and the live file,
// oldest first, retrying if a rotation moved names while it opened them.
func (t *tailer) openSnapshot() ([]*os.File, error) {
	for attempt := 0; ; attempt++ {
		names := []string{}
		if t.opts.History {
			for i := 1; ; i++ {
				if _, err := os.Lstat(rotatedName(t.path, i)); err != nil {
					break
				}
				names = append([]string{rotatedName(t.path, i)}, names...)
			}
		}
		names = append(names, t.path)
		files := make([]*os.File, 0, len(names))
		stable := true
		for _, name := range names {
			f, err := os.Open(name)
			if err != nil {
				closeAll(files)
				if errors.Is(err, os.ErrNotExist) && attempt < 50 {
					stable = false
					break
				}
				return nil, fmt.Errorf("open audit log: %w", err)
			}
			files = append(files, f)
		}
		if stable && t.namesStill(names, files) {
			return files, nil
		}
		if stable {
			closeAll(files)
		}
		if attempt >= 50 {
			return nil, errors.New("open audit log: it keeps rotating while being opened")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (t *tailer) namesStill(names []string, files []*os.File) bool {
	for i, name := range names {
		st, err := os.Stat(name)
		if err != nil {
			return false
		}
		fst, err := files[i].Stat()
		if err != nil || !os.SameFile(st, fst) {
			return false
		}
	}
	return true
}

// drain reads f to its end. A complete file (rotated away) must end in a
// newline; a trailing fragment of the live file is a record being written.
func (t *tailer) drain(f *os.File, complete bool) error {
	if err := t.readAvailable(f); err != nil {
		return err
	}
	if complete && len(t.pending) > 0 {
		t.report(fmt.Errorf("%s ends in an incomplete record (%d bytes)", f.Name(), len(t.pending)))
	}
	t.pending = t.pending[:0]
	return nil
}

// readAvailable reads f to EOF, emitting complete lines and keeping a
// trailing fragment in t.pending.
func (t *tailer) readAvailable(f *os.File) error {
	if t.chunk == nil {
		t.chunk = make([]byte, 256<<10)
	}
	for {
		n, err := f.Read(t.chunk)
		if n > 0 {
			t.pending = append(t.pending, t.chunk[:n]...)
			if err := t.emitLines(); err != nil {
				return err
			}
		}
		if err == io.EOF || (n == 0 && err == nil) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", f.Name(), err)
		}
	}
}

func (t *tailer) emitLines() error {
	start := 0
	for {
		nl := bytes.IndexByte(t.pending[start:], '\n')
		if nl < 0 {
			break
		}
		line := t.pending[start : start+nl]
		start += nl + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		r, err := Decode(line)
		if err != nil {
			t.report(err)
			continue
		}
		if err := t.fn(r, line); err != nil {
			return err
		}
	}
	t.pending = append(t.pending[:0], t.pending[start:]...)
	if len(t.pending) > MaxLineBytes {
		t.report(fmt.Errorf("discarding %d bytes without a newline", len(t.pending)))
		t.pending = t.pending[:0]
	}
	return nil
}

func (t *tailer) report(err error) {
	if t.opts.OnError != nil {
		t.opts.OnError(err)
	}
}

func (t *tailer) follow(ctx context.Context, cur *os.File) error {
	defer func() { cur.Close() }()
	t.pending = t.pending[:0]
	tick := time.NewTicker(t.opts.Poll)
	defer tick.Stop()
	for {
		if err := t.readAvailable(cur); err != nil {
			return err
		}
		rotated, err := t.rotatedAway(cur)
		if err != nil {
			return err
		}
		if rotated {
			// The sink renames only after its last write to this file, so
			// one more read now sees everything it will ever hold.
			if err := t.drain(cur, true); err != nil {
				return err
			}
			next, err := t.successor(ctx, cur)
			if err != nil {
				return err
			}
			cur.Close()
			cur = next
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (t *tailer) rotatedAway(cur *os.File) (bool, error) {
	st, err := os.Stat(t.path)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil // between the rename and the new file's creation
	}
	if err != nil {
		return false, fmt.Errorf("stat audit log: %w", err)
	}
	fst, err := cur.Stat()
	if err != nil {
		return false, fmt.Errorf("stat audit log: %w", err)
	}
	return !os.SameFile(st, fst), nil
}

// successor opens the file written after cur: if cur is now .k, that is
// .k-1, or the live file when k is 1. Rotation renames from the oldest
// down, so if cur is still at .k after the open, what was opened is the
// successor and not a file shifted mid-rotation.
func (t *tailer) successor(ctx context.Context, cur *os.File) (*os.File, error) {
	curSt, err := cur.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat audit log: %w", err)
	}
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil && attempt > 0 {
			return nil, ctx.Err()
		}
		k := t.findRotated(curSt)
		var name string
		switch {
		case k < 0:
			// Deleted before we finished, or not yet renamed: the live
			// file is the only place to continue from.
			if attempt < 20 {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			t.report(ErrGap)
			name = t.path
		case k == 1:
			name = t.path
		default:
			name = rotatedName(t.path, k-1)
		}
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open audit log: %w", err)
		}
		if k < 0 {
			return f, nil
		}
		if st, err := os.Stat(rotatedName(t.path, k)); err == nil && os.SameFile(st, curSt) {
			return f, nil
		}
		f.Close()
	}
}

func (t *tailer) findRotated(cur os.FileInfo) int {
	for i := 1; ; i++ {
		st, err := os.Stat(rotatedName(t.path, i))
		if err != nil {
			return -1
		}
		if os.SameFile(st, cur) {
			return i
		}
	}
}

package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// DefaultPath is where the supervisor writes its audit log (DESIGN §7).
const DefaultPath = "/var/log/oxsupervise/audit.jsonl"

// SinkOptions tune a FileSink. Zero values select the documented defaults.
type SinkOptions struct {
	// MaxBytes is the size at which the live file is rotated (default
	// 64 MiB). A record is never split: rotation happens between records,
	// so a single record larger than MaxBytes still lands whole.
	MaxBytes int64
	// Keep is how many rotated files (audit.jsonl.1 … .Keep) are kept
	// (default 8). The oldest is deleted when a rotation would exceed it.
	Keep int
	// SyncEvery fsyncs after this many records (default 256); negative
	// disables count-based syncs.
	SyncEvery int
	// SyncInterval fsyncs pending records at least this often (default
	// 1s); negative disables the timer.
	SyncInterval time.Duration
	// Enrich, when set, fills fields the producer left empty (see
	// ProcEnricher). It runs before the sink's lock is taken.
	Enrich func(*Record)
	// Journal, when set, is the journald native socket (JournalSocket)
	// each record is also sent to. Best effort: the file is the record of
	// truth, and a record journald does not take is only counted
	// (SinkStats.JournalErrors).
	Journal string
}

const (
	defaultMaxBytes     = 64 << 20
	defaultKeep         = 8
	defaultSyncEvery    = 256
	defaultSyncInterval = time.Second
)

func (o SinkOptions) withDefaults() SinkOptions {
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMaxBytes
	}
	if o.Keep <= 0 {
		o.Keep = defaultKeep
	}
	if o.SyncEvery == 0 {
		o.SyncEvery = defaultSyncEvery
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = defaultSyncInterval
	}
	return o
}

// SinkStats counts what a FileSink did, for doctor and tests.
type SinkStats struct {
	Records        uint64
	Rotations      uint64
	RotationErrors uint64
	Syncs          uint64
	JournalErrors  uint64
	// LastRotationError is the most recent failed rotation; writing went
	// on into the current file, so no record was lost because of it.
	LastRotationError error
}

// FileSink appends records to a JSON-lines file and rotates it by size.
// It is safe for concurrent use: each record is encoded and written with a
// single write(2) on an O_APPEND descriptor under a mutex, and rotation
// happens under the same mutex between two records, so a reader never sees
// a split or interleaved record.
type FileSink struct {
	path string
	opts SinkOptions

	mu       sync.Mutex
	f        *os.File
	size     int64
	enc      *Encoder
	unsynced int
	stats    SinkStats
	closed   bool
	journal  *journalSender
	// syncErr is what a sync started behind a session_stop (syncBehind)
	// failed with, for the next Sync or Close to return.
	syncErr error

	stop chan struct{}
	done chan struct{}
}

// OpenFileSink opens (creating if needed) the audit log at path. A missing
// directory is created with mode 0700; the file is created with mode 0600
// and must be owned by the calling user. It refuses a symlink at path and a
// directory others can write to without the sticky bit, as either would let
// another user replace the log.
func OpenFileSink(path string, opts SinkOptions) (*FileSink, error) {
	if path == "" {
		return nil, errors.New("open audit log: empty path")
	}
	opts = opts.withDefaults()
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create audit log directory %s: %w", dir, err)
		}
	}
	if err := checkDirSafe(dir); err != nil {
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	f, size, err := openLogFile(path)
	if err != nil {
		return nil, err
	}
	s := &FileSink{path: path, opts: opts, f: f, size: size, enc: NewEncoder(nil)}
	if opts.Journal != "" {
		j, err := dialJournal(opts.Journal)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("open audit log %s: %w", path, err)
		}
		s.journal = j
	}
	if opts.SyncInterval > 0 {
		s.stop = make(chan struct{})
		s.done = make(chan struct{})
		go s.syncLoop()
	}
	return s, nil
}

func openLogFile(path string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|oNoFollow, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("open audit log %s: %w", path, err)
	}
	if err := checkFileOwner(f); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("open audit log %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("chmod audit log %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("stat audit log %s: %w", path, err)
	}
	return f, st.Size(), nil
}

// Path is the live file's path.
func (s *FileSink) Path() string { return s.path }

// Write appends r. It returns an error only when the record was not
// written; r is normalised in place.
func (s *FileSink) Write(r *Record) error {
	if s.opts.Enrich != nil {
		s.opts.Enrich(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("write audit record: sink closed")
	}
	line, err := s.enc.Marshal(r)
	if err != nil {
		return err
	}
	if s.size > 0 && s.size+int64(len(line)) > s.opts.MaxBytes {
		if err := s.rotateLocked(); err != nil {
			s.stats.RotationErrors++
			s.stats.LastRotationError = err
		}
	}
	n, err := s.f.Write(line)
	s.size += int64(n)
	if err != nil {
		if n > 0 && n < len(line) {
			// Terminate the fragment (disk full, quota) so the next record
			// starts on its own line; readers report the fragment as one
			// undecodable line instead of losing the next record too.
			m, _ := s.f.Write([]byte{'\n'})
			s.size += int64(m)
		}
		return fmt.Errorf("write audit record to %s: %w", s.path, err)
	}
	s.stats.Records++
	s.unsynced++
	if s.journal != nil && s.journal.send(r, line) != nil {
		s.stats.JournalErrors++
	}
	// Session ends and loss reports are the records an investigation
	// starts from: make them durable at once. A session_stop is its
	// session's last record, written by a supervisor whose end (telling
	// the session's client, closing its programs) need not wait for the
	// disk (a journal commit and a cache flush, ~1-2 ms), only be done
	// after it: its sync starts now, beside the rest of that end, and Sync
	// and Close wait for it. Every reader sees the record at once.
	if r.Ox.Kind == KindSessionStop {
		go s.syncBehind()
		return nil
	}
	if r.Ox.Kind == KindEventsLost || (s.opts.SyncEvery > 0 && s.unsynced >= s.opts.SyncEvery) {
		return s.syncLocked()
	}
	return nil
}

// syncBehind is the sync a session_stop starts (Write). It holds the lock
// while it syncs, so Sync and Close wait for it; if they take the lock
// first, they sync themselves and it finds nothing left to do. Its error
// is theirs to return.
func (s *FileSink) syncBehind() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if err := s.syncLocked(); err != nil {
		s.syncErr = err
	}
}

// Sync flushes written records to stable storage. Its error includes
// that of a sync a session_stop started since the last Sync.
func (s *FileSink) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	return s.syncReportingLocked()
}

// syncReportingLocked syncs, and returns the error of the sync behind a
// session_stop in place of its own, once: after a failed fsync the kernel
// may have dropped the pages it could not write and report the next one
// clean, so the earlier failure is what tells the records may be lost.
func (s *FileSink) syncReportingLocked() error {
	behind := s.syncErr
	s.syncErr = nil
	if err := s.syncLocked(); behind == nil {
		return err
	}
	return behind
}

func (s *FileSink) syncLocked() error {
	if s.unsynced == 0 {
		return nil
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync audit log %s: %w", s.path, err)
	}
	s.unsynced = 0
	s.stats.Syncs++
	return nil
}

// rotateLocked shifts audit.jsonl.N to .N+1 (dropping .Keep), renames the
// live file to .1 and opens a new live file. On failure the sink keeps
// writing to whichever live file it holds, so nothing is lost.
func (s *FileSink) rotateLocked() error {
	if err := s.syncLocked(); err != nil {
		return err
	}
	// Shift only the files that exist: scanning up to Keep on every
	// rotation would cost Keep syscalls per rotation.
	n := 0
	for n < s.opts.Keep {
		if _, err := os.Lstat(rotatedName(s.path, n+1)); err != nil {
			break
		}
		n++
	}
	if n == s.opts.Keep {
		if err := os.Remove(rotatedName(s.path, n)); err != nil {
			return fmt.Errorf("rotate audit log: %w", err)
		}
		n--
	}
	for i := n; i >= 1; i-- {
		if err := os.Rename(rotatedName(s.path, i), rotatedName(s.path, i+1)); err != nil {
			return fmt.Errorf("rotate audit log: %w", err)
		}
	}
	if err := os.Rename(s.path, rotatedName(s.path, 1)); err != nil {
		return fmt.Errorf("rotate audit log: %w", err)
	}
	f, size, err := openLogFile(s.path)
	if err != nil {
		// The renamed file is still open: keep appending to it.
		return fmt.Errorf("rotate audit log: %w", err)
	}
	s.f.Close()
	s.f, s.size = f, size
	s.stats.Rotations++
	return nil
}

func rotatedName(path string, i int) string {
	return path + "." + strconv.Itoa(i)
}

// Stats returns a snapshot of the sink's counters.
func (s *FileSink) Stats() SinkStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

func (s *FileSink) syncLoop() {
	defer close(s.done)
	t := time.NewTicker(s.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			// A failed periodic sync is retried on the next tick and
			// surfaces on the next Write/Sync/Close; the error of a sync
			// behind a session_stop is kept for them.
			s.mu.Lock()
			if !s.closed {
				_ = s.syncLocked()
			}
			s.mu.Unlock()
		}
	}
}

// Close syncs and closes the live file, once a sync behind a session_stop
// (Write) is done; its error is Close's.
func (s *FileSink) Close() error {
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.stop = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	syncErr := s.syncReportingLocked()
	s.journal.close()
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("close audit log %s: %w", s.path, err)
	}
	return syncErr
}

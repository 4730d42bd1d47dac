// Package store makes graphd's in-memory graph durable with a write-ahead log
// plus snapshot compaction.
//
// Why a WAL and not an embedded key/value store (bbolt, pebble, badger): the
// whole graph lives in memory anyway (the interpreter needs pointer-speed
// adjacency and in-memory indexes), so the only thing the disk has to do is
// remember the sequence of committed mutations. An append-only log of redo
// records is the smallest correct mechanism for that: one write and one fsync
// per commit (shared by concurrent committers: group commit), no page cache of
// our own, no second copy of the graph's structure, and recovery is "load the
// snapshot, replay the log". A B-tree store would add a dependency, a second
// representation to keep consistent and slower writes, for no gain.
//
// Files in the data directory:
//
//	snapshot   "GDSNAP01" + generation(u64), records..., end record
//	wal        "GDWAL001" + generation(u64), records...
//	LOCK       flock'ed for the lifetime of the process
//
// A record is len(u32) crc32c(u32) payload, payload being a GraphBinary list of
// redo operations for one committed traversal (so a traversal is replayed all
// or nothing). On open, the snapshot of generation G is loaded, then the WAL is
// replayed if its generation is G (a WAL with an older generation was already
// folded into the snapshot). A torn or corrupt tail (short record or CRC
// mismatch) is truncated and logged. Compaction writes snapshot.tmp
// (generation G+1), fsyncs, renames it over snapshot, then starts a fresh WAL
// with generation G+1 the same way.
package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/worldgate/worldgate/services/graphd/graph"
	"github.com/worldgate/worldgate/services/graphd/graphbinary"
)

// Storage format: 2 since vertex properties carry their ids and
// meta-properties (redo op "vprop2"). Format 1 files (op "vprop", values
// only) are still read; a data directory holding any is rewritten in format
// 2 (a snapshot and a new WAL) as soon as it is opened.
const (
	walMagic        = "GDWAL002"
	snapMagic       = "GDSNAP02"
	walMagicFormat1 = "GDWAL001"
	snapMagic1      = "GDSNAP01"
	hdrLen          = 16
	// DefaultCompactBytes is the WAL size that triggers compaction.
	DefaultCompactBytes = 64 << 20
	maxRecord           = 1 << 30
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Store is a durable, concurrency-safe graph.
type Store struct {
	mu     sync.RWMutex
	g      *graph.Graph
	dir    string
	log    *slog.Logger
	lockF  *os.File
	gen    uint64
	failed error

	walMu     sync.Mutex
	walCond   *sync.Cond
	wal       *os.File
	walSize   int64
	written   uint64
	synced    uint64
	syncing   bool
	syncErr   error
	compactN  int64
	onCompact func(time.Duration, error)
	onSync    func(time.Duration, int)
	closed    bool
	// format1 is set while opening a directory written in storage format 1.
	format1 bool
	// recBuf is the buffer Write encodes WAL records into (guarded by mu).
	recBuf []byte
}

// maxKeptRecBuf: a WAL record buffer that grew larger than this (a large transaction) is
// not kept for reuse.
const maxKeptRecBuf = 1 << 20

// Options tune a store.
type Options struct {
	CompactBytes int64
	Logger       *slog.Logger
	// OnCompact, if set, is told how long each snapshot compaction took and whether it failed
	// (graphd's metrics).
	OnCompact func(elapsed time.Duration, err error)
	// OnSync, if set, is told how long each WAL fsync took and how many write records it made
	// durable (group commit: every record written before it started).
	OnSync func(elapsed time.Duration, records int)
}

// Stats are a store's size: what graphd's metrics report.
type Stats struct {
	Vertices, Edges int
	WALBytes        int64 // the write-ahead log since the last snapshot
}

// Stats returns the store's counts and WAL size. It waits for a write in progress.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	st := Stats{Vertices: s.g.VertexCount(), Edges: s.g.EdgeCount()}
	s.mu.RUnlock()
	s.walMu.Lock()
	st.WALBytes = s.walSize
	s.walMu.Unlock()
	return st
}

// Open opens (creating if needed) the data directory; dir "" means memory only.
func Open(dir string, opt Options) (*Store, error) {
	s := &Store{g: graph.New(), dir: dir, log: opt.Logger, compactN: opt.CompactBytes, onCompact: opt.OnCompact, onSync: opt.OnSync}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.compactN <= 0 {
		s.compactN = DefaultCompactBytes
	}
	s.walCond = sync.NewCond(&s.walMu)
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lf.Close()
		return nil, fmt.Errorf("data directory %s is in use by another graphd: %w", dir, err)
	}
	s.lockF = lf
	if err := s.recover(); err != nil {
		lf.Close()
		return nil, err
	}
	if s.format1 {
		if err := s.compactLocked(); err != nil {
			lf.Close()
			if s.wal != nil {
				s.wal.Close()
			}
			return nil, fmt.Errorf("migrating %s from storage format 1: %w", dir, err)
		}
		s.format1 = false
		s.log.Info("graphd: data directory migrated to storage format 2", "dir", dir)
	}
	return s, nil
}

func (s *Store) recover() error {
	_ = os.Remove(filepath.Join(s.dir, "snapshot.tmp"))
	_ = os.Remove(filepath.Join(s.dir, "wal.tmp"))
	snapGen := uint64(0)
	if f, err := os.Open(filepath.Join(s.dir, "snapshot")); err == nil {
		gen, n, err := s.replay(f, snapMagic, true)
		f.Close()
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		snapGen = gen
		s.log.Info("graphd: loaded snapshot", "generation", gen, "records", n,
			"vertices", s.g.VertexCount(), "edges", s.g.EdgeCount())
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	s.gen = snapGen
	walPath := filepath.Join(s.dir, "wal")
	f, err := os.OpenFile(walPath, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return s.newWAL(snapGen)
	}
	if err != nil {
		return err
	}
	var hdr [hdrLen]byte
	_, herr := io.ReadFull(f, hdr[:])
	walFile := walMagic
	if herr == nil && string(hdr[:8]) == walMagicFormat1 {
		walFile, s.format1 = walMagicFormat1, true
	}
	if herr != nil || string(hdr[:8]) != walFile {
		f.Close()
		s.log.Warn("graphd: WAL header missing or torn; starting a new WAL", "path", walPath)
		return s.newWAL(snapGen)
	}
	walGen := binary.BigEndian.Uint64(hdr[8:])
	if walGen < snapGen {
		f.Close()
		s.log.Info("graphd: WAL already folded into snapshot; starting a new WAL", "walGeneration", walGen)
		return s.newWAL(snapGen)
	}
	if walGen > snapGen {
		f.Close()
		return fmt.Errorf("WAL generation %d is newer than snapshot generation %d: snapshot missing", walGen, snapGen)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return err
	}
	_, n, err := s.replay(f, walFile, false)
	if err != nil {
		f.Close()
		return fmt.Errorf("wal: %w", err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		f.Close()
		return err
	}
	s.wal, s.walSize = f, size
	s.log.Info("graphd: replayed WAL", "records", n, "vertices", s.g.VertexCount(), "edges", s.g.EdgeCount())
	return nil
}

// replay reads a snapshot or WAL. For the WAL a torn tail is truncated.
func (s *Store) replay(f *os.File, magic string, snapshot bool) (gen uint64, n int, err error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, 0, err
	}
	if len(data) >= hdrLen && magic == snapMagic && string(data[:8]) == snapMagic1 {
		s.format1 = true
	} else if len(data) < hdrLen || string(data[:8]) != magic {
		return 0, 0, errors.New("bad header")
	}
	gen = binary.BigEndian.Uint64(data[8:16])
	off := hdrLen
	sawEnd := false
	for off < len(data) {
		bad := ""
		if len(data)-off < 8 {
			bad = "short record header"
		} else {
			l := binary.BigEndian.Uint32(data[off:])
			c := binary.BigEndian.Uint32(data[off+4:])
			if l > maxRecord || int(l) > len(data)-off-8 {
				bad = "short record"
			} else if crc32.Checksum(data[off+8:off+8+int(l)], crcTable) != c {
				bad = "checksum mismatch"
			} else {
				v, derr := graphbinary.NewReader(data[off+8 : off+8+int(l)]).Value()
				ops, ok := v.([]any)
				if derr != nil || !ok {
					return gen, n, fmt.Errorf("undecodable record at offset %d: %v", off, derr)
				}
				if len(ops) == 1 {
					if m, ok := ops[0].([]any); ok && len(m) == 1 && m[0] == "end" {
						sawEnd = true
						off += 8 + int(l)
						continue
					}
				}
				for _, op := range ops {
					if err := s.g.Apply(op); err != nil {
						return gen, n, fmt.Errorf("record at offset %d: %w", off, err)
					}
				}
				n++
				off += 8 + int(l)
				continue
			}
		}
		if snapshot {
			return gen, n, fmt.Errorf("corrupt snapshot at offset %d: %s", off, bad)
		}
		s.log.Warn("graphd: torn WAL tail detected; truncating", "offset", off, "size", len(data), "reason", bad)
		if err := f.Truncate(int64(off)); err != nil {
			return gen, n, err
		}
		if err := f.Sync(); err != nil {
			return gen, n, err
		}
		break
	}
	if snapshot && !sawEnd {
		return gen, n, errors.New("snapshot has no end record")
	}
	return gen, n, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *Store) newWAL(gen uint64) error {
	tmp := filepath.Join(s.dir, "wal.tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	var hdr [hdrLen]byte
	copy(hdr[:], walMagic)
	binary.BigEndian.PutUint64(hdr[8:], gen)
	if _, err := f.Write(hdr[:]); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "wal")); err != nil {
		f.Close()
		return err
	}
	if err := syncDir(s.dir); err != nil {
		f.Close()
		return err
	}
	if s.wal != nil {
		s.wal.Close()
	}
	s.wal, s.walSize, s.gen = f, hdrLen, gen
	return nil
}

func frame(ops []any) ([]byte, error) {
	return appendFrame(make([]byte, 0, 256), ops)
}

// appendFrame appends the WAL record of ops to buf.
func appendFrame(buf []byte, ops []any) ([]byte, error) {
	w := &graphbinary.Writer{Buf: append(buf, make([]byte, 8)...)}
	if err := w.Value(ops); err != nil {
		return nil, err
	}
	b := w.Buf
	rec := b[len(buf):]
	binary.BigEndian.PutUint32(rec[0:], uint32(len(rec)-8))
	binary.BigEndian.PutUint32(rec[4:], crc32.Checksum(rec[8:], crcTable))
	return b, nil
}

// Read runs fn with shared access to the graph.
func (s *Store) Read(fn func(g *graph.Graph) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return fn(s.g)
}

// Write runs fn with exclusive access. If fn fails, every mutation it made is
// rolled back. Otherwise the mutations are appended to the WAL and Write
// returns only once they are on stable storage.
func (s *Store) Write(ctx context.Context, fn func(g *graph.Graph, tx *graph.Tx) error) error {
	s.mu.Lock()
	if s.failed != nil {
		s.mu.Unlock()
		return fmt.Errorf("store is read-only after an I/O failure: %w", s.failed)
	}
	tx := s.g.Begin()
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("internal error: %v", p)
			}
		}()
		err = fn(s.g, tx)
	}()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		tx.Rollback()
		s.mu.Unlock()
		return err
	}
	if s.wal == nil || len(tx.Ops()) == 0 {
		s.mu.Unlock()
		return nil
	}
	rec, err := appendFrame(s.recBuf[:0], tx.Ops())
	if err != nil {
		tx.Rollback()
		s.mu.Unlock()
		return err
	}
	if cap(rec) <= maxKeptRecBuf {
		s.recBuf = rec // reused by the next Write: the WAL write below is done with rec when it returns
	}
	s.walMu.Lock()
	_, werr := s.wal.Write(rec)
	if werr != nil {
		s.walMu.Unlock()
		// the bytes may be partially written: the tail will be truncated on
		// recovery; refuse further writes so memory never runs ahead of disk.
		tx.Rollback()
		s.failed = werr
		s.mu.Unlock()
		return fmt.Errorf("wal write: %w", werr)
	}
	s.walSize += int64(len(rec))
	s.written++
	seq := s.written
	needCompact := s.walSize > s.compactN
	s.walMu.Unlock()
	if needCompact {
		if err := s.waitSync(seq); err != nil {
			s.mu.Unlock()
			return err
		}
		if cerr := s.compactLocked(); cerr != nil {
			s.log.Error("graphd: compaction failed", "err", cerr)
		}
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	return s.waitSync(seq)
}

// waitSync blocks until WAL record seq is fsynced (group commit: one fsync
// covers every record written before it started).
func (s *Store) waitSync(seq uint64) error {
	s.walMu.Lock()
	defer s.walMu.Unlock()
	for s.synced < seq {
		if s.syncErr != nil {
			return s.syncErr
		}
		if s.syncing {
			s.walCond.Wait()
			continue
		}
		s.syncing = true
		target := s.written
		f := s.wal
		from := s.synced
		s.walMu.Unlock()
		start := time.Now()
		err := f.Sync()
		if s.onSync != nil && err == nil {
			s.onSync(time.Since(start), int(target-from))
		}
		s.walMu.Lock()
		s.syncing = false
		if err != nil {
			s.syncErr = fmt.Errorf("wal fsync: %w", err)
			s.walCond.Broadcast()
			return s.syncErr
		}
		if target > s.synced {
			s.synced = target
		}
		s.walCond.Broadcast()
	}
	return nil
}

// Compact writes a snapshot and starts a new WAL.
func (s *Store) Compact() error {
	if s.dir == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.waitSync(s.written); err != nil {
		return err
	}
	return s.compactLocked()
}

func (s *Store) compactLocked() error {
	start := time.Now()
	err := s.compact()
	if s.onCompact != nil {
		s.onCompact(time.Since(start), err)
	}
	return err
}

func (s *Store) compact() error {
	gen := s.gen + 1
	tmp := filepath.Join(s.dir, "snapshot.tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, hdrLen, 1<<20)
	copy(buf, snapMagic)
	binary.BigEndian.PutUint64(buf[8:], gen)
	var batch []any
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		rec, err := frame(batch)
		if err != nil {
			return err
		}
		buf = append(buf, rec...)
		batch = batch[:0]
		if len(buf) > 1<<20 {
			if _, err := f.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		return nil
	}
	err = s.g.Dump(func(op []any) error {
		batch = append(batch, op)
		if len(batch) >= 512 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return err
	}
	batch = append(batch, []any{"end"})
	if err := flush(); err != nil {
		return err
	}
	if _, err := f.Write(buf); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "snapshot")); err != nil {
		return err
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	s.walMu.Lock()
	defer s.walMu.Unlock()
	if err := s.newWAL(gen); err != nil {
		return err
	}
	s.synced = s.written // everything written so far is in the snapshot
	s.log.Info("graphd: compacted", "generation", gen, "vertices", s.g.VertexCount(), "edges", s.g.EdgeCount())
	return nil
}

// Close compacts (best effort) and releases the data directory.
func (s *Store) Close() error {
	if s.dir == "" {
		return nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	var err error
	if s.failed == nil {
		if err = s.waitSync(s.written); err == nil && s.walSize > hdrLen {
			err = s.compactLocked()
		}
	}
	s.closed = true
	s.failed = errors.New("store closed")
	if s.wal != nil {
		s.wal.Close()
	}
	s.mu.Unlock()
	if s.lockF != nil {
		s.lockF.Close()
	}
	return err
}

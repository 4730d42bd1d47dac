package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gofrs/flock"
)

// dataDirLockFile is the file in the data directory whose lock marks it in use; it holds the
// PID of the process holding it.
const dataDirLockFile = "worldgate.lock"

// lockDataDir takes the data directory for this process, before anything in it is opened: a
// second `worldgate dev` on the same directory must not open the first one's JetStream store
// and graph. It fails at once, naming the directory and the PID of the process that holds it.
// unlock releases it (the kernel releases it too if the process dies).
func lockDataDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	path := filepath.Join(dir, dataDirLockFile)
	l := flock.New(path)
	ok, err := l.TryLock()
	if err != nil {
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	if !ok {
		holder := "unknown"
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
			holder = strings.TrimSpace(string(b))
		}
		return nil, fmt.Errorf("data directory %s is in use by another worldgate (pid %s); stop that one first, or pass -data-dir with another directory", dir, holder)
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		_ = l.Unlock()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return func() { _ = l.Unlock() }, nil
}

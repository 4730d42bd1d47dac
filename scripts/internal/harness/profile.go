package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Profile records a CPU profile of every worker, NATS node and graphd started with ProcsOptions.Pprof for d, all at
// once, into dir as NAME.pprof (go tool pprof reads it; the binaries are in BinDir). It returns
// the files written; a worker that could not be profiled is an error naming it, the others'
// files are still written.
func (ps *Procs) Profile(ctx context.Context, dir string, d time.Duration) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	secs := strconv.Itoa(max(int(d.Round(time.Second)/time.Second), 1))
	var (
		mu    sync.Mutex
		files []string
		errs  []error
		wg    sync.WaitGroup
	)
	for _, p := range ps.List {
		addr := p.Admin
		if p.Kind == "nats" || p.Kind == "graphd" {
			addr = p.Prof
		} else if p.Kind != "worker" {
			continue
		}
		if addr == "" {
			continue
		}
		wg.Go(func() {
			path := filepath.Join(dir, p.Name+".pprof")
			err := fetchProfile(ctx, "http://"+addr+"/debug/pprof/profile?seconds="+secs, path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("profile %s: %w", p.Name, err))
				return
			}
			files = append(files, path)
		})
	}
	wg.Wait()
	return files, errors.Join(errs...)
}

func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s %s (was it started with -pprof?)", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

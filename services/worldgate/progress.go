package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a one-line progress display on a terminal. A nil *progress draws nothing.
type progress struct {
	w     io.Writer
	name  string
	total int
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, name string) *progress {
	p := &progress{w: w, name: name, start: time.Now()}
	if f, err := os.Open(name); err == nil {
		// Count lines up front so the bar knows its length; stdin has no length.
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			p.total += bytes.Count(buf[:n], []byte{'\n'})
			if err != nil {
				break
			}
		}
		f.Close()
	}
	return p
}

func (p *progress) update(n int) {
	if p == nil || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.draw(n)
}

func (p *progress) draw(n int) {
	rate := float64(n) / max(time.Since(p.start).Seconds(), 1e-3)
	if p.total <= 0 {
		fmt.Fprintf(p.w, "\r%s: %d lines, %.0f/s ", p.name, n, rate)
		return
	}
	const width = 30
	filled := min(width, n*width/p.total)
	fmt.Fprintf(p.w, "\r%s [%s%s] %d/%d %.0f/s ", p.name, strings.Repeat("=", filled), strings.Repeat(" ", width-filled), n, p.total, rate)
}

func (p *progress) clear() {
	if p != nil {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func (p *progress) done(n int) {
	if p == nil {
		return
	}
	p.draw(n)
	fmt.Fprintln(p.w)
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

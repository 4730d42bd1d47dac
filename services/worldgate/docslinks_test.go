package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The docs point at what exists (issue 40: docs/deploy.md named a README section that did not
// exist): every relative link of README.md and docs/*.md names a file of the repository, every
// #anchor into a page one of its headings, and every README "Section" a heading of the README.
func TestDocsLinksResolve(t *testing.T) {
	repo := "../.."
	pages, err := filepath.Glob(filepath.Join(repo, "docs/*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(repo, "README.md"))
	anchors := map[string]map[string]bool{}
	headings := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		raw, err := os.ReadFile(page)
		if err != nil {
			return nil
		}
		a := map[string]bool{}
		inFence := false
		for line := range strings.SplitSeq(string(raw), "\n") {
			if strings.HasPrefix(line, "```") {
				inFence = !inFence
			}
			if h, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && !inFence && strings.HasPrefix(line, "#") {
				a["title:"+h] = true
				a[githubAnchor(h)] = true
			}
		}
		anchors[page] = a
		return a
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	section := regexp.MustCompile(`README(?:\.md)?[:,]? "([^"]+)"`)
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(repo, page)
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s links to %s, which does not exist", name, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !headings(path)[anchor] {
				t.Errorf("%s links to %s: no such heading", name, target)
			}
		}
		for _, m := range section.FindAllStringSubmatch(string(raw), -1) {
			if !headings(filepath.Join(repo, "README.md"))["title:"+m[1]] {
				t.Errorf("%s refers to the README's section %q, which does not exist", name, m[1])
			}
		}
	}
}

// githubAnchor is the anchor GitHub gives a heading: lower-cased, punctuation dropped, spaces
// as dashes.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

package structuretest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// jetstream's key listings (KeyValue.ListKeys, ListKeysFiltered) can come back short while keys
// are put; natsx.ListKeys cannot. Every listing of keys goes through it (services, shared,
// scripts).
func TestKeyListingsGoThroughNatsx(t *testing.T) {
	call := regexp.MustCompile(`(\w+)\.ListKeys(Filtered)?\(`)
	files := 0
	for _, root := range []string{"../..", "../../../shared", "../../../scripts"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			files++
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range call.FindAllStringSubmatch(string(src), -1) {
				if m[1] != "natsx" {
					t.Errorf("%s calls %s: use natsx.ListKeys (jetstream's listing can miss keys while others are put)", path, m[0])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 200 {
		t.Fatalf("walked %d Go files: the walk is looking in the wrong place", files)
	}
}
